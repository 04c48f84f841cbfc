//! One batch on the GPU: the host packs every sample's input (DCT coefficients, or pixels
//! the CPU decoded) into a mapped staging buffer, one copy uploads it, and the decode and
//! augment passes write the batch straight into its output buffers.
//!
//! # Buffers
//! - A ring of `K` staging buffers (`MAP_WRITE | COPY_SRC`). The host writes batch `b + 1`
//!   into one while the GPU still works on batch `b`; a staging buffer is written again
//!   only after its re-mapping has completed, which happens after the GPU finished the
//!   copy out of it.
//! - One set of device-local input and scratch buffers, grow-only. Submissions on one queue
//!   execute in order and wgpu orders each batch's writes after the previous batch's
//!   reads, so one set serves every batch in flight.
//! - A ring of output buffers ([`GpuBatchBuffers`]), one per batch in flight, owned by
//!   the pipeline's batch ring: a batch's buffers are reused only after the caller dropped
//!   the batch, and any work the caller submitted on them before that is ordered first.
//!
//! Pipelines and bind group layouts are created once, in [`Batcher::new`].

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use super::augment::{AugmentInput, AugmentKernels, AugmentScratch};
use super::decode::{DecodeInput, DecodeKernels, DecodeScratch, GpuImage};
use super::orient::{OrientJob, OrientKernel, OrientScratch};
use super::WgpuContext;
use crate::augment::SamplePlan;
use crate::decode::jpeg::coeffs::{read_coefficients, CoeffStatus, Coefficients};
use crate::decode::{
    check_limits, peek_info, DecodeError, DecodeOptions, Format, Image8, ImageInfo, LabelPlane,
};
use crate::error::{Error, Result};

/// What the host hands the GPU for one sample.
#[derive(Debug)]
pub enum GpuSample {
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
    /// Pixels the CPU decoded (other formats, JPEG features the GPU path does not take,
    /// cached samples).
    Rgb(Image8),
}

/// A sample's image, ready for the device, and why the CPU decoded it if it did.
#[derive(Debug)]
pub struct Prepared {
    /// The device input.
    pub image: GpuSample,
    /// What the headers say.
    pub info: ImageInfo,
    /// `Some(reason)` when the CPU decoded the image (a fallback, counted in the stats).
    pub cpu_reason: Option<String>,
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

/// Coefficient buffers handed back after their batch was packed, for the next samples:
/// a sample's coefficients take about twice its pixel count in bytes, too much to
/// allocate (and page in) per sample.
#[derive(Debug, Default)]
pub struct CoeffPool {
    // Boxed as the jobs hold them, so a buffer goes back and forth without re-boxing.
    #[allow(clippy::vec_box)]
    free: std::sync::Mutex<Vec<Box<Coefficients>>>,
}

impl CoeffPool {
    /// Keeps at most this many buffers.
    const MAX: usize = 1024;

    fn take(&self) -> Box<Coefficients> {
        self.free
            .lock()
            .ok()
            .and_then(|mut v| v.pop())
            .unwrap_or_default()
    }

    fn put(&self, coeffs: Box<Coefficients>) {
        if let Ok(mut v) = self.free.lock() {
            if v.len() < Self::MAX {
                v.push(coeffs);
            }
        }
    }

    /// Takes back the coefficient buffers of `samples` (the rest is dropped).
    pub fn recycle(&self, samples: impl IntoIterator<Item = GpuSample>) {
        if let Ok(mut v) = self.free.lock() {
            for s in samples {
                if let (GpuSample::Jpeg { coeffs, .. }, true) = (s, v.len() < Self::MAX) {
                    v.push(coeffs);
                }
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
    let info = peek_info(bytes)?;
    check_limits(&info, &opts.limits)?;
    prepare_from(bytes, info, opts, pool)
}

/// [`prepare_reusing`] for a caller that has read the headers and checked them against
/// `opts.limits` already (the pipeline does, to make the plan).
pub fn prepare_from(
    bytes: &[u8],
    info: ImageInfo,
    opts: &DecodeOptions,
    pool: &CoeffPool,
) -> Result<Prepared, DecodeError> {
    let reason = if info.format != Format::Jpeg {
        "not a JPEG".to_string()
    } else {
        let mut coeffs = pool.take();
        match read_coefficients(bytes, opts.strict, &mut coeffs)? {
            CoeffStatus::Ready => {
                let scale = opts.scale.clamp(1, 8);
                let full = [info.width.div_ceil(scale), info.height.div_ceil(scale)];
                // A window is in the upright frame: a rotated image decodes the stored
                // rectangle that turns into it.
                let orientation = if opts.orientation && (2..=8).contains(&info.orientation) {
                    info.orientation
                } else {
                    1
                };
                let window = match opts.window {
                    Some(w) => stored_window(w, orientation, full),
                    None => [0, 0, full[0], full[1]],
                };
                return Ok(Prepared {
                    image: GpuSample::Jpeg {
                        coeffs,
                        scale,
                        window,
                        orientation,
                    },
                    info,
                    cpu_reason: None,
                });
            }
            CoeffStatus::CpuOnly(reason) => {
                pool.put(coeffs);
                reason
            }
        }
    };
    let mut img = Image8::default();
    let info = crate::decode::cpu::decode_image(bytes, opts, &mut img)?;
    Ok(Prepared {
        image: GpuSample::Rgb(img),
        info,
        cpu_reason: Some(reason),
    })
}

/// The rectangle of the stored (unrotated) image of size `full` that EXIF `orientation`
/// turns into the upright window `w` (`[x0, y0, x1, y1)`), clamped to the image.
fn stored_window(w: [u32; 4], orientation: u8, full: [u32; 2]) -> [u32; 4] {
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
fn upright_origin(g: &GpuImage, orientation: u8) -> ((u32, u32), (u32, u32)) {
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
pub struct GpuJob {
    /// The plan.
    pub plan: SamplePlan,
    /// The image.
    pub image: GpuSample,
    /// The label plane, for segmentation sets.
    pub mask: Option<LabelPlane>,
}

/// The output buffers of one batch in flight.
#[derive(Debug)]
pub struct GpuBatchBuffers {
    /// `batch_size * image_bytes` (rounded up to 4 bytes): slot `i` at `i * image_bytes`.
    pub images: wgpu::Buffer,
    /// `batch_size * w * h` u16 class ids (rounded up to 4 bytes), for segmentation sets.
    pub masks: Option<wgpu::Buffer>,
}

fn round4(n: u64) -> u64 {
    n.div_ceil(4).max(1) * 4
}

impl GpuBatchBuffers {
    /// Output buffers for `batch_size` samples of `image_bytes` (and `mask_bytes` when not
    /// 0). Larger than the device allows, or out of memory: [`Error::Device`].
    pub fn new(
        ctx: &WgpuContext,
        batch_size: usize,
        image_bytes: usize,
        mask_bytes: usize,
    ) -> Result<Self> {
        let make = |label: &str, bytes: usize| {
            let size = (batch_size as u64)
                .checked_mul(bytes as u64)
                .ok_or_else(|| Error::Device(format!("{label}: size overflows")))?;
            ctx.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: round4(size),
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        };
        Ok(GpuBatchBuffers {
            images: make("stoker batch images", image_bytes)?,
            masks: match mask_bytes {
                0 => None,
                m => Some(make("stoker batch masks", m)?),
            },
        })
    }
}

const PENDING: u8 = 0;
const MAPPED: u8 = 1;
const FAILED: u8 = 2;

/// A host-visible staging buffer and its mapping state (`PENDING`, `MAPPED`, `FAILED`).
struct Staging {
    buffer: wgpu::Buffer,
    state: Arc<AtomicU8>,
    /// The submission that copies out of it, to wait for that one alone.
    submission: Option<wgpu::SubmissionIndex>,
}

/// The largest storage binding the device takes.
pub fn max_binding(ctx: &WgpuContext) -> u64 {
    ctx.device().limits().max_storage_buffer_binding_size
}

/// Runs batches on one wgpu device. Used by one thread at a time (the pipeline's
/// consumer); everything it allocates is reused from batch to batch.
pub struct Batcher {
    ctx: WgpuContext,
    decode: DecodeKernels,
    augment: AugmentKernels,
    decode_in: DecodeInput,
    augment_in: AugmentInput,
    decode_scratch: DecodeScratch,
    augment_scratch: AugmentScratch,
    staging: Vec<Staging>,
    ring: usize,
    next: usize,
    decode_buffer: Option<wgpu::Buffer>,
    augment_buffer: Option<wgpu::Buffer>,
    windows: Option<wgpu::Buffer>,
    images: Vec<GpuImage>,
    orient: OrientKernel,
    orient_scratch: OrientScratch,
    orient_jobs: Vec<OrientJob>,
    /// Words of the windows buffer this batch uses: decoded windows, then upright ones.
    window_words: u64,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("device", &self.ctx.name())
            .field("staging", &self.staging.len())
            .finish()
    }
}

impl Batcher {
    /// Compiles the pipelines on `ctx`; `ring` staging buffers (at least 2).
    pub fn new(ctx: &WgpuContext, ring: usize) -> Result<Self> {
        Ok(Batcher {
            decode: DecodeKernels::new(ctx)?,
            augment: AugmentKernels::new(ctx)?,
            orient: OrientKernel::new(ctx)?,
            orient_scratch: OrientScratch::default(),
            orient_jobs: Vec::new(),
            window_words: 0,
            ctx: ctx.clone(),
            decode_in: DecodeInput::new().with_max_binding(max_binding(ctx)),
            augment_in: AugmentInput::default(),
            decode_scratch: DecodeScratch::default(),
            augment_scratch: AugmentScratch::default(),
            staging: Vec::new(),
            ring: ring.max(2),
            next: 0,
            decode_buffer: None,
            augment_buffer: None,
            windows: None,
            images: Vec::new(),
        })
    }

    /// The context.
    pub fn context(&self) -> &WgpuContext {
        &self.ctx
    }

    /// A mapped staging buffer of at least `bytes`: the next one of the ring, once the
    /// GPU has finished with it (its re-mapping completed).
    fn staging(&mut self, bytes: u64) -> Result<usize> {
        let need = round4(bytes);
        if self.staging.len() < self.ring {
            let st = self.new_staging(need)?;
            self.staging.push(st);
            return Ok(self.staging.len() - 1);
        }
        let i = self.next % self.ring;
        self.next += 1;
        if self.staging[i].state.load(Ordering::Acquire) == PENDING {
            // Waits for the submission that copies out of this buffer (not for the later
            // ones), which also runs the mapping callback.
            let submission_index = self.staging[i].submission.clone();
            self.ctx
                .device()
                .poll(wgpu::PollType::Wait {
                    submission_index,
                    timeout: None,
                })
                .map_err(|e| Error::Device(format!("wgpu poll failed: {e}")))?;
            if self.staging[i].state.load(Ordering::Acquire) == PENDING {
                self.ctx.wait()?;
            }
        }
        if self.staging[i].state.load(Ordering::Acquire) != MAPPED {
            log::warn!("a staging buffer could not be mapped again; replacing it");
            self.staging[i] = self.new_staging(need + need / 2)?;
        } else if self.staging[i].buffer.size() < need {
            self.staging[i] = self.new_staging(need + need / 2)?;
        }
        Ok(i)
    }

    fn new_staging(&self, bytes: u64) -> Result<Staging> {
        Ok(Staging {
            buffer: self.ctx.create_buffer(&wgpu::BufferDescriptor {
                label: Some("stoker staging"),
                size: round4(bytes),
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: true,
            })?,
            state: Arc::new(AtomicU8::new(MAPPED)),
            submission: None,
        })
    }

    /// Packs the decode inputs of `images` and returns the windows they decode to.
    fn pack_decode<'a>(&mut self, images: impl Iterator<Item = &'a GpuSample>) -> Result<()> {
        self.decode_in.clear();
        self.images.clear();
        self.orient_jobs.clear();
        for img in images {
            let g = match img {
                GpuSample::Jpeg {
                    coeffs,
                    scale,
                    window,
                    orientation,
                } => {
                    let g = self.decode_in.push_jpeg(coeffs, *scale, *window)?;
                    if *orientation != 1 {
                        // Placed after every decoded window once their total is known.
                        self.orient_jobs.push(OrientJob {
                            src: g,
                            orientation: *orientation,
                            dst: self.images.len() as u64,
                        });
                    }
                    g
                }
                GpuSample::Rgb(img) => self.decode_in.push_rgb(img)?,
            };
            self.images.push(g);
        }
        // The upright windows follow the decoded ones; the samples read those.
        let mut next = self.decode_in.window_words();
        for job in &mut self.orient_jobs {
            let slot = job.dst as usize;
            let (ow, oh) = job.size();
            job.dst = next;
            let end = next + u64::from(ow) * u64::from(oh);
            let offset = u32::try_from(next)
                .ok()
                .filter(|_| end <= u64::from(u32::MAX))
                .ok_or_else(|| Error::Device("a batch's decoded windows exceed 16 GiB".into()))?;
            if let Some(g) = self.images.get_mut(slot) {
                let (origin, full) = upright_origin(g, job.orientation);
                *g = GpuImage {
                    offset,
                    width: ow,
                    height: oh,
                    origin_x: origin.0,
                    origin_y: origin.1,
                    full_width: full.0,
                    full_height: full.1,
                    scale: g.scale,
                };
            }
            next += u64::from(ow) * u64::from(oh);
        }
        self.window_words = next;
        Ok(())
    }

    /// Writes the packed inputs into the next staging buffer and records their upload and
    /// the decode pass; returns the encoder, the augment input buffer and the staging slot.
    fn upload_and_decode(&mut self) -> Result<(wgpu::CommandEncoder, wgpu::Buffer, usize)> {
        // The augment blob starts at an aligned offset of the one staging buffer, both
        // blobs padded to whole words.
        let d_len = round4(self.decode_in.bytes().len() as u64);
        let a_off = d_len.div_ceil(256) * 256;
        let a_len = round4(self.augment_in.bytes().len() as u64);
        let total = a_off + a_len;
        let si = self.staging(total)?;
        let (dbytes, abytes) = (self.decode_in.bytes(), self.augment_in.bytes());
        {
            let st = &self.staging[si];
            let mut view = st
                .buffer
                .slice(..total)
                .get_mapped_range_mut()
                .map_err(|e| Error::Device(format!("staging view failed: {e}")))?;
            view.slice(..dbytes.len()).copy_from_slice(dbytes);
            view.slice(a_off as usize..a_off as usize + abytes.len())
                .copy_from_slice(abytes);
        }
        self.staging[si].buffer.unmap();
        self.staging[si].state.store(PENDING, Ordering::Release);
        match self.record_decode(si, d_len, a_off, a_len) {
            Ok((enc, abuf)) => Ok((enc, abuf, si)),
            Err(e) => {
                // Not submitted: map the staging buffer again so it is not lost.
                self.remap(si);
                Err(e)
            }
        }
    }

    /// Records the upload out of staging buffer `si` and the decode (and orientation)
    /// passes; returns the encoder and the augment input buffer.
    fn record_decode(
        &mut self,
        si: usize,
        d_len: u64,
        a_off: u64,
        a_len: u64,
    ) -> Result<(wgpu::CommandEncoder, wgpu::Buffer)> {
        let storage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let dbuf = self.ctx.grow_buffer(
            &mut self.decode_buffer,
            "stoker decode input",
            d_len,
            storage,
        )?;
        let abuf = self.ctx.grow_buffer(
            &mut self.augment_buffer,
            "stoker augment input",
            a_len,
            storage,
        )?;
        let windows = self.ctx.grow_buffer(
            &mut self.windows,
            "stoker decoded windows",
            self.window_words * 4,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
        )?;
        let (dbytes, abytes) = (self.decode_in.bytes(), self.augment_in.bytes());
        let mut enc = self
            .ctx
            .device()
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("stoker batch"),
            });
        let sbuf = &self.staging[si].buffer;
        if !dbytes.is_empty() {
            enc.copy_buffer_to_buffer(sbuf, 0, &dbuf, 0, d_len);
        }
        if !abytes.is_empty() {
            enc.copy_buffer_to_buffer(sbuf, a_off, &abuf, 0, a_len);
        }
        self.decode.encode(
            &self.ctx,
            &mut enc,
            &self.decode_in,
            &dbuf,
            &windows,
            &mut self.decode_scratch,
        )?;
        self.orient.encode(
            &self.ctx,
            &mut enc,
            &self.orient_jobs,
            &windows,
            &mut self.orient_scratch,
        )?;
        Ok((enc, abuf))
    }

    /// Submits `enc` and maps staging buffer `si` again: the mapping completes once the
    /// copy out of it has run, and only then is it written again.
    fn submit(&mut self, enc: wgpu::CommandEncoder, si: usize) -> Result<()> {
        // A command the device rejects is an error here, not a panic in wgpu's handler.
        let device = self.ctx.device();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let commands = enc.finish();
        if let Some(e) = pollster::block_on(scope.pop()) {
            self.remap(si);
            return Err(Error::Device(format!("batch commands rejected: {e}")));
        }
        let index = self.ctx.queue().submit([commands]);
        self.staging[si].submission = Some(index);
        self.remap(si);
        Ok(())
    }

    /// Maps staging buffer `si` again (also after a failed batch, so it is not lost).
    fn remap(&mut self, si: usize) {
        let state = Arc::clone(&self.staging[si].state);
        self.staging[si]
            .buffer
            .slice(..)
            .map_async(wgpu::MapMode::Write, move |r| {
                state.store(if r.is_ok() { MAPPED } else { FAILED }, Ordering::Release);
            });
    }

    /// Decodes and augments `jobs` into `out` (slot `i` for job `i`) and submits the work.
    /// Returns without waiting: work the caller submits later on the same queue sees the
    /// finished batch.
    pub fn run(&mut self, jobs: &[GpuJob], out: &GpuBatchBuffers) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        self.pack_decode(jobs.iter().map(|j| &j.image))?;
        self.augment_in.clear();
        for (j, img) in jobs.iter().zip(&self.images) {
            self.augment_in.push(&j.plan, *img, j.mask.as_ref())?;
        }
        let (mut enc, abuf, si) = self.upload_and_decode()?;
        let r = match self.windows.clone() {
            Some(windows) => self.augment.encode(
                &self.ctx,
                &mut enc,
                &self.augment_in,
                &abuf,
                &windows,
                &out.images,
                out.masks.as_ref(),
                &mut self.augment_scratch,
            ),
            None => Err(Error::Device("decoded windows buffer missing".into())),
        };
        match r {
            Ok(()) => self.submit(enc, si),
            Err(e) => {
                self.remap(si);
                Err(e)
            }
        }
    }

    /// Decodes `images` on the device and submits the work without waiting (for decode
    /// benchmarks: call [`WgpuContext::wait`] before stopping the clock).
    pub fn decode(&mut self, images: &[GpuSample]) -> Result<()> {
        if images.is_empty() {
            return Ok(());
        }
        self.pack_decode(images.iter())?;
        self.augment_in.clear();
        let (enc, _, si) = self.upload_and_decode()?;
        self.submit(enc, si)
    }

    /// Decodes `images` on the device and reads the decoded windows back (to compare
    /// backends and write previews). Blocks until done.
    pub fn decode_to_host(&mut self, images: &[GpuSample]) -> Result<Vec<Image8>> {
        self.decode(images)?;
        let Some(windows) = self.windows.clone() else {
            return Ok(Vec::new());
        };
        let data = self.ctx.read_buffer(&windows, 0, self.window_words * 4)?;
        self.images
            .iter()
            .map(|g| {
                let start = g.offset as usize * 4;
                let n = g.width as usize * g.height as usize;
                let px = data.get(start..start + 4 * n).ok_or_else(|| {
                    Error::Device("a decoded window lies outside the windows buffer".into())
                })?;
                Ok(Image8 {
                    width: g.width,
                    height: g.height,
                    data: px
                        .chunks_exact(4)
                        .flat_map(|p| [p[0], p[1], p[2]])
                        .collect(),
                    origin: (g.origin_x, g.origin_y),
                    full: (g.full_width, g.full_height),
                    scale: g.scale,
                })
            })
            .collect()
    }
}
