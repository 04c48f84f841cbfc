//! What each epoch of a pipeline over a folder did with each sample, by path: for the
//! suites that compare epochs, backends and pipelines sample by sample.

use std::collections::BTreeMap;
use std::path::Path;

/// What one epoch did with a sample: its pixels and its warning (kind and message), or the
/// reason it was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered(Vec<u8>, Option<String>),
    Refused(String),
}

impl Outcome {
    /// The pixels, if delivered.
    pub fn pixels(&self) -> Option<&[u8]> {
        match self {
            Outcome::Delivered(p, _) => Some(p),
            Outcome::Refused(_) => None,
        }
    }
}

/// Epochs `epochs` (in turn) of a pipeline over the images under `dir` on `backend` with
/// `aug`, batches of 8, two workers, strict or lenient decoding, seeded with `seed`: each
/// sample's outcome by path, every sample once an epoch.
pub fn folder_epochs(
    dir: &Path,
    (backend, aug, strict, seed): (stoker::BackendKind, stoker::Augment, bool, u64),
    epochs: &[u64],
) -> Vec<BTreeMap<String, Outcome>> {
    let data = stoker::Dataset::image_folder(dir).expect("folder").all();
    let names: BTreeMap<u64, String> = data
        .samples()
        .iter()
        .map(|s| (s.id, s.path.clone()))
        .collect();
    let pipe = stoker::Pipeline::builder(data)
        .backend(backend)
        .augment(aug)
        .batch_size(8)
        .workers(2)
        .strict_decode(strict)
        .seed(seed)
        .build()
        .expect("pipeline");
    let one = |e: u64| {
        let mut out = BTreeMap::new();
        for b in pipe.epoch(e).expect("epoch") {
            let b = b.expect("batch");
            let px = b.read_images().expect("images");
            let per = px.len() / b.ids().len().max(1);
            for (k, id) in b.ids().iter().enumerate() {
                let warning = b
                    .warnings()
                    .iter()
                    .find(|w| w.slot == k)
                    .map(|w| format!("{:?}: {}", w.kind, w.message));
                let pixels = px[k * per..(k + 1) * per].to_vec();
                let o = Outcome::Delivered(pixels, warning);
                assert!(out.insert(names[id].clone(), o).is_none());
            }
            for err in b.errors() {
                let o = Outcome::Refused(err.reason.clone());
                assert!(out.insert(err.path.clone(), o).is_none(), "{err}");
            }
        }
        assert_eq!(out.len(), names.len(), "epoch {e}: every sample once");
        out
    };
    epochs.iter().map(|&e| one(e)).collect()
}
