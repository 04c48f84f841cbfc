//! Kernel launches as data: what every GPU backend runs, planned once on the host.
//!
//! The decode, orientation and augmentation passes are planned into a list of
//! [`Launch`]es: which kernel, over how many workgroups, reading and writing which byte
//! ranges of which batch buffers, with which parameter words. The wgpu backend turns each
//! launch into a bind group and a dispatch of the WGSL entry point of the same name; the
//! CUDA backend into a kernel launch of the `extern "C"` function of the same name in
//! `kernels/`. Both run the same plan, so both run the same arithmetic on the same data.
//!
//! # The kernel contract
//! - The entry points are those of `shaders/*.wgsl` and `kernels/*.cu`: [`Kernel::name`].
//! - `bindings[i]` is the entry point's `i`-th *storage* binding in binding order (WGSL:
//!   `@binding` numbers after any uniform; CUDA: `KernelArgs::ptr[i]`, with its length in
//!   u32 words in `KernelArgs::words[i]`). Offsets are multiples of 256 bytes.
//! - `params` are the entry point's parameter words (WGSL: the uniform or parameter record
//!   the entry point reads; CUDA: `KernelArgs::params`).
//! - A workgroup (CUDA block) has [`Kernel::workgroup`] invocations along x; the grid is
//!   `grid[0] x grid[1]` workgroups; an invocation's global id is
//!   `workgroup id * workgroup size + local id` per dimension, as in WGSL.
#![doc(hidden)]

/// The kernels (WGSL entry points and CUDA functions of the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `huffman`: Huffman decoding of a decode chunk's restart intervals into the
    /// coefficient buffer (`decode::jpeg::huffman`), one invocation per interval.
    Huffman,
    /// `idct`: dequantisation and inverse DCT of a decode chunk's blocks into planes.
    Idct,
    /// `color`: upsampling and colour conversion of planes into RGBA windows.
    Color,
    /// `orient`: a batch's rotated windows (or a group of them) turned upright (EXIF
    /// orientation 2-8), reading their job table.
    Orient,
    /// `horizontal`: the horizontal resize of a group of samples.
    Horizontal,
    /// `vertical_jitter`: the vertical resize and colour jitter, one invocation per output
    /// pixel (with a per-sample reduction phase for contrast).
    VerticalJitter,
    /// `write_image`: flips, normalisation, layout and dtype into the batch's images.
    WriteImage,
    /// `write_mask`: nearest-neighbour label planes into the batch's masks.
    WriteMask,
    /// `mix_batch`: MixUp or CutMix of a batch's images after the per-sample pass
    /// (`super::mix`), one invocation per word of the images, reading a copy of them.
    Mix,
    /// `pack_planar` (CUDA only): a window of what the hardware decoder wrote (planes at
    /// their stored resolution, or interleaved RGB from the CPU where nvJPEG refused the
    /// image), upsampled and converted as `color` does, into RGBA windows.
    PackPlanar,
    /// `sync_start` (in [`Kernel::SYNC`]): pass 1 of the self-synchronising
    /// Huffman decode (`decode::jpeg::huffman::sync`), one invocation per subsequence of
    /// a decode chunk's samples without restart markers.
    SyncStart,
    /// `sync_round`: a sync round, one invocation per subsequence.
    SyncRound,
    /// `sync_scan`: the prefix sums, one invocation per segment.
    SyncScan,
    /// `sync_write`: the decode into the coefficient buffer, one invocation per
    /// subsequence.
    SyncWrite,
}

impl Kernel {
    /// Every kernel of the batch pipeline (each has a CUDA function, all but the last a
    /// WGSL entry point), which the backends compile.
    pub const ALL: [Kernel; 10] = [
        Kernel::Huffman,
        Kernel::Idct,
        Kernel::Color,
        Kernel::Orient,
        Kernel::Horizontal,
        Kernel::VerticalJitter,
        Kernel::WriteImage,
        Kernel::WriteMask,
        Kernel::Mix,
        Kernel::PackPlanar,
    ];

    /// The kernels of the batch pipeline that have a WGSL entry point (all but the
    /// hardware decoder's, last).
    pub fn wgsl() -> &'static [Kernel] {
        &Kernel::ALL[..9]
    }

    /// The passes of the self-synchronising Huffman decode (`shaders/sync_huffman.wgsl`,
    /// `kernels/sync_huffman.cu`), in the order they run, over a batch table. Outside
    /// [`Kernel::ALL`]: the wgpu batcher compiles them with [`Kernel::wgsl`]'s, the CUDA
    /// backend loads them with [`Kernel::cuda`]'s, and both plan them
    /// (`DeviceBatcher::sync_entropy`).
    pub const SYNC: [Kernel; 4] = [
        Kernel::SyncStart,
        Kernel::SyncRound,
        Kernel::SyncScan,
        Kernel::SyncWrite,
    ];

    /// Every kernel that has a CUDA function, which the CUDA backend compiles and loads:
    /// [`Kernel::ALL`], then [`Kernel::SYNC`].
    pub fn cuda() -> impl Iterator<Item = Kernel> {
        Kernel::ALL.into_iter().chain(Kernel::SYNC)
    }

    /// The entry point's name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Huffman => "huffman",
            Kernel::Idct => "idct",
            Kernel::Color => "color",
            Kernel::Orient => "orient",
            Kernel::Horizontal => "horizontal",
            Kernel::VerticalJitter => "vertical_jitter",
            Kernel::WriteImage => "write_image",
            Kernel::WriteMask => "write_mask",
            Kernel::Mix => "mix_batch",
            Kernel::PackPlanar => "pack_planar",
            Kernel::SyncStart => "sync_start",
            Kernel::SyncRound => "sync_round",
            Kernel::SyncScan => "sync_scan",
            Kernel::SyncWrite => "sync_write",
        }
    }

    /// Invocations per workgroup (CUDA threads per block), as the WGSL declares.
    pub fn workgroup(self) -> u32 {
        match self {
            // One warp: each invocation decodes a whole restart interval (or subsequence).
            Kernel::Huffman
            | Kernel::SyncStart
            | Kernel::SyncRound
            | Kernel::SyncScan
            | Kernel::SyncWrite => 32,
            Kernel::Idct | Kernel::Color | Kernel::Orient | Kernel::PackPlanar => 64,
            Kernel::Horizontal
            | Kernel::VerticalJitter
            | Kernel::WriteImage
            | Kernel::WriteMask
            | Kernel::Mix => 256,
        }
    }

    /// The source file (under `kernels/` and `shaders/`, without the extension).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Huffman => "huffman",
            Kernel::Idct => "idct",
            Kernel::Color | Kernel::PackPlanar => "color",
            Kernel::Orient => "orient",
            Kernel::Mix => "mix",
            Kernel::SyncStart | Kernel::SyncRound | Kernel::SyncScan | Kernel::SyncWrite => {
                "sync_huffman"
            }
            _ => "augment",
        }
    }
}

/// The batch buffers a launch reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buffer {
    /// The decode upload ([`super::DecodeInput::bytes`]).
    DecodeInput,
    /// Component planes (decode scratch).
    Planes,
    /// DCT coefficient blocks the `huffman` pass decodes and the `idct` pass reads
    /// (decode scratch, 32 words a block).
    Coefficients,
    /// One status word per restart interval the `huffman` pass decoded (0: clean; see
    /// `decode::jpeg::huffman`), read back before the batch goes on.
    EntropyStatus,
    /// Decoded RGBA windows, one u32 per pixel.
    Windows,
    /// Upright windows before they are copied back into [`Buffer::Windows`].
    Oriented,
    /// The augment upload ([`super::AugmentInput::bytes`]).
    AugmentInput,
    /// The horizontal pass's output (augment scratch).
    Horizontal,
    /// The vertical pass's output (augment scratch).
    Resized,
    /// The batch's images.
    Images,
    /// The batch's label planes.
    Masks,
    /// The hardware decoder's interleaved RGB images (CUDA with nvJPEG).
    Rgbi,
    /// Whole decoded images kept across batches and epochs (the device cache of decoded
    /// samples), RGBA words as in [`Buffer::Windows`]; owned by the batcher, never
    /// bound to a kernel: only [`Step::Copy`] reads or writes it.
    DecodedCache,
    /// The two copies of the self-synchronising decode's records ([`Kernel::SYNC`]), per
    /// sample on that decode (decode scratch; 0 bytes without such samples).
    SyncRecords,
    /// A copy of the batch's images that the mixing pass ([`Kernel::Mix`]) reads while it
    /// writes the images (batcher scratch, sized by that pass, not by the batch plan).
    MixScratch,
}

/// A byte range of one buffer bound to a launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Binding {
    /// Which buffer.
    pub buffer: Buffer,
    /// First byte (a multiple of 256).
    pub offset: u64,
    /// Bytes (a multiple of 4, at least 4).
    pub size: u64,
}

/// One kernel launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The kernel.
    pub kernel: Kernel,
    /// Workgroups along x and y.
    pub grid: [u32; 2],
    /// The storage bindings, in binding order.
    pub bindings: Vec<Binding>,
    /// Parameter words (unused ones zero).
    pub params: [u32; PARAM_WORDS],
}

/// Parameter words of a launch.
pub const PARAM_WORDS: usize = 16;
/// Most storage bindings of any kernel.
pub const MAX_BINDINGS: usize = 8;

/// Workgroup counts `(x, y)` covering `invocations` of `workgroup` each, with at most
/// `per_dim` along each dimension; `None` when that is not enough.
pub fn grid(invocations: u64, workgroup: u32, per_dim: u64) -> Option<[u32; 2]> {
    let groups = invocations.div_ceil(u64::from(workgroup.max(1)));
    let x = groups.min(per_dim).max(1);
    let y = groups.div_ceil(x).max(1);
    (y <= per_dim).then_some([x as u32, y as u32])
}

/// One step of a batch's device work, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A kernel launch.
    Launch(Launch),
    /// A copy of `src.size` bytes from `src` to `dst` (sizes equal; offsets multiples of
    /// 4).
    Copy {
        /// Where from.
        src: Binding,
        /// Where to.
        dst: Binding,
    },
    /// Every `huffman` launch before it has run: `status` ([`Buffer::EntropyStatus`]) is
    /// copied back to the host here, in queue order. The executor queues the steps after
    /// it too and then reads the copy (a wait for it alone): where
    /// [`super::BatchPlan::flagged`] names samples, the batch ends with
    /// [`super::DeviceError::EntropyFlagged`], and is run again before it is delivered.
    EntropyCheck {
        /// The status words.
        status: Binding,
    },
    /// The batch's `super::batch::EncodedJob`s decoded whole by the hardware decoder
    /// into [`Buffer::Rgbi`] (CUDA with nvJPEG only); `pack_planar` launches follow.
    Hardware,
}
