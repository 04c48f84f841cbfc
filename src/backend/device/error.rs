//! [`DeviceError`]: a GPU backend failing at run time, the source of
//! [`crate::Error::Device`].
//!
//! It lives with the backends rather than in `crate::error`: its variants name backend types
//! ([`Buffer`], [`Binding`]), and `crate::error`, at the bottom of the layers, names nothing
//! above it. [`crate::Error::Device`] holds the source boxed, as candle's `Error::Cuda`
//! does: this type for what every device backend shares, or the backend's own
//! (`backend::cuda::CudaError`, `backend::wgpu::WgpuError`, typed down to the driver's
//! error). [`DeviceError::of`] finds this one again.
#![doc(hidden)]

use super::launch::{Binding, Buffer};
use crate::decode::DecodeError;

/// A GPU device failed at run time, or a batch does not fit it.
///
/// The same on every backend: a plan that does not fit a binding, the grid or its buffers,
/// sizes that overflow, with the numbers as fields.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A sample's place in the device cache does not hold its image: the image is not
    /// whole (a window, a reduced scale), not of the size its place was made for, or
    /// the place is misaligned.
    #[error(
        "sample {sample}: a {width}x{height} image does not fit its place at byte {offset} \
         of the device cache"
    )]
    CacheEntry {
        /// The sample's index in the batch.
        sample: usize,
        /// The place's first byte in the cache buffer.
        offset: u64,
        /// The image's width.
        width: u32,
        /// The image's height.
        height: u32,
    },
    /// `count * each` bytes do not fit in a size.
    #[error("{what}: {count} x {each} bytes overflows")]
    Overflow {
        /// What was being sized.
        what: String,
        /// How many.
        count: u64,
        /// Bytes each.
        each: u64,
    },
    /// A value does not fit the field (a word offset, a length) that carries it.
    #[error("{what} is {value}, more than {max}")]
    TooLarge {
        /// The value, in words.
        what: &'static str,
        /// The value.
        value: u64,
        /// The largest the field holds.
        max: u64,
    },
    /// Part of a batch needs a binding larger than the device allows.
    #[error("{what} binds {bytes} bytes; the device allows {max}")]
    Binding {
        /// Which part.
        what: &'static str,
        /// The binding's size.
        bytes: u64,
        /// The largest binding.
        max: u64,
    },
    /// One sample's resize passes need bindings larger than the device allows.
    #[error(
        "sample {sample} needs bindings larger than the device allows ({max} bytes): \
         window {window} bytes, horizontal pass {horizontal} bytes"
    )]
    SampleBindings {
        /// The sample's index in the batch.
        sample: usize,
        /// Bytes of its decoded window.
        window: u64,
        /// Bytes of its horizontal pass.
        horizontal: u64,
        /// The largest binding.
        max: u64,
    },
    /// A label plane's lookup tables do not fit one binding.
    #[error("a label plane's tables are too large for the binding limit ({max} bytes)")]
    LabelTables {
        /// The largest binding.
        max: u64,
    },
    /// A pass needs more workgroups than the device's grid has.
    #[error("{what} needs {workgroups} workgroups, more than the device's grid ({per_dim} per dimension)")]
    Grid {
        /// Which pass.
        what: &'static str,
        /// Workgroups needed.
        workgroups: u64,
        /// Workgroups per grid dimension.
        per_dim: u64,
    },
    /// A sample's decode window is empty or outside its image.
    #[error("sample {sample}: window {window:?} of a {width}x{height} image")]
    Window {
        /// The sample's index in the batch.
        sample: usize,
        /// `[x0, y0, x1, y1]`.
        window: [u32; 4],
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
    },
    /// A sample's bytes lie outside the buffer that holds them.
    #[error("sample {sample}: bytes {start}..{end} lie outside the {len}-byte {buffer:?} buffer")]
    Outside {
        /// The sample's index in the batch.
        sample: usize,
        /// The buffer.
        buffer: Buffer,
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
        /// The buffer's size.
        len: u64,
    },
    /// The staging area is smaller than the batch's upload.
    #[error("staging area of {len} bytes, the batch uploads {upload}")]
    Staging {
        /// The staging area's size.
        len: usize,
        /// The upload's size.
        upload: u64,
    },
    /// A hardware-decoded image is too large for the pack pass.
    #[error("a {width}x{height} hardware-decoded image does not fit the device's limits")]
    HardwareImage {
        /// Image width.
        width: u32,
        /// Image height.
        height: u32,
    },
    /// A sample for the hardware decoder whose frame header gives no planes it writes (1
    /// or 3 components, readable sampling factors).
    #[error("sample {0}: its frame header gives no planes for the hardware decoder")]
    NotPlanar(usize),
    /// An orientation job is malformed (a bug in the plan).
    #[error(
        "orientation job {job} is malformed (orientation {orientation}, source at word {src}, \
         destination at word {dst})"
    )]
    OrientJob {
        /// The job's index.
        job: usize,
        /// The EXIF orientation.
        orientation: u8,
        /// Source word offset.
        src: u64,
        /// Destination word offset.
        dst: u64,
    },
    /// An oriented window is too large for the device's bindings or grid.
    #[error("an oriented window of {width}x{height} does not fit the device's bindings")]
    OrientedWindow {
        /// Width after orientation.
        width: u32,
        /// Height after orientation.
        height: u32,
    },
    /// A step binds a buffer the batch does not have.
    #[error("no {0:?} buffer is bound")]
    Unbound(Buffer),
    /// A step binds bytes beyond the end of its buffer.
    #[error("the {buffer:?} buffer holds {len} bytes, the batch binds {start}..{end}")]
    Bounds {
        /// The buffer.
        buffer: Buffer,
        /// Its size.
        len: u64,
        /// First byte bound.
        start: u64,
        /// One past the last byte bound.
        end: u64,
    },
    /// A launch has not the number of bindings its kernel takes.
    #[error("{kernel} takes {expected} bindings, the launch has {bindings}")]
    BindingCount {
        /// The kernel.
        kernel: &'static str,
        /// Bindings the kernel takes.
        expected: usize,
        /// Bindings the launch has.
        bindings: usize,
    },
    /// A launch binds more buffers than a kernel's arguments hold.
    #[error("{kernel} binds {bindings} buffers, at most {max}")]
    TooManyBindings {
        /// The kernel.
        kernel: &'static str,
        /// Bindings the launch has.
        bindings: usize,
        /// The most a launch may have.
        max: usize,
    },
    /// A copy step whose sizes differ or are not whole words.
    #[error("malformed copy step from {src:?} to {dst:?}")]
    CopyStep {
        /// The source.
        src: Binding,
        /// The destination.
        dst: Binding,
    },
    /// A kernel the plan launches is not loaded.
    #[error("kernel {0} is not loaded")]
    Kernel(&'static str),
    /// A plan for the hardware JPEG decoder on a backend that has none open.
    #[error("a batch for the hardware JPEG decoder, and none is open")]
    NoHardwareDecoder,
    /// A sample planned for the hardware decoder is not an encoded JPEG.
    #[error("sample {0} is not an encoded JPEG")]
    NotEncoded(usize),
    /// The CPU decode of a sample the hardware decoder refused failed.
    #[error("sample {sample}: {source}")]
    Fallback {
        /// The sample's index in the batch.
        sample: usize,
        /// Why.
        source: DecodeError,
    },
    /// The CPU decode of a sample gave another size than its header.
    #[error(
        "sample {sample}: decoded {width}x{height}, expected {expected_width}x{expected_height}"
    )]
    FallbackSize {
        /// The sample's index in the batch.
        sample: usize,
        /// Decoded width.
        width: u32,
        /// Decoded height.
        height: u32,
        /// Width planned from the header.
        expected_width: u32,
        /// Height planned from the header.
        expected_height: u32,
    },
    /// Samples of a batch that nothing decoded: the hardware decoder, nvJPEG's GPU decoder
    /// and the CPU decoder all refused them. A batcher returns this before it has written
    /// anything into the batch's buffers, so the caller can leave those samples out (or
    /// replace them) under its [`OnError`](crate::OnError) policy and run the batch again.
    #[error("{} sample(s) of the batch could not be decoded: {}", .0.len(), rejected_list(.0))]
    Rejected(Vec<Rejected>),
    /// The device entropy pass flagged these samples (batch index, OR of their
    /// intervals' status words, `decode::jpeg::huffman::STATUS_*`): damaged data, or
    /// blocks only the CPU decoder reproduces. Returned once the whole batch is queued
    /// (the status is read while its later passes run, so they may have written the
    /// batch's outputs): the caller prepares them again on the host path
    /// (`job::prepare_host`), where libjpeg judges them, and runs the batch again into the
    /// same outputs before delivering it.
    #[error("the device entropy decode flagged {} sample(s) of the batch (first: {:?})", .0.len(), .0.first())]
    EntropyFlagged(Vec<(usize, u32)>),
    /// A batch (or a decode) read back with fewer bytes (or images) than asked for.
    #[error("a batch of {len} bytes read as {requested}")]
    ShortRead {
        /// Bytes there are.
        len: usize,
        /// Bytes asked for.
        requested: usize,
    },
}

/// One sample of a batch that nothing decoded ([`DeviceError::Rejected`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The sample's index in the batch (its job's index).
    pub sample: usize,
    /// Why, in words: each decoder's refusal (nvJPEG's status, the CPU decoder's error).
    pub reason: String,
}

fn rejected_list(r: &[Rejected]) -> String {
    r.iter()
        .map(|r| format!("sample {}: {}", r.sample, r.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

impl From<DeviceError> for crate::Error {
    fn from(e: DeviceError) -> Self {
        crate::Error::Device(Box::new(e))
    }
}

impl DeviceError {
    /// The device error behind `e`, if it is an [`crate::Error::Device`] from a backend.
    pub fn of(e: &crate::Error) -> Option<&DeviceError> {
        match e {
            crate::Error::Device(source) => source.downcast_ref::<DeviceError>(),
            _ => None,
        }
    }
}
