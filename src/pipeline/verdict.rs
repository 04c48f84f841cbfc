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

use std::collections::HashMap;
use std::sync::Mutex;

use crate::decode::{cpu, DecodeError, DecodeOptions, DecodeWarning, Image8};

/// What verifying a file found: refused with this error, or decodable with the whole
/// file's warning, if any.
type Outcome = Result<Option<DecodeWarning>, DecodeError>;

/// The verdicts of the files verified so far (by sample id).
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    map: Mutex<HashMap<u64, (u64, u32, Outcome)>>,
}

/// What identifies a file's bytes: their length and CRC-32C.
pub(crate) type Key = (u64, u32);

impl Verdicts {
    /// The key of `bytes`, computed once per decode and passed to the calls below.
    pub(crate) fn key(bytes: &[u8]) -> Key {
        (bytes.len() as u64, crc32c::crc32c(bytes))
    }

    /// The verdict on sample `id` if a file with these bytes was verified.
    pub(crate) fn known(&self, id: u64, key: Key) -> Option<Outcome> {
        let map = self.map.lock().ok()?;
        let (l, c, outcome) = map.get(&id)?;
        ((*l, *c) == key).then(|| outcome.clone())
    }

    /// Records the verdict on sample `id`'s file, found by [`Verdicts::check`] or by a
    /// decode that read the whole file (a crop's first decode, see `worker`).
    pub(crate) fn record(&self, id: u64, key: Key, outcome: Outcome) {
        if let Ok(mut map) = self.map.lock() {
            map.insert(id, (key.0, key.1, outcome));
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
