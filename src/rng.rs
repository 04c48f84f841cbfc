//! Counter-based randomness: Philox4x32-10, keyed by `(seed, epoch, sample id)`.
//!
//! Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11) is
//! the generator cuRAND, JAX and PyTorch's CUDA generator use. It is a pure function of a
//! 64-bit key and a 128-bit counter, so any thread on any backend can compute the draws
//! of any sample without shared state: the result depends on nothing but its inputs.
//!
//! stoker maps its inputs as follows:
//! - key = the 64-bit seed (low word, high word);
//! - counter = `[id_lo, id_hi, epoch_lo, (stream << 24) | block]`, where `stream`
//!   separates unrelated uses (augmentation, sampler, split, replacement) and `block`
//!   counts the 4-word blocks drawn so far (blocks past 2^24 carry into `id_hi`, which only
//!   the sampler's stream, with id 0, ever reaches). The epoch is reduced to its low 32 bits.
//!
//! Known-answer tests against the Random123 reference vectors are in this module.
//!
//! Written here rather than taken from a crate: its outputs are part of saved split
//! manifests and must match the GPU kernels bit for bit, so the definition is pinned.

/// One Philox4x32-10 block: four 32-bit outputs for a counter and key.
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut c = counter;
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = M0 * u64::from(c[0]);
        let p1 = M1 * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// Purposes that get independent random streams for the same `(seed, epoch, id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Stream {
    /// Per-sample augmentation parameters.
    Augment = 1,
    /// The epoch permutation (id = 0).
    Sampler = 2,
    /// The train/validation split (epoch = 0).
    Split = 3,
    /// Choosing a replacement for a failed sample (`OnError::Replace`).
    Replace = 4,
    /// Flip decisions.
    Flip = 5,
    /// Colour-jitter order and factors.
    Jitter = 6,
    /// Affine warp parameters.
    Affine = 7,
    /// Weighted sampling draws (id = the position in the epoch, or the sample index).
    Weighted = 8,
    /// A user transform's own draws ([`crate::pipeline::UserSample::rng`]).
    User = 9,
    /// Whether the random grayscale, posterize and solarize apply.
    Color = 10,
    /// Random erasing: whether, and the rectangle.
    Erase = 11,
    /// Batch-level mixing, MixUp and CutMix (id = the batch's first sample).
    Mix = 12,
    /// An augmentation policy's draws (RandAugment, TrivialAugment): ops, magnitudes,
    /// signs.
    Policy = 13,
    /// Whether the Gaussian blur, sharpness, auto-contrast and equalize apply, and the
    /// blur's sigma.
    Filter = 14,
    /// Block order: the shards' order (id = 0) and each window's shuffle (id = 1 + the
    /// window's index).
    Blocks = 15,
    /// Which of a GPU's decoders takes a JPEG both can decode (the hardware engines or the
    /// device Huffman path, see `PipelineBuilder::hardware_share`; epoch = 0).
    Engines = 16,
    /// A mixture of datasets: the shuffle of each round of its sources' schedule (id =
    /// the round), and each source's own passes and draws (keyed by the source).
    Mixture = 17,
    /// The order of an epoch's aspect-ratio bucket batches (id = 0).
    Buckets = 20,
}

/// A sequential reader over the Philox stream of one `(seed, epoch, id, stream)`.
#[derive(Debug, Clone)]
pub struct Rng {
    key: [u32; 2],
    counter: [u32; 4],
    block: u64,
    buf: [u32; 4],
    used: usize,
}

impl Rng {
    /// The stream for `(seed, epoch, id)` and a purpose.
    pub fn new(seed: u64, epoch: u64, id: u64, stream: Stream) -> Self {
        Rng {
            key: [seed as u32, (seed >> 32) as u32],
            counter: [
                id as u32,
                (id >> 32) as u32,
                epoch as u32,
                (stream as u32) << 24,
            ],
            block: 0,
            buf: [0; 4],
            used: 4,
        }
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            let mut ctr = self.counter;
            ctr[3] |= (self.block & 0x00FF_FFFF) as u32;
            // Blocks past 2^24 carry into the id's high word. Only the sampler draws that
            // many (one u64 per sample of a huge epoch), and it uses id 0, so its counters
            // stay unique; per-sample streams draw a few dozen words.
            ctr[1] ^= (self.block >> 24) as u32;
            self.buf = philox4x32_10(ctr, self.key);
            self.block = self.block.wrapping_add(1);
            self.used = 0;
        }
        let v = self.buf[self.used];
        self.used += 1;
        v
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let lo = u64::from(self.next_u32());
        let hi = u64::from(self.next_u32());
        (hi << 32) | lo
    }

    /// A uniform double in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform double in `[lo, hi)`; `lo` when the range is empty.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        if hi <= lo {
            // Still consume a draw so the stream layout does not depend on the config.
            let _ = self.next_u64();
            return lo;
        }
        lo + (hi - lo) * self.next_f64()
    }

    /// A uniform integer in `[0, n)` without modulo bias (Lemire's method); 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            let _ = self.next_u64();
            return 0;
        }
        loop {
            let x = self.next_u64();
            let m = u128::from(x) * u128::from(n);
            let low = m as u64;
            if low >= n {
                return (m >> 64) as u64;
            }
            let threshold = n.wrapping_neg() % n;
            if low >= threshold {
                return (m >> 64) as u64;
            }
        }
    }

    /// `true` with probability `p`.
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
}

/// A 64-bit mix of `x` (the SplitMix64 finaliser); used to turn hashes into ids.
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// FNV-1a, 64 bit, over bytes: stable across platforms, versions and runs.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// For tests: a fresh seed from the clock (printed by the caller when a check fails) and
/// a generator of numbers below `n` from it.
#[cfg(test)]
pub(crate) fn fresh_for_tests() -> (u64, impl FnMut(u32) -> u32) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let mut state = seed;
    (seed, move |n: u32| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) % u64::from(n.max(1))) as u32
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known-answer vectors from Random123's kat_vectors for philox4x32_10.
    #[test]
    fn philox_known_answers() {
        assert_eq!(
            philox4x32_10([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a: Vec<u32> = {
            let mut r = Rng::new(7, 1, 42, Stream::Augment);
            (0..16).map(|_| r.next_u32()).collect()
        };
        let b: Vec<u32> = {
            let mut r = Rng::new(7, 1, 42, Stream::Augment);
            (0..16).map(|_| r.next_u32()).collect()
        };
        assert_eq!(a, b);
        for (seed, epoch, id, s) in [
            (8, 1, 42, Stream::Augment),
            (7, 2, 42, Stream::Augment),
            (7, 1, 43, Stream::Augment),
            (7, 1, 42, Stream::Sampler),
        ] {
            let mut r = Rng::new(seed, epoch, id, s);
            let c: Vec<u32> = (0..16).map(|_| r.next_u32()).collect();
            assert_ne!(a, c);
        }
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::new(1, 0, 0, Stream::Sampler);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            let v = r.below(6);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below(1), 0);
    }
}
