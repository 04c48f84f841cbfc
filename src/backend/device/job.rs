//! The host half of a device sample: what a worker thread prepares for the GPU (DCT
//! coefficients, or pixels the CPU decoded), shared by every GPU backend.
#![doc(hidden)]

use crate::augment::SamplePlan;
use crate::decode::jpeg::coeffs::{pack, CoeffStatus, Coefficients, PackedJpeg};
use crate::decode::jpeg::huffman::sync::{pack_sync_window, RECORD_WORDS};
use crate::decode::jpeg::huffman::{pack_intervals, PackedEntropy, RestartScan};
use crate::decode::jpeg::read_coefficients;
use crate::decode::{
    check_limits, peek_info, DecodeError, DecodeOptions, DecodeWarning, Format, Image8, ImageInfo,
    LabelPlane,
};

use super::decode::DeviceImage;
pub use super::pool::CoeffPool;
use super::sync_decode::SYNC_ROUNDS;

/// What the host hands the GPU for one sample.
#[derive(Debug)]
pub enum DeviceSample {
    /// A JPEG, entropy-decoded: the GPU dequantises, transforms, upsamples and converts
    /// the `window` of the image scaled by `1/scale`.
    Jpeg {
        /// The coefficients.
        coeffs: Box<Coefficients>,
        /// IDCT scale denominator (1, 2, 4, 8).
        scale: u32,
        /// `[x0, y0, x1, y1)` in the scaled image, as stored (before any orientation).
        window: [u32; 4],
        /// EXIF orientation to apply after decoding (1: none; 2-8: the whole decoded
        /// image is turned upright on the device, as the CPU decoder does).
        orientation: u8,
    },
    /// A JPEG entropy-decoded and packed for upload by the worker that prepared it
    /// ([`DeviceSample::packed`]): its window's blocks in the layout the IDCT reads at its
    /// scale, which the plan places as they are, copied once, straight into the staging
    /// buffer.
    Packed {
        /// The records and data.
        packed: Box<PackedJpeg>,
        /// EXIF orientation to apply after decoding (1: none).
        orientation: u8,
    },
    /// Pixels the CPU decoded (other formats, JPEG features the GPU path does not take,
    /// cached samples).
    Rgb(Image8),
    /// Pixels the CPU decoded, shared with whatever keeps them (the host cache of decoded
    /// samples): uploaded as [`DeviceSample::Rgb`] is, without a copy per use.
    Shared(SharedImage),
    /// A JPEG with restart markers whose entropy-coded data the device decodes (the
    /// `huffman` pass), packed by the host (`crate::decode::jpeg::huffman::pack_entropy`: headers, decode tables and
    /// the bytes of the intervals under the window). Should the device flag an interval
    /// (damaged data, or anything libjpeg might read otherwise), the sample is prepared
    /// again on the host path from `bytes` with `opts` (`prepare_host`).
    Entropy {
        /// The records and data of the window.
        packed: Box<PackedEntropy>,
        /// EXIF orientation to apply after decoding (1: none).
        orientation: u8,
        /// The file's bytes.
        bytes: Vec<u8>,
        /// What its headers say.
        info: ImageInfo,
        /// The options it was prepared with.
        opts: DecodeOptions,
    },
    /// A JPEG for a hardware decoder (nvJPEG on the CUDA backend), as read: decoded whole
    /// at full size, then its `window` goes where the augment pass reads it.
    Encoded {
        /// The file's bytes.
        bytes: Vec<u8>,
        /// `[x0, y0, x1, y1)` in the image, as stored (before any orientation).
        window: [u32; 4],
        /// The image's stored size.
        full: [u32; 2],
        /// EXIF orientation to apply after decoding (1: none).
        orientation: u8,
    },
    /// A whole decoded image kept in the device cache ([`super::Buffer::DecodedCache`]):
    /// nothing is uploaded or decoded, the plan copies it into the batch's windows.
    Cached {
        /// Its first byte in the cache buffer (a multiple of 256).
        offset: u64,
        /// Its width (upright).
        width: u32,
        /// Its height (upright).
        height: u32,
    },
}

/// A decoded image held by something shared ([`DeviceSample::Shared`]): the host cache's
/// entry, kept alive while the sample's batch is planned.
#[derive(Clone)]
pub struct SharedImage(std::sync::Arc<dyn AsRef<Image8> + Send + Sync>);

impl SharedImage {
    /// Shares the image `holder` holds.
    pub fn new(holder: std::sync::Arc<dyn AsRef<Image8> + Send + Sync>) -> Self {
        SharedImage(holder)
    }

    /// The image.
    pub fn image(&self) -> &Image8 {
        (*self.0).as_ref()
    }
}

impl std::fmt::Debug for SharedImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let img = self.image();
        write!(f, "SharedImage({}x{})", img.width, img.height)
    }
}

/// Where a sample decoded whole in this batch is kept in the device cache
/// ([`super::Buffer::DecodedCache`]): the plan copies its decoded (upright) image there,
/// `width * height` RGBA words from byte `offset`, after the decode. The image must come
/// out whole (origin 0, 0, scale 1) at exactly this size, or the plan is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSlot {
    /// First byte in the cache buffer (a multiple of 256).
    pub offset: u64,
    /// Width of the upright image.
    pub width: u32,
    /// Height of the upright image.
    pub height: u32,
}

impl CacheSlot {
    /// Bytes of the image it holds.
    pub fn bytes(&self) -> u64 {
        4 * u64::from(self.width) * u64::from(self.height)
    }
}

/// Which JPEGs a hardware decoder (nvJPEG's, on the CUDA backend) takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HardwareDecode {
    /// None: every JPEG takes the hybrid path (host entropy decoding, our kernels).
    Off,
    /// Those whose pixels the hardware gives as the CPU decoder does (within the decode
    /// tolerance, the engines' IDCT): baseline 8-bit greyscale and YCbCr JPEGs decoded at
    /// full size, with the sampling factors of 4:4:4, 4:2:2, 4:2:0 and 4:4:0. The engines
    /// write the components at their stored resolution and the `pack_planar` kernel
    /// upsamples the chroma as libjpeg does (fancy upsampling), so subsampled files take
    /// the engines too. The default.
    #[default]
    Exact,
    /// Every baseline 8-bit JPEG decoded at full size that the engines may take, any
    /// sampling factors (4:1:1 and others libjpeg upsamples by replication, which
    /// `pack_planar` does too).
    All,
}

impl HardwareDecode {
    /// Whether a JPEG with these headers goes to the hardware decoder, decoded with
    /// `opts`.
    pub fn takes(self, bytes: &[u8], info: &ImageInfo, opts: &DecodeOptions) -> bool {
        use crate::decode::JpegProcess;
        if self == HardwareDecode::Off
            || info.format != Format::Jpeg
            || info.process != Some(JpegProcess::Baseline)
            || info.bit_depth != 8
            || !matches!(info.components, 1 | 3)
            || opts.scale.clamp(1, 8) != 1
            // A file cut off shows at its end: such files take the path where libjpeg
            // reads them whole and says whether and how they are damaged (both modes).
            || !crate::decode::jpeg::markers::ends_with_eoi(bytes)
            || (info.components == 3 && info.adobe_transform == Some(0))
        {
            return false;
        }
        // Exact: the samplings of 4:4:4, 4:2:2, 4:2:0 and 4:4:0 (luma 1x1, 2x1, 2x2 or 1x2,
        // chroma 1x1), whose fancy upsampling is what the CPU decoder does.
        self == HardwareDecode::All
            || crate::decode::jpeg::markers::sampling_factors(bytes).is_some_and(|f| {
                f.len() == 1
                    || (matches!(f[0], (1, 1) | (2, 1) | (2, 2) | (1, 2))
                        && f[1..].iter().all(|&s| s == (1, 1)))
            })
    }
}

/// A sample's image, ready for the device, and why the CPU decoded it if it did.
#[derive(Debug)]
pub struct Prepared {
    /// The device input.
    pub image: DeviceSample,
    /// What the headers say.
    pub info: ImageInfo,
    /// `Some(reason)` when the CPU decoded the image (a fallback, counted in the stats).
    pub cpu_reason: Option<String>,
    /// What libjpeg tolerated reading the file (coefficients or CPU decode), `None` for a
    /// clean one or one handed to a hardware decoder (those all end with their end marker).
    pub warning: Option<DecodeWarning>,
}

/// Why the device cannot decode `image` with storage bindings of `max_binding` bytes, or
/// `None` when it can: [`super::decode::jpeg_binding_refusal`] for a JPEG's coefficients,
/// [`super::decode::rgb_binding_refusal`] for host pixels; a file for the hardware decoder
/// goes into its own buffer, not through a chunk.
pub fn binding_refusal(
    image: &DeviceSample,
    max_binding: u64,
) -> Result<Option<String>, DecodeError> {
    match image {
        DeviceSample::Jpeg {
            coeffs,
            scale,
            window,
            ..
        } => super::decode::jpeg_binding_refusal(coeffs, *scale, *window, max_binding),
        DeviceSample::Rgb(img) => Ok(super::decode::rgb_binding_refusal(img, max_binding)),
        DeviceSample::Shared(img) => {
            Ok(super::decode::rgb_binding_refusal(img.image(), max_binding))
        }
        // Checked when packed (`prepare_device`): what does not fit takes the host path.
        // A cached image was decoded on the device once already.
        DeviceSample::Encoded { .. }
        | DeviceSample::Entropy { .. }
        | DeviceSample::Packed { .. }
        | DeviceSample::Cached { .. } => Ok(None),
    }
}

impl Prepared {
    /// This sample, or, when the device cannot decode it with storage bindings of
    /// `max_binding` bytes (`binding_refusal`: at a reduced IDCT scale a
    /// small window of a large image still reads every coefficient block under it), the
    /// CPU decode of `bytes` with `opts` (the same window and scale), its reason in
    /// [`Self::cpu_reason`] so that it is counted as a CPU fallback. The coefficients go
    /// back to `pool`. Host pixels still too large for a binding (a PNG or WebP the CPU
    /// decodes whole, a window larger than a binding) are cropped to the window the plan
    /// reads, and reduced by a power of two where that is not enough (`fit`), the reason
    /// saying so. Errors: the CPU decoder's; [`DecodeError::Unsupported`] for an image
    /// that no reduction up to 1/64 fits.
    pub fn fit_bindings(
        self,
        bytes: &[u8],
        opts: &DecodeOptions,
        pool: &CoeffPool,
        max_binding: u64,
    ) -> Result<Prepared, DecodeError> {
        let Some(reason) = binding_refusal(&self.image, max_binding)? else {
            return Ok(self);
        };
        let mut p = if matches!(self.image, DeviceSample::Jpeg { .. }) {
            pool.recycle(std::iter::once(self.image));
            decoded_on_cpu(bytes, opts, reason)?
        } else {
            self
        };
        // Host pixels too large for a binding: cropped to the plan's window, reduced where
        // that is not enough (`fit`).
        let img = match &p.image {
            DeviceSample::Rgb(img) => img,
            DeviceSample::Shared(img) => img.image(),
            _ => return Ok(p),
        };
        let Some(reason) = super::decode::rgb_binding_refusal(img, max_binding) else {
            return Ok(p);
        };
        let fitted = super::fit::fit_host_pixels(img, opts, max_binding)
            .ok_or(DecodeError::Unsupported(reason))?;
        let how = match fitted.scale / img.scale.max(1) {
            1 => "cropped to the window its resize reads".to_string(),
            k => format!("reduced to 1/{k} on the host"),
        };
        log::debug!(
            "a {}x{} image {how} to fit a device binding of {max_binding} bytes",
            img.width,
            img.height
        );
        p.cpu_reason = Some(match p.cpu_reason.take() {
            Some(r) => format!("{r}; {how}"),
            None => how,
        });
        p.image = DeviceSample::Rgb(fitted);
        Ok(p)
    }

    /// This sample with its coefficients packed for upload ([`DeviceSample::packed`]).
    pub fn packed(mut self, pool: &CoeffPool) -> Result<Prepared, DecodeError> {
        self.image = self.image.packed(pool)?;
        Ok(self)
    }
}

impl AsRef<DeviceSample> for DeviceSample {
    fn as_ref(&self) -> &DeviceSample {
        self
    }
}

impl AsRef<DeviceSample> for DeviceJob {
    fn as_ref(&self) -> &DeviceSample {
        &self.image
    }
}

impl DeviceSample {
    /// A [`DeviceSample::Jpeg`] as [`DeviceSample::Packed`]: the blocks its window needs at
    /// its scale, packed here (on the worker that prepared it) rather than by the thread
    /// that plans the batch; the coefficients go back to `pool`, the packed buffer comes
    /// from it. Every other sample is returned as it is. Errors: what
    /// `crate::decode::jpeg::coeffs::pack` refuses.
    pub fn packed(self, pool: &CoeffPool) -> Result<DeviceSample, DecodeError> {
        let DeviceSample::Jpeg {
            coeffs,
            scale,
            window,
            orientation,
        } = self
        else {
            return Ok(self);
        };
        let mut packed = pool.take_packed();
        let r = pack(&coeffs, scale, window, &mut packed);
        pool.put(coeffs);
        match r {
            Ok(()) => Ok(DeviceSample::Packed {
                packed,
                orientation,
            }),
            Err(e) => {
                pool.put_packed(packed);
                Err(e)
            }
        }
    }
}

/// Prepares one image for the device: a JPEG is entropy-decoded on this thread to DCT
/// coefficients (the `opts.scale` and `opts.window` go with it; an EXIF-rotated JPEG, when
/// `opts.orientation`, is decoded whole and turned upright on the device, as the CPU
/// decoder does); what the device path does not take (other formats, and the JPEGs
/// [`read_coefficients`] reports as CPU-only) is decoded here by the CPU decoder with the
/// same options. Limits are checked from the headers first.
pub fn prepare(bytes: &[u8], opts: &DecodeOptions) -> Result<Prepared, DecodeError> {
    prepare_reusing(bytes, opts, &CoeffPool::default())
}

impl CoeffPool {
    /// Takes back the coefficient and packed buffers of `samples` (the rest is dropped).
    pub fn recycle(&self, samples: impl IntoIterator<Item = DeviceSample>) {
        for s in samples {
            match s {
                DeviceSample::Jpeg { coeffs, .. } => self.put(coeffs),
                DeviceSample::Packed { packed, .. } => self.put_packed(packed),
                _ => {}
            }
        }
    }
}

/// [`prepare`], reusing coefficient buffers from `pool`.
pub fn prepare_reusing(
    bytes: &[u8],
    opts: &DecodeOptions,
    pool: &CoeffPool,
) -> Result<Prepared, DecodeError> {
    prepare_with(bytes, opts, pool, HardwareDecode::Off)
}

/// [`prepare_reusing`], handing the JPEGs `hardware` takes to a hardware decoder whole.
pub fn prepare_with(
    bytes: &[u8],
    opts: &DecodeOptions,
    pool: &CoeffPool,
    hardware: HardwareDecode,
) -> Result<Prepared, DecodeError> {
    let info = peek_info(bytes)?;
    check_limits(&info, &opts.limits)?;
    prepare_for(bytes, info, opts, pool, hardware)
}

/// [`prepare_reusing`] for a caller that has read the headers and checked them against
/// `opts.limits` already (the pipeline does, to make the plan).
pub fn prepare_from(
    bytes: &[u8],
    info: ImageInfo,
    opts: &DecodeOptions,
    pool: &CoeffPool,
) -> Result<Prepared, DecodeError> {
    prepare_for(bytes, info, opts, pool, HardwareDecode::Off)
}

/// How many words of one binding a sample on the device entropy path may take.
fn binding_words(max_binding: u64) -> u64 {
    max_binding.max(64 << 10) / 4
}

/// Which JPEGs the device entropy path takes ([`prepare_device_verified`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EntropyPaths {
    /// Those with restart markers (the `huffman` pass, an interval per invocation).
    pub restart: bool,
    /// Baseline ones without restart markers (the self-synchronising decode, where the
    /// backend runs it: `DeviceBatcher::sync_entropy`).
    pub sync: bool,
}

impl EntropyPaths {
    /// The restart-interval path alone (a backend without the sync decode).
    pub const RESTART: EntropyPaths = EntropyPaths {
        restart: true,
        sync: false,
    };
}

/// [`prepare_for`], and, on the device entropy paths `entropy` names, a JPEG that decodes
/// strictly is packed for the device ([`DeviceSample::Entropy`]: the host reads its
/// headers and finds its intervals or cuts its scan, nothing more) when its window fits
/// bindings of `max_binding` bytes. The hardware decoder comes first.
pub fn prepare_device(
    bytes: &[u8],
    info: ImageInfo,
    opts: &DecodeOptions,
    pool: &CoeffPool,
    hardware: HardwareDecode,
    entropy: EntropyPaths,
    max_binding: u64,
) -> Result<Prepared, DecodeError> {
    prepare_device_verified(
        bytes,
        info,
        opts,
        pool,
        hardware,
        entropy,
        max_binding,
        true,
        true,
    )
}

/// [`prepare_device`]; unless `verified` (the file's verdict is known clean), a file on
/// the device entropy path uploads every restart interval, so that the device judges the
/// whole file whatever the window ([`PackedEntropy::whole`]). A file both the hardware
/// decoder and the device entropy path take goes to the hardware decoder when
/// `engines_first`, else to the device entropy path (the hardware decoder then takes it
/// only if the device entropy path does not).
#[allow(clippy::too_many_arguments)]
pub fn prepare_device_verified(
    bytes: &[u8],
    info: ImageInfo,
    opts: &DecodeOptions,
    pool: &CoeffPool,
    hardware: HardwareDecode,
    entropy: EntropyPaths,
    max_binding: u64,
    verified: bool,
    engines_first: bool,
) -> Result<Prepared, DecodeError> {
    let on = entropy.restart || entropy.sync;
    if on && (!engines_first || !hardware.takes(bytes, &info, opts)) {
        if let Some(p) = prepare_entropy(bytes, &info, opts, max_binding, verified, entropy) {
            return Ok(p);
        }
    }
    prepare_for(bytes, info, opts, pool, hardware)
}

/// The device entropy path for `bytes`, or `None` when it does not take the file
/// (anything the scan refuses, lenient decoding, a window too large). A file with
/// restart markers takes the restart-interval decode (with `paths.restart`), a baseline
/// one without them the self-synchronising decode (with `paths.sync`). Unless `verified`
/// either decodes the whole file whatever the window (so the device judges it whole);
/// a verified file's crop decodes only the intervals under the window, or the
/// subsequences up to the window's last MCU.
fn prepare_entropy(
    bytes: &[u8],
    info: &ImageInfo,
    opts: &DecodeOptions,
    max_binding: u64,
    verified: bool,
    paths: EntropyPaths,
) -> Option<Prepared> {
    // Lenient decoding delivers damaged data as libjpeg fills it in: the host path.
    if info.format != Format::Jpeg || !opts.strict {
        return None;
    }
    let scan = match RestartScan::parse(bytes) {
        Ok(scan) if paths.restart => Some(scan),
        Ok(_) => None,
        Err(why) => {
            log::trace!("host entropy decode: {why}");
            None
        }
    };
    let sync = scan.is_none();
    let scan = match scan {
        Some(scan) => scan,
        None if paths.sync => RestartScan::parse_sync(bytes).ok()?,
        None => return None,
    };
    let scale = opts.scale.clamp(1, 8);
    let full = [info.width.div_ceil(scale), info.height.div_ceil(scale)];
    let (window, orientation) = stored_request(info, opts, full);
    let words = binding_words(max_binding);
    let mut packed = Box::<PackedEntropy>::default();
    if sync {
        // Refused before the chunk is allocated: the data (at most the file's bytes,
        // un-stuffed), the tables, two copies of the records per 1024 bits.
        let data = bytes.len() as u64 / 4;
        let records = 2 * data / 32 * RECORD_WORDS as u64;
        if data + 1024 > words / 2 || records > words {
            return None;
        }
        pack_sync_window(
            &scan,
            bytes,
            scale,
            window,
            SYNC_ROUNDS,
            !verified,
            &mut packed,
        )
        .ok()?;
    } else {
        pack_intervals(&scan, bytes, scale, window, !verified, &mut packed).ok()?;
    }
    if packed.coef_words > words
        || packed.packed.data.len() as u64 + 8 * packed.intervals.len() as u64 > words / 2
    {
        return None;
    }
    Some(Prepared {
        image: DeviceSample::Entropy {
            packed,
            orientation,
            bytes: bytes.to_vec(),
            info: *info,
            opts: *opts,
        },
        info: *info,
        cpu_reason: None,
        warning: None,
    })
}

/// The host path for a sample the device entropy path flagged: [`prepare_for`] without
/// the hardware decoder and the device entropy path.
pub fn prepare_host(
    bytes: &[u8],
    info: ImageInfo,
    opts: &DecodeOptions,
    pool: &CoeffPool,
) -> Result<Prepared, DecodeError> {
    prepare_for(bytes, info, opts, pool, HardwareDecode::Off)
}

/// [`prepare_from`], handing the JPEGs `hardware` takes to a hardware decoder as they are
/// ([`DeviceSample::Encoded`]).
pub fn prepare_for(
    bytes: &[u8],
    info: ImageInfo,
    opts: &DecodeOptions,
    pool: &CoeffPool,
    hardware: HardwareDecode,
) -> Result<Prepared, DecodeError> {
    if hardware.takes(bytes, &info, opts) {
        let full = [info.width, info.height];
        let (window, orientation) = stored_request(&info, opts, full);
        return Ok(Prepared {
            image: DeviceSample::Encoded {
                bytes: bytes.to_vec(),
                window,
                full,
                orientation,
            },
            info,
            cpu_reason: None,
            warning: None,
        });
    }
    let reason = if info.format != Format::Jpeg {
        "not a JPEG".to_string()
    } else {
        let mut coeffs = pool.take();
        match read_coefficients(bytes, opts.strict, &mut coeffs)? {
            CoeffStatus::Ready => {
                let warning = coeffs.warning.clone();
                let scale = opts.scale.clamp(1, 8);
                let full = [info.width.div_ceil(scale), info.height.div_ceil(scale)];
                let (window, orientation) = stored_request(&info, opts, full);
                return Ok(Prepared {
                    image: DeviceSample::Jpeg {
                        coeffs,
                        scale,
                        window,
                        orientation,
                    },
                    info,
                    cpu_reason: None,
                    warning,
                });
            }
            CoeffStatus::CpuOnly(reason) => {
                pool.put(coeffs);
                reason
            }
        }
    };
    decoded_on_cpu(bytes, opts, reason)
}

/// `bytes` decoded by the CPU with `opts`, for the device to take as pixels; `reason` says
/// why the device path did not (a CPU fallback in the stats).
fn decoded_on_cpu(
    bytes: &[u8],
    opts: &DecodeOptions,
    reason: String,
) -> Result<Prepared, DecodeError> {
    let mut img = Image8::default();
    let report = crate::decode::cpu::decode_image_report(bytes, opts, &mut img)?;
    Ok(Prepared {
        image: DeviceSample::Rgb(img),
        info: report.info,
        cpu_reason: Some(reason),
        warning: report.warning,
    })
}

/// The stored rectangle to decode of an image of (scaled) size `full`, and the EXIF
/// orientation to apply after: `opts.window` is in the upright frame, so a rotated image
/// decodes the stored rectangle that turns into it.
fn stored_request(info: &ImageInfo, opts: &DecodeOptions, full: [u32; 2]) -> ([u32; 4], u8) {
    let orientation = if opts.orientation && (2..=8).contains(&info.orientation) {
        info.orientation
    } else {
        1
    };
    let window = match opts.window {
        Some(w) => stored_window(w, orientation, full),
        None => [0, 0, full[0], full[1]],
    };
    (window, orientation)
}

/// The rectangle of the stored (unrotated) image of size `full` that EXIF `orientation`
/// turns into the upright window `w` (`[x0, y0, x1, y1)`), clamped to the image.
pub(crate) fn stored_window(w: [u32; 4], orientation: u8, full: [u32; 2]) -> [u32; 4] {
    let [sw, sh] = full;
    // Sizes of the upright frame.
    let (uw, uh) = if orientation >= 5 { (sh, sw) } else { (sw, sh) };
    let [x0, y0, x1, y1] = [w[0].min(uw), w[1].min(uh), w[2].min(uw), w[3].min(uh)];
    match orientation {
        2 => [sw - x1, y0, sw - x0, y1],
        3 => [sw - x1, sh - y1, sw - x0, sh - y0],
        4 => [x0, sh - y1, x1, sh - y0],
        5 => [y0, x0, y1, x1],
        6 => [y0, sh - x1, y1, sh - x0],
        7 => [sw - y1, sh - x1, sw - y0, sh - x0],
        8 => [sw - y1, x0, sw - y0, x1],
        _ => [x0, y0, x1, y1],
    }
}

/// Where the decoded stored-frame window `g` lies once turned upright by `orientation`,
/// and the size of the upright image: the inverse of [`stored_window`].
pub(crate) fn upright_origin(g: &DeviceImage, orientation: u8) -> ((u32, u32), (u32, u32)) {
    let (sw, sh) = (g.full_width, g.full_height);
    let (a, b) = (g.origin_x, g.origin_y);
    let (ra, rb) = (sw - (a + g.width).min(sw), sh - (b + g.height).min(sh));
    let origin = match orientation {
        2 => (ra, b),
        3 => (ra, rb),
        4 => (a, rb),
        5 => (b, a),
        6 => (rb, a),
        7 => (rb, ra),
        8 => (b, ra),
        _ => (a, b),
    };
    let full = if orientation >= 5 { (sh, sw) } else { (sw, sh) };
    (origin, full)
}

/// One sample of a batch: its plan, its image input, and its label plane.
#[derive(Debug)]
pub struct DeviceJob {
    /// The plan.
    pub plan: SamplePlan,
    /// The image.
    pub image: DeviceSample,
    /// The label plane, for segmentation sets.
    pub mask: Option<LabelPlane>,
    /// Where its decoded image is kept in the device cache, when it is decoded whole to
    /// be kept there.
    pub cache_to: Option<CacheSlot>,
}

crate::error::from_str_by_name! {
    /// `off`, `exact` or `all`, any case: the names [`HardwareDecode`] serialises to.
    HardwareDecode, "hardware_decode", "hardware decode",
    { "exact" => Exact, "all" => All, "off" => Off }
}
