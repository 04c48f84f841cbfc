//! A sample's host work, as its backend does it: decided once per pipeline, when the
//! pipeline is built ([`crate::backend::sample_work`]), never per sample.
//!
//! On the CPU backend ([`crate::backend::cpu::CpuWork`]) a worker decodes the sample and
//! executes its plan into the sample's slot of host batch memory. On a device backend
//! ([`super::work::DeviceWork`]) a worker prepares the sample's
//! [`DeviceJob`]: the JPEG entropy-decoded for the device's decode (only the window its
//! plan reads), handed whole to a hardware decoder, or decoded by the CPU where the device
//! path does not take it; the batcher writes the slot.
//!
//! What every backend shares (reading the headers, the limits, the whole-file verdicts,
//! the host cache, the counters) stays with the pipeline, which offers it through
//! [`SampleHost`].

use std::sync::Arc;
use std::time::Duration;

use crate::augment::reference::Scratch;
use crate::augment::SamplePlan;
use crate::decode::{DecodeError, DecodeOptions, DecodeWarning, Image8, ImageInfo, LabelPlane};
use crate::error::SampleError;
use crate::source::Sample;

use super::cache::{DeviceCache, DeviceEntry, Reservation};
use super::job::{CoeffPool, DeviceJob, HardwareDecode};
use super::share::EngineShare;

/// A decoded sample: image and optional mask, and what the decoder tolerated (kept with
/// the pixels, so a cached sample is marked in every epoch it is delivered).
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// The image, upright.
    pub image: Image8,
    /// The label plane, for segmentation sets.
    pub mask: Option<LabelPlane>,
    /// What the decoder tolerated.
    pub warning: Option<DecodeWarning>,
}

impl AsRef<Image8> for Decoded {
    fn as_ref(&self) -> &Image8 {
        &self.image
    }
}

impl Decoded {
    /// Bytes of its pixels and labels.
    pub fn byte_len(&self) -> u64 {
        (self.image.byte_len() + self.mask.as_ref().map_or(0, LabelPlane::byte_len)) as u64
    }
}

/// What the pipeline counts of a sample's host work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Decoded by the CPU where a device makes the batches.
    CpuFallback,
    /// Decoded on the device.
    GpuDecoded,
    /// Of those, entropy-decoded on the device too.
    GpuEntropy,
    /// Of those, by the self-synchronising decode (no restart markers).
    GpuSyncEntropy,
    /// Of those, decoded by the hardware decoder.
    Hardware,
}

/// A sample's plan, or the report on it.
pub type Planned = Result<SamplePlan, SampleError>;

/// A sample's label mask, or the report on it.
pub type Masked = Result<LabelPlane, SampleError>;

/// What the pipeline offers a backend's host work: the decode every backend shares and
/// its counters.
pub trait SampleHost {
    /// The decode options the pipeline's configuration sets (limits, strictness).
    fn base_options(&self) -> DecodeOptions;

    /// Reads `image`'s headers, checks them against the limits and makes the sample's
    /// plan (in the upright frame), before anything is decoded.
    fn plan_from_headers(
        &self,
        s: &Sample,
        image: &[u8],
    ) -> Result<(ImageInfo, SamplePlan), SampleError>;

    /// Decodes what the sample's plan needs into `out` (the whole image where the host
    /// cache or a user transform wants it), offers it to the host cache, and returns the
    /// plan.
    fn decode_into(&self, s: &Sample, bytes: (&[u8], &[u8]), out: &mut Decoded) -> Planned;

    /// The sample's label mask, checked to have `size`.
    fn decode_mask(&self, s: &Sample, bytes: &[u8], size: (u32, u32)) -> Masked;

    /// Whether decoded samples go to a host cache.
    fn has_host_cache(&self) -> bool;

    /// Whether the pipeline's samples have masks.
    fn has_masks(&self) -> bool;

    /// The whole file's verdict for a JPEG decoded in part (kept for later epochs).
    fn verdict(&self, id: u64, image: &[u8]) -> Result<Option<DecodeWarning>, DecodeError>;

    /// Whether the whole file is known clean from an earlier verdict.
    fn known_clean(&self, id: u64, image: &[u8]) -> bool;

    /// Records the whole file as clean (the device decoded all of it, nothing flagged).
    fn record_clean(&self, id: u64, image: &[u8]);

    /// Counts one sample as `what`.
    fn count(&self, what: Count);

    /// Takes back one count of `what` (a sample counted there went another way).
    fn uncount(&self, what: Count);

    /// Adds to the time spent decoding (sample `id`'s, ending now).
    fn decode_time(&self, d: Duration, id: u64);

    /// Adds to the time spent executing plans (sample `id`'s, ending now).
    fn augment_time(&self, d: Duration, id: u64);

    /// `e` as a report on `s` (`what`: `"image"` or `"mask"`).
    fn decode_error(&self, s: &Sample, what: &str, e: &DecodeError) -> SampleError;
}

/// A worker's reusable state for its host work, kept across samples and epochs.
#[derive(Debug, Default)]
pub struct WorkScratch {
    /// The reference execution's scratch.
    pub scratch: Scratch,
    /// The last sample decoded on the host.
    pub decoded: Decoded,
    /// What the decoder tolerated in the sample last made.
    pub warning: Option<DecodeWarning>,
    /// The device-cache place of the sample last made, if it got one.
    pub reservation: Option<Box<Reservation>>,
}

/// The sample's slot of host batch memory: its image bytes and its mask's (empty where a
/// device makes the batches).
pub struct Slot<'a> {
    /// The image slot.
    pub image: &'a mut [u8],
    /// The mask slot, for segmentation sets.
    pub mask: Option<&'a mut [u8]>,
}

impl Slot<'static> {
    /// No host memory: for a sample a device batcher writes.
    pub fn none() -> Self {
        Slot {
            image: &mut [],
            mask: None,
        }
    }
}

/// A sample decoded on the host, whole and upright, that a backend makes into its slot.
pub enum HostImage<'a> {
    /// The worker's own decode, in [`WorkScratch::decoded`] (a user transform's output):
    /// the backend may take it.
    Worker,
    /// The host cache's: shared, never changed.
    Shared(&'a Arc<Decoded>),
}

/// A sample made: its plan, and its device job where a device makes the batches; or the
/// report on it.
pub type Made = Result<(SamplePlan, Option<DeviceJob>), SampleError>;

/// One sample's work: what the pipeline offers, the sample, its slot of host batch
/// memory, the worker's scratch.
pub struct Cx<'a> {
    /// What the pipeline offers.
    pub host: &'a dyn SampleHost,
    /// The sample.
    pub sample: &'a Sample,
    /// Its slot.
    pub slot: Slot<'a>,
    /// The worker's scratch.
    pub ws: &'a mut WorkScratch,
}

/// A flagged sample prepared again on the host path: the file's warning, or why the host
/// path refuses it; `None` for a sample that was not on the device entropy path.
pub type Redone = Option<Result<Option<DecodeWarning>, DecodeError>>;

/// A decoded image kept on the device from an earlier epoch.
pub type Kept = Arc<DeviceEntry>;

/// A backend's host work for one sample. See the module docs.
pub trait SampleWork: Send + Sync + std::fmt::Debug {
    /// A sample from its bytes (image, mask).
    fn make(&self, cx: Cx<'_>, bytes: (&[u8], &[u8])) -> Made;

    /// A sample decoded on the host whole and upright, with its plan.
    fn make_decoded(&self, cx: Cx<'_>, plan: SamplePlan, image: HostImage<'_>) -> Made;

    /// The sample's image kept on the device, if this backend keeps it there.
    fn kept(&self, id: u64) -> Option<Kept> {
        let _ = id;
        None
    }

    /// A sample whose image is kept on the device (`kept`), with its plan for
    /// `(seed, epoch)`.
    fn make_kept(&self, plan: SamplePlan, kept: &Kept) -> Made {
        let _ = kept;
        Ok((plan, None))
    }

    /// Bytes of device memory the kept images hold.
    fn kept_bytes(&self) -> u64 {
        0
    }

    /// After the device ran a batch of `jobs` (samples `ids`) and flagged nothing: the
    /// files it decoded whole are recorded clean.
    fn ran(&self, host: &dyn SampleHost, jobs: &[DeviceJob], ids: &[u64]) {
        let _ = (host, jobs, ids);
    }

    /// A sample the device's entropy pass flagged (`job`, of `s`), prepared again on the
    /// host path, where libjpeg reads and judges it as the CPU backend does: `job`'s input
    /// is replaced, and the result is the file's warning or why the host path refuses
    /// it. `None` when `job` is not on the device entropy path.
    fn redo_flagged(&self, host: &dyn SampleHost, s: &Sample, job: &mut DeviceJob) -> Redone {
        let _ = (host, s, job);
        None
    }

    /// Whether decoded images are kept on the device (a device cache is on).
    fn keeps_decoded(&self) -> bool {
        false
    }

    /// Whether workers write the samples into host batch memory (on a device backend the
    /// batcher writes device memory instead, and host slots are empty).
    fn writes_host_slots(&self) -> bool;
}

/// What a device backend's host work needs of its batcher and the pipeline.
#[derive(Debug)]
pub(crate) struct DeviceWorkConfig {
    /// The largest storage binding of the device (a decoded window must fit one).
    pub max_binding: u64,
    /// Which JPEGs go to the device's hardware decoder whole.
    pub hardware_decode: HardwareDecode,
    /// Whether JPEGs with restart markers go to the device entropy path.
    pub device_entropy: bool,
    /// Whether baseline JPEGs without restart markers go to it too (the batcher runs the
    /// self-synchronising decode: `DeviceBatcher::sync_entropy`).
    pub device_sync: bool,
    /// Which of the JPEGs both the hardware decoder and the device entropy path take go
    /// to the hardware decoder.
    pub share: EngineShare,
    /// Coefficient buffers recycled from packed batches.
    pub coeff_pool: Arc<CoeffPool>,
    /// The device cache of decoded samples, when it is on.
    pub cache: Option<Arc<DeviceCache>>,
}

/// What the pipeline asks of its samples' host work.
#[derive(Debug)]
pub struct WorkOptions {
    /// Whether JPEGs with restart markers may go to a device entropy path.
    pub device_entropy: bool,
    /// Which of the JPEGs both a hardware decoder and the device entropy path take go to
    /// the hardware decoder.
    pub share: EngineShare,
    /// Bytes of device memory asked for the device cache of decoded samples (0: off).
    pub device_cache_bytes: u64,
    /// Coefficient buffers recycled from packed batches to the workers.
    pub coeff_pool: Arc<CoeffPool>,
}
