//! A sample is delivered or refused the same way in every epoch and on every backend. A
//! crop-aware decode stops at the bottom of its window, so damage in the entropy-coded data
//! below it (a bit flip that keeps the file's size is often found only at the end of a
//! scan, and may be fatal even to a lenient decode) would be missed or not depending on
//! the epoch's crop, while the device backends, which entropy-decode whole files, always
//! find it. So the first time a JPEG is decoded for part of its image, in strict or
//! lenient mode, its entropy-coded data is verified whole, once. The crop's own decode
//! does it: it reads on past the window to the file's end, entropy-decoding the rows below
//! and dropping them (`decode::cpu::decode_image_judging_whole`): about one decode
//! instead of two. When that finds the file clean, the file is recorded clean. Anything
//! else (a warning or an error, rare) is judged again by a decode at 1/8 scale (the
//! Huffman or arithmetic decoding complete, the inverse DCT and colour conversion a
//! sixty-fourth of the work) under the pipeline's own strictness, and the crop decoded
//! again as in any later epoch, so a damaged file's verdict and pixels are those of every
//! epoch. The verdict (refused, or delivered with the whole file's warning) is kept for
//! the pipeline's life, keyed by the sample and a CRC-32C of its bytes, so a file
//! rewritten between epochs is verified again.
//!
//! A JPEG on the device entropy path is verified by the device instead: until its verdict
//! is known, every restart interval of the file is uploaded and decoded (the blocks outside
//! the window dropped), and a batch that runs with none of them flagged records the file
//! as clean (a flagged one takes the host path, which judges it); later crops upload only
//! the intervals under their window. The same holds for a file without restart markers
//! (the self-synchronising decode): until its verdict is known every block is decoded;
//! later crops write only the blocks down to their window's last MCU, the subsequences
//! below it skipped.
//!
//! A clean file's verdict keeps what lets its later crops decode less (its [`CropAid`],
//! `decode::crop_index`): the [`RowIndex`] its first decode recorded, for a JPEG whose one scan is
//! Huffman-coded without restart markers (where each MCU row's entropy-coded data
//! starts; later crops entropy-decode only the rows and columns they need,
//! `decode::cpu::decode_image_resuming`), or, for a progressive JPEG, a restart-marked
//! baseline copy of its coefficients, made by its first decode (which decodes its crop
//! from the copy, as later crops do: only the MCU rows they need, the same pixels). The
//! aids together are held to a cap (`PipelineBuilder::crop_index_bytes`, default
//! [`INDEX_BYTES`]); files past it are decoded as they are.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::decode::crop_index::CropAid;
use crate::decode::{cpu, DecodeError, DecodeOptions, DecodeWarning, Image8};

/// The most memory the crop index of a pipeline's files takes by default: a row index is
/// about 24 bytes per MCU row (about 1 KB for a 500x375 photo), a baseline copy about the
/// size of the progressive file.
pub(crate) const INDEX_BYTES: usize = 256 << 20;

/// What verifying a file found: refused with this error, or decodable with the whole
/// file's warning, if any.
type Outcome = Result<Option<DecodeWarning>, DecodeError>;

/// The verdicts of the files verified so far (by sample id).
#[derive(Debug)]
pub(crate) struct Verdicts {
    map: Mutex<Files>,
    /// The most bytes the aids may hold together.
    index_cap: usize,
}

/// The verdicts by sample id, with the bytes their aids hold together.
#[derive(Debug, Default)]
struct Files {
    verdicts: HashMap<u64, Verdict>,
    index_bytes: usize,
}

#[derive(Debug)]
struct Verdict {
    key: Key,
    outcome: Outcome,
    aid: CropAid,
}

/// What identifies a file's bytes: their length and CRC-32C.
pub(crate) type Key = (u64, u32);

impl Verdicts {
    /// No verdicts yet; aids kept up to `index_cap` bytes together.
    pub(crate) fn new(index_cap: usize) -> Self {
        Verdicts {
            map: Mutex::default(),
            index_cap,
        }
    }

    /// The bytes the aids hold together.
    pub(crate) fn index_bytes(&self) -> usize {
        self.map.lock().map_or(0, |m| m.index_bytes)
    }

    /// The key of `bytes`, computed once per decode and passed to the calls below.
    pub(crate) fn key(bytes: &[u8]) -> Key {
        (bytes.len() as u64, crc32c::crc32c(bytes))
    }

    /// The verdict on sample `id` if a file with these bytes was verified.
    pub(crate) fn known(&self, id: u64, key: Key) -> Option<Outcome> {
        self.known_aided(id, key).map(|(outcome, _)| outcome)
    }

    /// [`Verdicts::known`], with the file's aid.
    pub(crate) fn known_aided(&self, id: u64, key: Key) -> Option<(Outcome, CropAid)> {
        let map = self.map.lock().ok()?;
        let v = map.verdicts.get(&id).filter(|v| v.key == key)?;
        Some((v.outcome.clone(), v.aid.clone()))
    }

    /// Records the verdict on sample `id`'s file, found by [`Verdicts::check`] or by a
    /// decode that read the whole file (a crop's first decode, see `worker`).
    pub(crate) fn record(&self, id: u64, key: Key, outcome: Outcome) {
        self.record_aided(id, key, outcome, CropAid::default());
    }

    /// [`Verdicts::record`], keeping the file's aid while the aids together stay within
    /// the cap.
    pub(crate) fn record_aided(&self, id: u64, key: Key, outcome: Outcome, aid: CropAid) {
        let Ok(mut map) = self.map.lock() else { return };
        if let Some(old) = map.verdicts.remove(&id) {
            map.index_bytes -= old.aid.bytes();
        }
        let aid = self.within_cap(&map, aid);
        map.index_bytes += aid.bytes();
        map.verdicts.insert(id, Verdict { key, outcome, aid });
    }

    /// Whether it keeps any aid (a cap above 0): a first decode makes a progressive
    /// JPEG's copy only then.
    pub(crate) fn keeps_aids(&self) -> bool {
        self.index_cap > 0
    }

    fn within_cap(&self, map: &Files, aid: CropAid) -> CropAid {
        if map.index_bytes + aid.bytes() <= self.index_cap {
            aid
        } else {
            CropAid::default()
        }
    }

    /// The verdict on `bytes` (sample `id`), decoded under `base` (its limits and
    /// strictness), verifying the file when it has not been, or has changed.
    pub(crate) fn check(&self, id: u64, bytes: &[u8], base: &DecodeOptions) -> Outcome {
        self.check_keyed(id, bytes, Self::key(bytes), base)
    }

    /// [`Verdicts::check`] with the key already computed.
    pub(crate) fn check_keyed(
        &self,
        id: u64,
        bytes: &[u8],
        key: Key,
        base: &DecodeOptions,
    ) -> Outcome {
        if let Some(outcome) = self.known(id, key) {
            return outcome;
        }
        let opts = DecodeOptions {
            scale: 8,
            window: None,
            ..*base
        };
        let mut scratch = Image8::default();
        let outcome = cpu::decode_image_report(bytes, &opts, &mut scratch).map(|r| r.warning);
        self.record(id, key, outcome.clone());
        outcome
    }

    /// Whether `bytes` (sample `id`) was verified and found clean (no warning), without
    /// verifying it.
    pub(crate) fn known_clean(&self, id: u64, bytes: &[u8]) -> bool {
        matches!(self.known(id, Self::key(bytes)), Some(Ok(None)))
    }

    /// Records that `bytes` (sample `id`) was verified whole elsewhere and found clean:
    /// the device entropy path decoded every restart interval of the file without a flag.
    pub(crate) fn record_clean(&self, id: u64, bytes: &[u8]) {
        self.record(id, Self::key(bytes), Ok(None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> CropAid {
        CropAid::rows_for_tests(n)
    }

    /// The aids together stay within the cap: one past it is not kept (its verdict is),
    /// and a file recorded again gives back what its old aid held.
    #[test]
    fn crop_aids_are_held_to_their_cap() {
        let one = rows(20).bytes();
        let v = Verdicts::new(2 * one + one / 2);
        for id in 0..3 {
            v.record_aided(id, (1, 1), Ok(None), rows(20));
        }
        assert_eq!(v.index_bytes(), 2 * one);
        let indexed = |id| {
            v.known_aided(id, (1, 1))
                .is_some_and(|(_, aid)| aid.is_rows())
        };
        assert!(indexed(0) && indexed(1) && !indexed(2));
        assert!(matches!(v.known(2, (1, 1)), Some(Ok(None))));
        // File 0 rewritten: its new verdict has no index, and the room goes to file 2.
        v.record(0, (2, 2), Ok(None));
        assert_eq!(v.index_bytes(), one);
        v.record_aided(2, (1, 1), Ok(None), rows(20));
        assert!(indexed(2) && !indexed(0));
        assert_eq!(v.index_bytes(), 2 * one);
        // A cap of 0 keeps none.
        let none = Verdicts::new(0);
        none.record_aided(0, (1, 1), Ok(None), rows(1));
        assert_eq!(none.index_bytes(), 0);
        // A copy takes its room, and gives it back when its file is recorded again.
        let v = Verdicts::new(100);
        v.record_aided(7, (1, 1), Ok(None), CropAid::copy_for_tests(60));
        assert_eq!(v.index_bytes(), 60);
        v.record_aided(7, (2, 2), Ok(None), CropAid::copy_for_tests(120));
        assert_eq!(v.index_bytes(), 0, "past the cap: none kept");
        assert!(v
            .known_aided(7, (2, 2))
            .is_some_and(|(_, aid)| aid.is_none()));
        assert!(v.keeps_aids() && !none.keeps_aids());
    }
}
