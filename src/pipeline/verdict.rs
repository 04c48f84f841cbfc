//! A sample is delivered or refused the same way in every epoch and on every backend. A
//! crop-aware decode stops at the bottom of its window, so damage in the entropy-coded data
//! below it (a bit flip that keeps the file's size is often found only at the end of a
//! scan, and may be fatal even to a lenient decode) would be missed or not depending on
//! the epoch's crop, while the device backends, which entropy-decode whole files, always
//! find it. So before a JPEG is first decoded for part of its image, in strict or lenient
//! mode, its entropy-coded data is verified whole, once: a decode at 1/8 scale (the
//! Huffman or arithmetic decoding is complete, the inverse DCT and colour conversion a
//! sixty-fourth of the work) under the pipeline's own strictness. The verdict (refused, or
//! delivered with the whole file's warning) is kept for the pipeline's life, keyed by the
//! sample and a CRC-32C of its bytes, so a file rewritten between epochs is verified again.
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

impl Verdicts {
    /// The verdict on `bytes` (sample `id`), decoded under `base` (its limits and
    /// strictness), verifying the file when it has not been, or has changed.
    pub(crate) fn check(&self, id: u64, bytes: &[u8], base: &DecodeOptions) -> Outcome {
        let (len, crc) = (bytes.len() as u64, crc32c::crc32c(bytes));
        if let Ok(map) = self.map.lock() {
            if let Some((l, c, outcome)) = map.get(&id) {
                if (*l, *c) == (len, crc) {
                    return outcome.clone();
                }
            }
        }
        let opts = DecodeOptions {
            scale: 8,
            window: None,
            ..*base
        };
        let mut scratch = Image8::default();
        let outcome = cpu::decode_image_report(bytes, &opts, &mut scratch).map(|r| r.warning);
        if let Ok(mut map) = self.map.lock() {
            map.insert(id, (len, crc, outcome.clone()));
        }
        outcome
    }

    /// Whether `bytes` (sample `id`) was verified and found clean (no warning), without
    /// verifying it.
    pub(crate) fn known_clean(&self, id: u64, bytes: &[u8]) -> bool {
        let (len, crc) = (bytes.len() as u64, crc32c::crc32c(bytes));
        self.map.lock().is_ok_and(|map| {
            map.get(&id)
                .is_some_and(|(l, c, o)| (*l, *c) == (len, crc) && matches!(o, Ok(None)))
        })
    }

    /// Records that `bytes` (sample `id`) was verified whole elsewhere and found clean:
    /// the device entropy path decoded every restart interval of the file without a flag.
    pub(crate) fn record_clean(&self, id: u64, bytes: &[u8]) {
        let (len, crc) = (bytes.len() as u64, crc32c::crc32c(bytes));
        if let Ok(mut map) = self.map.lock() {
            map.insert(id, (len, crc, Ok(None)));
        }
    }
}
