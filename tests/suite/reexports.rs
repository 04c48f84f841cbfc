//! What the public API hands back can be named from the top of the crate: a caller
//! matching on `batch.mix()`, reading padded boxes or replacements, the files listing
//! skipped, a subset's role or a split's manifest writes `stoker::X`, with no module path.
//! Every type below is named only so.

use crate::common;

/// A user transform written as a function, its types named from the top.
fn invert(s: &mut stoker::UserSample<'_>) -> stoker::TransformResult {
    s.pixels_mut().iter_mut().for_each(|v| *v = 255 - *v);
    Ok(())
}

/// The decode error inside a library error, if it is one.
fn decode_error(e: &stoker::Error) -> Option<&stoker::DecodeError> {
    match e {
        stoker::Error::Decode(d) => Some(d),
        _ => None,
    }
}

#[test]
fn what_the_api_returns_is_named_from_the_top() {
    let dir = tempfile::tempdir().expect("tempdir");
    common::png_folder(dir.path(), 2, 4, 11);
    common::write(dir.path(), "class0/notes.txt", b"not an image");
    let data: stoker::Dataset = stoker::Dataset::image_folder(dir.path()).expect("folder");

    // Listing: what it left out, and where each sample's bytes are.
    let skipped: &[stoker::Skipped] = data.skipped();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(
        skipped[0].reason,
        stoker::SkipReason::Extension("txt".into())
    );
    for s in data.samples() {
        match &s.location {
            stoker::Location::File(p) => assert!(p.is_file(), "{}", p.display()),
            other => panic!("{}: not a file: {other:?}", s.path),
        }
    }

    // The split: its subsets' roles, its manifest, its check, what it placed.
    let split: stoker::Split = data
        .clone()
        .split(stoker::SplitSpec::fraction(0.25).seed(3))
        .expect("split");
    assert_eq!(split.train().role(), stoker::Role::Train);
    assert_eq!(split.val().role(), stoker::Role::Validation);
    let manifest: &stoker::Manifest = split.manifest();
    let report: stoker::CheckReport = manifest.check(Some(&data));
    assert!(report.ok(), "{:?}", report.problems);
    let added: stoker::Added = split.added();
    assert_eq!(added.train + added.val, data.len());

    // A mixed batch: its mix, padded boxes, replacements.
    let pipe = stoker::Pipeline::builder(data.clone().all())
        .backend(stoker::BackendKind::Cpu)
        .augment(
            stoker::Augment::new()
                .resize(16, 16)
                .dtype(stoker::DType::F32)
                .mixup(0.4),
        )
        .batch_size(4)
        .build()
        .expect("pipeline");
    let _sampler: &stoker::Sampler = pipe.sampler();
    let batch = common::first_batch(&pipe);
    let mix: Option<&stoker::BatchMix> = batch.mix();
    match mix.map(|m| m.kind) {
        Some(stoker::MixKind::MixUp) => {}
        other => panic!("MixUp alone asked for, got {other:?}"),
    }
    let boxes: stoker::PaddedBoxes = batch.padded_boxes();
    assert_eq!(boxes.counts, vec![0; batch.len()]);
    let replaced: &[stoker::Replacement] = batch.replacements();
    assert!(replaced.is_empty());
    // A host batch has no device buffers: each backend's typed accessors say so.
    assert!(stoker::OnDevice::device_buffers(&batch).is_none());
    #[cfg(feature = "wgpu")]
    assert!(stoker::WgpuBatch::wgpu_images(&batch).is_none());
    #[cfg(feature = "cuda")]
    assert!(stoker::CudaBatch::cuda_event(&batch).is_none());
    drop(batch);
    let paths: stoker::DecodePaths = pipe.decode_paths();
    assert_eq!(paths.hardware, 0, "no hardware decoder on the CPU backend");

    // A user transform, and the decode error a library call can carry.
    let pipe = stoker::Pipeline::builder(data.all())
        .backend(stoker::BackendKind::Cpu)
        .augment(stoker::Augment::new().resize(8, 8))
        .transform(invert)
        .batch_size(2)
        .build()
        .expect("pipeline with a transform");
    assert_eq!(common::first_batch(&pipe).len(), 2);
    let e = stoker::Error::Decode(stoker::decode::DecodeError::Unsupported("x".into()));
    assert!(decode_error(&e).is_some());
}
