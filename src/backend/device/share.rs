//! How a batch is divided between a GPU's hardware JPEG decoder (nvJPEG's engines) and
//! the device Huffman path (restart-marked JPEGs entropy-decoded by the SMs), so that
//! both run at once: a share of the JPEGs both can take goes to the engines, the rest to
//! the device Huffman path.
//!
//! Which sample goes where is keyed by `(seed, sample id)` alone (a Philox draw,
//! [`Stream::Engines`]): the same whatever the threads, the batch size or the epoch.
#![doc(hidden)]

use crate::rng::{Rng, Stream};

/// The share of the JPEGs both the engines and the device Huffman path take that goes to
/// the engines, keyed by the pipeline's seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EngineShare {
    share: f32,
    seed: u64,
}

impl EngineShare {
    /// The default share: every such JPEG goes to the engines (the device Huffman path
    /// takes only what the engines do not). The share that keeps both busy depends on the
    /// card (how many engines, how many SMs) and is to be measured on it.
    pub const DEFAULT: f32 = 1.0;

    /// `share` (clamped to 0..=1; a NaN is 0) of the JPEGs, chosen by `seed`.
    pub fn new(share: f32, seed: u64) -> Self {
        let share = if share.is_nan() {
            0.0
        } else {
            share.clamp(0.0, 1.0)
        };
        EngineShare { share, seed }
    }

    /// Every such JPEG to the engines ([`Self::DEFAULT`]).
    pub fn all() -> Self {
        EngineShare::new(Self::DEFAULT, 0)
    }

    /// The share.
    pub fn share(&self) -> f32 {
        self.share
    }

    /// Whether sample `id`, a JPEG both decoders take, goes to the engines.
    pub fn to_engines(&self, id: u64) -> bool {
        if self.share >= 1.0 {
            return true;
        }
        if self.share <= 0.0 {
            return false;
        }
        let draw = Rng::new(self.seed, 0, id, Stream::Engines).next_u32();
        f64::from(draw) < f64::from(self.share) * 4_294_967_296.0
    }
}

impl Default for EngineShare {
    fn default() -> Self {
        EngineShare::all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_the_fraction_sent_to_the_engines() {
        let ids = 0..20_000u64;
        for share in [0.0f32, 0.25, 0.5, 0.9, 1.0] {
            let s = EngineShare::new(share, 11);
            let n = ids.clone().filter(|&id| s.to_engines(id)).count();
            let got = n as f64 / 20_000.0;
            assert!((got - f64::from(share)).abs() < 0.02, "{share}: {got}");
        }
        // Another seed chooses other samples, as many.
        let (a, b) = (EngineShare::new(0.5, 1), EngineShare::new(0.5, 2));
        assert!(ids.clone().any(|id| a.to_engines(id) != b.to_engines(id)));
        assert!(EngineShare::new(f32::NAN, 1).share() == 0.0);
    }
}
