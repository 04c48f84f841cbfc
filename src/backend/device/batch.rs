//! One batch of device work, planned on the host: the samples' inputs packed into one
//! upload, the windows they decode to, and the ordered [`Step`]s that decode, turn
//! upright and augment them. Each GPU backend allocates the buffers [`Sizes`] asks for,
//! copies [`BatchPlan::write_upload`] in, and runs the steps.
#![doc(hidden)]

use super::augment::AugmentInput;
use super::decode::{DecodeInput, DeviceImage, Hole, Segment};
use super::error::DeviceError;
use super::job::{upright_origin, DeviceJob, DeviceSample};
use super::launch::{grid, Binding, Buffer, Kernel, Launch, Step, PARAM_WORDS};
use super::mix;
use super::orient::{self, OrientJob};
use super::upload::{spread_threads, write_range};
pub use super::upload::{UploadPart, UploadTarget, UPLOAD_THREADS};
use crate::augment::mix::BatchMix;
use crate::decode::Image8;
use crate::error::Result;

/// What the device allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest storage binding, in bytes.
    pub max_binding: u64,
    /// Most workgroups along one grid dimension.
    pub per_dim: u64,
}

impl DeviceLimits {
    /// Limits that bind nothing in practice (a CUDA device): 2 GiB bindings (the kernels
    /// index words with u32) and 65535 blocks along y.
    pub const UNBOUNDED: DeviceLimits = DeviceLimits {
        max_binding: 1 << 31,
        per_dim: 65535,
    };
}

/// What the batches planned so far came to, summed: how much each sample costs the
/// upload and how many passes a batch takes, visible without a device
/// ([`super::DeviceBatcher::plan_counts`], `stoker bench decode --json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PlanCounts {
    /// Batches planned.
    pub batches: u64,
    /// Samples in them.
    pub samples: u64,
    /// Bytes uploaded (both parts of every upload).
    pub upload_bytes: u64,
    /// Of those, the decode input's: coefficients, entropy-coded bytes, pixels (and the
    /// orientation pass's job table, 32 bytes a rotated sample).
    pub decode_input_bytes: u64,
    /// Kernel launches (dispatches).
    pub launches: u64,
    /// Device-to-device copies.
    pub copies: u64,
    /// Entropy-status read-backs (one per batch holding samples on the device entropy
    /// path: a host wait).
    pub entropy_checks: u64,
    /// Of the upload bytes, those copied once, straight from the buffers the workers
    /// packed (coefficient blocks, entropy-coded bytes), into the staging buffer
    /// ([`BatchPlan::write_upload`], by up to `UPLOAD_THREADS` threads at once); the
    /// rest are the records, tables, host pixels and the augment input.
    pub payload_bytes: u64,
}

/// Bytes of each buffer a planned batch uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sizes {
    /// The whole upload: the decode blob at 0, the augment blob at `augment_offset`.
    pub upload: u64,
    /// [`Buffer::DecodeInput`].
    pub decode_input: u64,
    /// Where the augment blob starts in the upload (a multiple of 256).
    pub augment_offset: u64,
    /// [`Buffer::AugmentInput`].
    pub augment_input: u64,
    /// [`Buffer::Planes`].
    pub planes: u64,
    /// [`Buffer::Windows`].
    pub windows: u64,
    /// [`Buffer::Oriented`].
    pub oriented: u64,
    /// [`Buffer::Horizontal`].
    pub horizontal: u64,
    /// [`Buffer::Resized`].
    pub resized: u64,
    /// [`Buffer::Images`] (0 when the batch only decodes).
    pub images: u64,
    /// [`Buffer::Masks`] (0 without masks).
    pub masks: u64,
    /// [`Buffer::Rgbi`] (0 without hardware-decoded samples).
    pub rgbi: u64,
    /// [`Buffer::Coefficients`] (0 without samples on the device entropy path).
    pub coefficients: u64,
    /// [`Buffer::EntropyStatus`] (0 without samples on the device entropy path).
    pub entropy_status: u64,
    /// Bytes of [`Buffer::DecodedCache`] the plan's copies reach (0 when it has none):
    /// the persistent buffer must hold at least this many, keeping what it holds.
    pub decoded_cache: u64,
    /// [`Buffer::MixScratch`] (0 when the batch is not mixed).
    pub mix_scratch: u64,
    /// [`Buffer::SyncRecords`] (0 without samples on the sync decode).
    pub sync_records: u64,
}

impl Sizes {
    /// Bytes of `buffer`.
    pub fn of(&self, buffer: Buffer) -> u64 {
        match buffer {
            Buffer::DecodeInput => self.decode_input,
            Buffer::Planes => self.planes,
            Buffer::Windows => self.windows,
            Buffer::Oriented => self.oriented,
            Buffer::AugmentInput => self.augment_input,
            Buffer::Horizontal => self.horizontal,
            Buffer::Resized => self.resized,
            Buffer::Images => self.images,
            Buffer::Masks => self.masks,
            Buffer::Rgbi => self.rgbi,
            Buffer::Coefficients => self.coefficients,
            Buffer::EntropyStatus => self.entropy_status,
            Buffer::DecodedCache => self.decoded_cache,
            Buffer::MixScratch => self.mix_scratch,
            Buffer::SyncRecords => self.sync_records,
        }
    }
}

/// A window's first word `next` as the `u32` offset the kernels take, refused (as `what`)
/// unless its end `end` is within `u32` words too.
fn window_offset(next: u64, end: u64, what: &'static str) -> Result<u32, DeviceError> {
    u32::try_from(next)
        .ok()
        .filter(|_| end <= u64::from(u32::MAX))
        .ok_or(DeviceError::TooLarge {
            what,
            value: end,
            max: u32::MAX.into(),
        })
}

fn round4(n: u64) -> u64 {
    n.div_ceil(4).max(1) * 4
}

/// One component plane of a hardware-decoded image, at its stored resolution, as the
/// decoder writes it in [`Buffer::Rgbi`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredPlane {
    /// Byte offset from the image's region (a multiple of 256).
    pub offset: u64,
    /// Bytes between rows (a multiple of 256, at least `width`).
    pub pitch: u64,
    /// Samples per row (libjpeg's `downsampled_width`).
    pub width: u32,
    /// Rows (`downsampled_height`).
    pub height: u32,
    /// Rows the plane's region holds: its height rounded up to whole MCUs (a decoder may
    /// write the padded rows and columns of the last MCU), `pitch` bytes each, followed by
    /// [`GUARD_BYTES`] guard bytes.
    pub rows: u32,
    /// [`Upsample::code`](crate::decode::jpeg::coeffs::Upsample::code).
    pub method: u32,
    /// Output pixels per sample, horizontally.
    pub eh: u32,
    /// Output pixels per sample, vertically.
    pub ev: u32,
}

/// Words of an [`EncodedJob`]'s header in [`Buffer::Rgbi`] (what `pack_planar` reads).
pub const HARDWARE_HEADER_WORDS: usize = 64;

/// Bytes after each [`StoredPlane`]'s rows that no decoder may write: the CUDA backend
/// fills them before nvJPEG decodes and checks them after, so a decoder that writes past
/// a plane is an error, not a neighbour's corrupted pixels.
pub const GUARD_BYTES: u64 = 256;

/// A sample for the hardware decoder: the whole image decoded into its region of
/// [`Buffer::Rgbi`] (planes at their stored resolution, or, where the CPU decodes it
/// instead, interleaved RGB rows), then `pack_planar` upsamples and converts its `window`
/// into the windows buffer at word `dst` (`window` width by height RGBA words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodedJob {
    /// Index of the sample in the batch.
    pub sample: usize,
    /// `[x0, y0, x1, y1)` in the stored image.
    pub window: [u32; 4],
    /// The stored image's size.
    pub full: [u32; 2],
    /// First word of the window in the windows buffer.
    pub dst: u64,
    /// Byte offset of its header ([`HARDWARE_HEADER_WORDS`] words) in [`Buffer::Rgbi`].
    pub header: u64,
    /// Its region in [`Buffer::Rgbi`]: byte offset (a multiple of 256), and the bytes
    /// between rows (a multiple of 256, at least 3 * width) of interleaved RGB there.
    pub rgbi: (u64, u64),
    /// 1 (greyscale) or 3 (YCbCr).
    pub components: u32,
    /// The component planes (the first `components`).
    pub planes: [StoredPlane; 3],
}

impl EncodedJob {
    /// Bytes of its region in [`Buffer::Rgbi`]: room for the planes, or for the RGB rows.
    pub fn rgbi_bytes(&self) -> u64 {
        let rgb = self.rgbi.1 * u64::from(self.full[1]);
        let planes = self.planes[..self.components as usize]
            .iter()
            .map(|p| p.offset + p.pitch * u64::from(p.rows) + GUARD_BYTES)
            .max()
            .unwrap_or(0);
        rgb.max(planes)
    }

    /// The header `pack_planar` reads: the planes (`rgb == false`: the decoder wrote
    /// them), or interleaved RGB rows (`rgb == true`: the CPU decoded the image).
    pub fn header_words(&self, rgb: bool) -> [u32; HARDWARE_HEADER_WORDS] {
        let mut h = [0u32; HARDWARE_HEADER_WORDS];
        h[0] = u32::from(rgb);
        // KIND_GRAY or KIND_YCBCR (`coeffs::ColorKind` codes).
        h[1] = u32::from(self.components == 3);
        h[2] = self.components;
        h[3] = 16;
        h[4] = self.rgbi.1 as u32;
        for (c, p) in self.planes[..self.components as usize].iter().enumerate() {
            let r = 16 + 16 * c;
            // The `ComponentDesc` words `color` reads: a region at block (0, 0) of one
            // sample per "block", its plane offset and stride in words of the region.
            h[r + 6] = 1;
            h[r + 7] = (p.offset / 4) as u32;
            h[r + 8] = (p.pitch / 4) as u32;
            h[r + 9] = p.width;
            h[r + 10] = p.height;
            h[r + 11] = p.method;
            h[r + 12] = p.eh;
            h[r + 13] = p.ev;
        }
        h
    }
}

/// The stored planes of a JPEG of `full` pixels whose frame header gives the components'
/// sampling `factors`, laid out from offset 0 of a region: `None` unless 1 or 3
/// components. Their geometry is libjpeg's ([`sampled_geometry`] at scale 1); each
/// plane's region is padded to whole MCUs (`pitch` and `rows`), then [`GUARD_BYTES`].
pub(crate) fn stored_planes(
    full: [u32; 2],
    factors: &[(u8, u8)],
) -> Option<(u32, [StoredPlane; 3])> {
    use crate::decode::jpeg::coeffs::sampled_geometry;
    if !matches!(factors.len(), 1 | 3) {
        return None;
    }
    let max_h = factors.iter().map(|f| u32::from(f.0)).max()?;
    let max_v = factors.iter().map(|f| u32::from(f.1)).max()?;
    let mut planes = [StoredPlane::default(); 3];
    let mut at = 0u64;
    for (p, &(h, v)) in planes.iter_mut().zip(factors) {
        let g = sampled_geometry(
            (full[0], full[1]),
            (max_h, max_v),
            (u32::from(h), u32::from(v)),
            1,
        );
        // Whole MCUs of the interleaved scan: as many or more than a non-interleaved one.
        let mcu = |n: u32, max: u32, f: u8| n.div_ceil(8 * max) * 8 * u32::from(f);
        let rows = mcu(full[1], max_v, v).max(g.downsampled_height);
        let pitch =
            u64::from(mcu(full[0], max_h, h).max(g.downsampled_width)).next_multiple_of(256);
        *p = StoredPlane {
            offset: at,
            pitch,
            width: g.downsampled_width,
            height: g.downsampled_height,
            rows,
            method: g.method.code(),
            eh: g.eh,
            ev: g.ev,
        };
        at += (pitch * u64::from(rows) + GUARD_BYTES).next_multiple_of(256);
    }
    Some((factors.len() as u32, planes))
}

/// The host side of one batch, reused batch after batch (its allocations are kept).
#[derive(Debug)]
pub struct BatchPlan {
    limits: DeviceLimits,
    decode_in: DecodeInput,
    augment_in: AugmentInput,
    images: Vec<DeviceImage>,
    orient_jobs: Vec<OrientJob>,
    encoded: Vec<EncodedJob>,
    /// The sample of each image pushed into `decode_in`, in push order.
    pushed: Vec<usize>,
    /// Samples served from the device cache: (sample, byte offset in the cache, width,
    /// height), placed after the decoded windows.
    cached: Vec<(usize, u64, u32, u32)>,
    /// The copies into and out of [`Buffer::DecodedCache`], after the orientation steps.
    cache_copies: Vec<Step>,
    /// What the plans made so far come to.
    counts: PlanCounts,
    window_words: u64,
    steps: Vec<Step>,
    sizes: Sizes,
}

impl BatchPlan {
    /// An empty plan for a device with `limits`.
    pub fn new(limits: DeviceLimits) -> Self {
        BatchPlan {
            limits,
            decode_in: DecodeInput::new()
                .with_max_binding(limits.max_binding)
                .deferring(true),
            augment_in: AugmentInput::new(),
            images: Vec::new(),
            orient_jobs: Vec::new(),
            encoded: Vec::new(),
            pushed: Vec::new(),
            cached: Vec::new(),
            cache_copies: Vec::new(),
            counts: PlanCounts::default(),
            window_words: 0,
            steps: Vec::new(),
            sizes: Sizes::default(),
        }
    }

    /// Plans the decode and augmentation of `jobs` (slot `i` for job `i`; label planes
    /// into [`Buffer::Masks`] when `masks`).
    pub fn plan(&mut self, jobs: &[DeviceJob], masks: bool) -> Result<()> {
        self.plan_mixed(jobs, masks, None)
    }

    /// [`BatchPlan::plan`], then the batch's images mixed as `mix` says (MixUp or CutMix:
    /// `super::mix`) where it is given.
    pub fn plan_mixed(
        &mut self,
        jobs: &[DeviceJob],
        masks: bool,
        mix: Option<&BatchMix>,
    ) -> Result<()> {
        self.pack_decode(jobs.iter().map(|j| &j.image))?;
        self.plan_cache_fills(jobs)?;
        for (j, img) in jobs.iter().zip(&self.images) {
            self.augment_in.push(&j.plan, *img, j.mask.as_ref())?;
        }
        self.finish(masks, mix)
    }

    /// Plans the decode of `images` alone (the windows stay in [`Buffer::Windows`]).
    pub fn plan_decode<'a>(
        &mut self,
        images: impl Iterator<Item = &'a DeviceSample>,
    ) -> Result<()> {
        self.pack_decode(images)?;
        self.finish(false, None)
    }

    /// The samples whose intervals the device flagged, with the OR of their status words,
    /// from the [`Buffer::EntropyStatus`] bytes read back at [`Step::EntropyCheck`]
    /// (little-endian words; at least [`Sizes::entropy_status`] of them). A sample listed
    /// must take the host path ([`DeviceError::EntropyFlagged`]).
    pub fn flagged(&self, status: &[u8]) -> Vec<(usize, u32)> {
        let bytes = |i: u64| status.get(4 * i as usize..)?.first_chunk().copied();
        self.decode_in
            .entropy_images()
            .iter()
            .filter_map(|e| {
                // A status buffer shorter than planned flags everything in it.
                let s = (e.status.start..e.status.end)
                    .try_fold(0, |a, i| Some(a | u32::from_le_bytes(bytes(i)?)))
                    .unwrap_or(u32::MAX);
                let sample = *self.pushed.get(e.pushed)?;
                (s != 0).then_some((sample, s))
            })
            .collect()
    }

    /// What the plans made so far come to.
    pub fn counts(&self) -> PlanCounts {
        self.counts
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The buffer sizes the steps need.
    pub fn sizes(&self) -> Sizes {
        self.sizes
    }

    /// The decoded (and upright) window of each sample, in order.
    pub fn images(&self) -> &[DeviceImage] {
        &self.images
    }

    /// The samples for the hardware decoder ([`Step::Hardware`]).
    pub fn encoded(&self) -> &[EncodedJob] {
        &self.encoded
    }

    /// Samples planned.
    pub fn len(&self) -> usize {
        self.images.len()
    }

    /// Whether nothing is planned.
    pub fn is_empty(&self) -> bool {
        self.images.is_empty()
    }

    /// Writes the upload into `dst` ([`Sizes::upload`] bytes at least), `sample(k)` being
    /// sample `k` of the plan, as planned. The payloads the workers packed are copied once,
    /// straight from the samples into `dst` ([`PlanCounts::payload_bytes`]); the blob around
    /// them holds the records and tables. Where the batch holds enough bytes, `dst` is cut
    /// into up to `UPLOAD_THREADS` ranges written at once, one thread each.
    pub fn write_upload<'a, T: UploadTarget>(
        &self,
        dst: &mut T,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<()> {
        let len = dst.len();
        let upload = self.sizes.upload as usize;
        let short = || DeviceError::Staging {
            len,
            upload: upload as u64,
        };
        if len < upload {
            return Err(short().into());
        }
        let mut parts: Vec<(usize, &[u8])> =
            Vec::with_capacity(2 * self.decode_in.holes().len() + 2);
        for segment in self.decode_in.segments() {
            parts.push(match segment {
                Segment::Blob { at, words } => (at * 4, bytemuck::cast_slice(words)),
                Segment::Payload(h) => (h.at * 4, self.payload(h, sample)?),
            });
        }
        parts.push((self.sizes.augment_offset as usize, self.augment_in.bytes()));
        let mut end = 0;
        for &(at, bytes) in &parts {
            if at < end || at + bytes.len() > upload {
                return Err(short().into());
            }
            end = at + bytes.len();
        }
        if upload == 0 {
            return Ok(());
        }
        // Ranges on 8-byte boundaries (what a mapped range of a wgpu buffer starts on).
        let threads = spread_threads(upload);
        let mut bounds: Vec<usize> = (0..threads).map(|i| (upload * i / threads) & !7).collect();
        bounds.push(upload);
        bounds.dedup();
        let mut pieces = dst.parts(&bounds)?;
        let ranges: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
        if pieces.len() != ranges.len() {
            return Err(crate::Error::internal(
                "an upload target gave other ranges than asked",
            ));
        }
        if pieces.len() == 1 {
            write_range(&mut pieces[0], ranges[0], &parts);
            return Ok(());
        }
        let parts = &parts;
        std::thread::scope(|scope| {
            let mut work = pieces.iter_mut().zip(&ranges);
            // The calling thread writes the first range itself.
            let first = work.next();
            for (piece, &range) in work {
                scope.spawn(move || write_range(piece, range, parts));
            }
            if let Some((piece, &range)) = first {
                write_range(piece, range, parts);
            }
        });
        Ok(())
    }

    /// Notes sample `k`, decoded into `g`, as pushed; one with an EXIF `orientation` gets
    /// an orientation job (placed after every decoded window, once their total is known).
    fn pushed_image(&mut self, k: usize, g: DeviceImage, orientation: u8) -> DeviceImage {
        self.pushed.push(k);
        if orientation != 1 {
            self.orient_jobs.push(OrientJob {
                src: g,
                orientation,
                dst: k as u64,
            });
        }
        g
    }

    /// The data of the sample pushed as `h.push`, which `h` leaves out of the blob.
    fn payload<'a>(
        &self,
        h: Hole,
        sample: &dyn Fn(usize) -> Option<&'a DeviceSample>,
    ) -> Result<&'a [u8]> {
        let k = self.pushed.get(h.push).copied();
        let words: Option<&'a [u32]> = match k.and_then(sample) {
            Some(DeviceSample::Packed { packed, .. }) => Some(&packed.data),
            Some(DeviceSample::Entropy { packed, .. }) => Some(&packed.packed.data),
            _ => None,
        };
        match words {
            Some(w) if w.len() == h.words => Ok(bytemuck::cast_slice(w)),
            _ => Err(crate::Error::internal(format!(
                "the upload was written from other samples than planned (push {}, sample {k:?})",
                h.push
            ))),
        }
    }

    /// The decoded windows, read back from the windows buffer's bytes, as host images.
    pub fn windows_to_host(&self, windows: &[u8]) -> Result<Vec<Image8>> {
        self.images
            .iter()
            .enumerate()
            .map(|(sample, g)| {
                let start = g.offset as usize * 4;
                let n = g.width as usize * g.height as usize;
                let px = windows
                    .get(start..start + 4 * n)
                    .ok_or(DeviceError::Outside {
                        sample,
                        buffer: Buffer::Windows,
                        start: start as u64,
                        end: (start + 4 * n) as u64,
                        len: windows.len() as u64,
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

    /// Packs the decode inputs of `images`; places the upright windows of rotated ones
    /// after every decoded window.
    fn pack_decode<'a>(&mut self, images: impl Iterator<Item = &'a DeviceSample>) -> Result<()> {
        self.decode_in.clear();
        self.augment_in.clear();
        self.images.clear();
        self.orient_jobs.clear();
        self.encoded.clear();
        self.steps.clear();
        self.pushed.clear();
        self.cached.clear();
        self.cache_copies.clear();
        let images: Vec<&DeviceSample> = images.collect();
        self.images.resize(images.len(), DeviceImage::default());
        // Images on the device entropy path first: their chunks come together, their
        // huffman launches before every other decode launch.
        for (k, img) in images.iter().enumerate() {
            if let DeviceSample::Entropy {
                packed,
                orientation,
                ..
            } = img
            {
                let g = self.decode_in.push_entropy(packed)?;
                self.images[k] = self.pushed_image(k, g, *orientation);
            }
        }
        let mut upright = Vec::new();
        for (k, img) in images.into_iter().enumerate() {
            let g = match img {
                DeviceSample::Entropy { .. } => continue,
                DeviceSample::Jpeg {
                    coeffs,
                    scale,
                    window,
                    orientation,
                } => {
                    let g = self.decode_in.push_jpeg(coeffs, *scale, *window)?;
                    self.pushed_image(k, g, *orientation)
                }
                DeviceSample::Packed {
                    packed,
                    orientation,
                } => {
                    let g = self.decode_in.push_packed(packed)?;
                    self.pushed_image(k, g, *orientation)
                }
                DeviceSample::Rgb(img) => {
                    self.pushed.push(k);
                    self.decode_in.push_rgb(img)?
                }
                DeviceSample::Shared(img) => {
                    self.pushed.push(k);
                    self.decode_in.push_rgb(img.image())?
                }
                DeviceSample::Encoded {
                    bytes,
                    window,
                    full,
                    orientation,
                } => {
                    let (components, planes) =
                        crate::decode::jpeg::markers::sampling_factors(bytes)
                            .and_then(|f| stored_planes(*full, &f))
                            .ok_or(DeviceError::NotPlanar(k))?;
                    // Placed after the decoded windows, once their total is known.
                    self.encoded.push(EncodedJob {
                        sample: k,
                        window: *window,
                        full: *full,
                        dst: 0,
                        header: 0,
                        rgbi: (0, 0),
                        components,
                        planes,
                    });
                    upright.push(*orientation);
                    DeviceImage::default()
                }
                DeviceSample::Cached {
                    offset,
                    width,
                    height,
                } => {
                    // Placed after the decoded windows, once their total is known.
                    self.cached.push((k, *offset, *width, *height));
                    DeviceImage::default()
                }
            };
            self.images[k] = g;
        }
        self.decode_in.finish();
        let mut next = self.decode_in.window_words();
        // The headers first, then each image's region.
        let header_bytes = 4 * HARDWARE_HEADER_WORDS as u64;
        let mut rgbi = header_bytes * self.encoded.len() as u64;
        for (k, (job, &orientation)) in self.encoded.iter_mut().zip(&upright).enumerate() {
            let pitch = (3 * u64::from(job.full[0])).next_multiple_of(256);
            job.header = header_bytes * k as u64;
            job.rgbi = (rgbi, pitch);
            rgbi += job.rgbi_bytes().next_multiple_of(256);
            let [x0, y0, x1, y1] = job.window;
            let (w, h) = (x1.saturating_sub(x0), y1.saturating_sub(y0));
            if w == 0 || h == 0 || x1 > job.full[0] || y1 > job.full[1] {
                return Err(DeviceError::Window {
                    sample: job.sample,
                    window: job.window,
                    width: job.full[0],
                    height: job.full[1],
                }
                .into());
            }
            next = next.next_multiple_of(64);
            job.dst = next;
            let offset = u32::try_from(next).map_err(|_| DeviceError::TooLarge {
                what: "a decoded window's offset in words",
                value: next,
                max: u32::MAX.into(),
            })?;
            let g = DeviceImage {
                offset,
                width: w,
                height: h,
                origin_x: x0,
                origin_y: y0,
                full_width: job.full[0],
                full_height: job.full[1],
                scale: 1,
            };
            if let Some(slot) = self.images.get_mut(job.sample) {
                *slot = g;
            }
            if orientation != 1 {
                self.orient_jobs.push(OrientJob {
                    src: g,
                    orientation,
                    dst: job.sample as u64,
                });
            }
            next += u64::from(w) * u64::from(h);
        }
        next = self.place_cached(next)?;
        next = self.place_oriented(next)?;
        self.window_words = next;
        Ok(())
    }

    /// Places the upright windows of the rotated images from word `next` of the windows
    /// buffer on; returns the word after the last.
    fn place_oriented(&mut self, mut next: u64) -> Result<u64> {
        for job in &mut self.orient_jobs {
            let slot = job.dst as usize;
            let (ow, oh) = job.size();
            job.dst = next;
            let end = next + u64::from(ow) * u64::from(oh);
            let offset = window_offset(next, end, "the end of an oriented window, in words")?;
            if let Some(g) = self.images.get_mut(slot) {
                let (origin, full) = upright_origin(g, job.orientation);
                *g = DeviceImage {
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
            next = end;
        }
        Ok(next)
    }

    /// Plans the steps and sizes of what was packed.
    fn finish(&mut self, masks: bool, mix: Option<&BatchMix>) -> Result<()> {
        let DeviceLimits {
            max_binding,
            per_dim,
        } = self.limits;
        let windows = round4(self.window_words * 4);
        let (entropy, decode) = self.decode_in.planned(max_binding, per_dim)?;
        let (pack, rgbi) = self.pack_launches(max_binding, per_dim)?;
        // The orientation job table goes with the decode input, after its chunks.
        let table_at = self.decode_in.table_offset();
        let orient = orient::launches(&self.orient_jobs, windows, table_at, max_binding, per_dim)?;
        if !orient.table.is_empty() && self.decode_in.append_table(&orient.table) != table_at {
            return Err(crate::Error::internal(
                "the orientation job table moved in the decode input",
            ));
        }
        let (augment, scratch) = self
            .augment_in
            .launches(windows, masks, max_binding, per_dim)?;
        self.steps.clear();
        if !entropy.is_empty() {
            self.steps.extend(entropy.into_iter().map(Step::Launch));
            self.steps.push(Step::EntropyCheck {
                status: Binding {
                    buffer: Buffer::EntropyStatus,
                    offset: 0,
                    size: round4(self.decode_in.status_words() * 4),
                },
            });
        }
        self.steps.extend(decode.into_iter().map(Step::Launch));
        if !self.encoded.is_empty() {
            self.steps.push(Step::Hardware);
            self.steps.extend(pack.into_iter().map(Step::Launch));
        }
        self.steps.extend(orient.steps);
        let mut decoded_cache = 0;
        for step in &self.cache_copies {
            if let Step::Copy { src, dst } = step {
                for b in [src, dst] {
                    if b.buffer == Buffer::DecodedCache {
                        decoded_cache = u64::max(decoded_cache, b.offset + b.size);
                    }
                }
            }
        }
        self.steps.append(&mut self.cache_copies);
        self.steps.extend(augment.into_iter().map(Step::Launch));
        let mut mix_scratch = 0;
        if let (Some(m), Some(shape)) = (mix, self.augment_in.mix_shape()) {
            let steps = mix::steps(m, shape, max_binding, per_dim)?;
            if !steps.is_empty() {
                mix_scratch = shape.bytes();
            }
            self.steps.extend(steps);
        }
        let decode_input = round4(self.decode_in.upload_bytes());
        let augment_offset = decode_input.div_ceil(256) * 256;
        let augment_input = round4(self.augment_in.bytes().len() as u64);
        self.sizes = Sizes {
            upload: augment_offset + augment_input,
            decode_input,
            augment_offset,
            augment_input,
            planes: round4(self.decode_in.plane_words() * 4),
            windows,
            oriented: round4(orient.oriented),
            horizontal: round4(scratch.horizontal),
            resized: round4(scratch.resized),
            images: self.augment_in.images_bytes(),
            masks: if masks {
                self.augment_in.masks_bytes()
            } else {
                0
            },
            rgbi,
            coefficients: if self.decode_in.coefficient_words() > 0 {
                round4(self.decode_in.coefficient_words() * 4)
            } else {
                0
            },
            entropy_status: if self.decode_in.status_words() > 0 {
                round4(self.decode_in.status_words() * 4)
            } else {
                0
            },
            decoded_cache,
            mix_scratch,
            sync_records: 4 * self.decode_in.sync_record_words(),
        };
        let c = &mut self.counts;
        c.batches += 1;
        c.samples += self.images.len() as u64;
        c.upload_bytes += self.sizes.decode_input + self.sizes.augment_input;
        c.decode_input_bytes += self.sizes.decode_input;
        c.payload_bytes += self
            .decode_in
            .holes()
            .iter()
            .map(|h| 4 * h.words as u64)
            .sum::<u64>();
        for step in &self.steps {
            match step {
                Step::Launch(_) => c.launches += 1,
                Step::Copy { .. } => c.copies += 1,
                Step::EntropyCheck { .. } => c.entropy_checks += 1,
                Step::Hardware => {}
            }
        }
        Ok(())
    }

    /// Places the windows of the samples served from the device cache from word `next`
    /// on (each on a 64-word boundary) and plans their copies out of
    /// [`Buffer::DecodedCache`]; returns the first word after them.
    fn place_cached(&mut self, mut next: u64) -> Result<u64> {
        for &(sample, offset, width, height) in &self.cached {
            let bytes = 4 * u64::from(width) * u64::from(height);
            if bytes == 0 || offset % 256 != 0 {
                return Err(DeviceError::CacheEntry {
                    sample,
                    offset,
                    width,
                    height,
                }
                .into());
            }
            next = next.next_multiple_of(64);
            let end = next + bytes / 4;
            let at = window_offset(next, end, "the end of a cached window, in words")?;
            if let Some(g) = self.images.get_mut(sample) {
                *g = DeviceImage {
                    offset: at,
                    width,
                    height,
                    origin_x: 0,
                    origin_y: 0,
                    full_width: width,
                    full_height: height,
                    scale: 1,
                };
            }
            self.cache_copies.push(Step::Copy {
                src: Binding {
                    buffer: Buffer::DecodedCache,
                    offset,
                    size: bytes,
                },
                dst: Binding {
                    buffer: Buffer::Windows,
                    offset: next * 4,
                    size: bytes,
                },
            });
            next = end;
        }
        Ok(next)
    }

    /// Plans the copies of the images decoded whole in this batch into their places in
    /// [`Buffer::DecodedCache`] ([`DeviceJob::cache_to`]), after they are decoded and
    /// turned upright. An image that is not whole, or not of its slot's size, is refused.
    fn plan_cache_fills(&mut self, jobs: &[DeviceJob]) -> Result<()> {
        for (sample, (job, g)) in jobs.iter().zip(&self.images).enumerate() {
            let Some(slot) = job.cache_to else {
                continue;
            };
            let whole = g.origin_x == 0
                && g.origin_y == 0
                && g.scale == 1
                && (g.width, g.height) == (slot.width, slot.height)
                && (g.full_width, g.full_height) == (slot.width, slot.height);
            if !whole || slot.bytes() == 0 || slot.offset % 256 != 0 {
                return Err(DeviceError::CacheEntry {
                    sample,
                    offset: slot.offset,
                    width: g.width,
                    height: g.height,
                }
                .into());
            }
            self.cache_copies.push(Step::Copy {
                src: Binding {
                    buffer: Buffer::Windows,
                    offset: u64::from(g.offset) * 4,
                    size: slot.bytes(),
                },
                dst: Binding {
                    buffer: Buffer::DecodedCache,
                    offset: slot.offset,
                    size: slot.bytes(),
                },
            });
        }
        Ok(())
    }

    /// The `pack_planar` launches that convert each hardware-decoded window into place,
    /// and the bytes [`Buffer::Rgbi`] needs.
    fn pack_launches(&self, max_binding: u64, per_dim: u64) -> Result<(Vec<Launch>, u64)> {
        let mut out = Vec::with_capacity(self.encoded.len());
        let mut end = 0;
        for j in &self.encoded {
            let [x0, y0, x1, y1] = j.window;
            let (w, h) = (x1 - x0, y1 - y0);
            let px = u64::from(w) * u64::from(h);
            let header = Binding {
                buffer: Buffer::Rgbi,
                offset: j.header,
                size: 4 * HARDWARE_HEADER_WORDS as u64,
            };
            let src = Binding {
                buffer: Buffer::Rgbi,
                offset: j.rgbi.0,
                size: round4(j.rgbi_bytes()),
            };
            let dst = Binding {
                buffer: Buffer::Windows,
                offset: j.dst * 4,
                size: px * 4,
            };
            let wg = Kernel::PackPlanar.workgroup();
            let g = grid(px, wg, per_dim).filter(|_| src.size.max(dst.size) <= max_binding);
            let Some(g) = g else {
                return Err(DeviceError::HardwareImage {
                    width: j.full[0],
                    height: j.full[1],
                }
                .into());
            };
            // The header's pitch and plane words are u32.
            if j.rgbi_bytes() > u64::from(u32::MAX) {
                return Err(DeviceError::TooLarge {
                    what: "a hardware-decoded image's bytes",
                    value: j.rgbi_bytes(),
                    max: u32::MAX.into(),
                }
                .into());
            }
            let mut params = [0u32; PARAM_WORDS];
            params[..5].copy_from_slice(&[x0, y0, w, h, g[0] * wg]);
            out.push(Launch {
                kernel: Kernel::PackPlanar,
                grid: g,
                bindings: vec![header, src, dst],
                params,
            });
            end = end.max(j.rgbi.0 + src.size);
        }
        Ok((out, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::device::job::CoeffPool;
    use crate::backend::device::upload::SPREAD_BYTES;
    use crate::decode::jpeg::coeffs::{zero_coefficients, Coefficients, Upsample};
    use crate::Augment;

    #[test]
    fn rotated_samples_take_one_orient_launch_and_one_copy_per_batch() {
        // 64 samples, 16 of them rotated (every orientation 2-8 among them).
        let aug = Augment::new().resize(16, 16);
        let jobs: Vec<DeviceJob> = (0..64u32)
            .map(|k| {
                let orientation = if k % 4 == 0 { 2 + (k / 4 % 7) as u8 } else { 1 };
                let (w, h) = (24 + k % 5, 16 + k % 3);
                let (uw, uh) = if orientation >= 5 { (h, w) } else { (w, h) };
                DeviceJob {
                    plan: aug.plan(7, 0, u64::from(k), uw, uh),
                    image: DeviceSample::Jpeg {
                        coeffs: zero_coefficients(w, h, &[(1, 1)]),
                        scale: 1,
                        window: [0, 0, w, h],
                        orientation,
                    },
                    mask: None,
                    cache_to: None,
                }
            })
            .collect();
        let orient_steps = |plan: &BatchPlan| {
            let launches: Vec<Launch> = plan
                .steps()
                .iter()
                .filter_map(|s| match s {
                    Step::Launch(l) if l.kernel == Kernel::Orient => Some(l.clone()),
                    _ => None,
                })
                .collect();
            let copies = plan
                .steps()
                .iter()
                .filter(|s| matches!(s, Step::Copy { .. }))
                .count();
            (launches, copies)
        };
        let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
        plan.plan(&jobs, false).expect("plan");
        let (launches, copies) = orient_steps(&plan);
        assert_eq!((launches.len(), copies), (1, 1));
        // The job table sits in the decode input, after the decode chunks.
        let table = launches[0].bindings[1];
        assert_eq!(table.buffer, Buffer::DecodeInput);
        assert_eq!(table.size, 16 * 32);
        assert!(table.offset + table.size <= plan.sizes().decode_input);
        let decode_end = plan
            .steps()
            .iter()
            .filter_map(|s| match s {
                Step::Launch(l) if l.kernel != Kernel::Orient => Some(l),
                _ => None,
            })
            .flat_map(|l| &l.bindings)
            .filter(|b| b.buffer == Buffer::DecodeInput)
            .map(|b| b.offset + b.size)
            .max()
            .expect("decode launches");
        assert!(decode_end <= table.offset);
        // The whole batch: one decode chunk (idct, color), the orientation pass, the
        // augment passes (horizontal, vertical_jitter, write_image); one copy. (A launch
        // and a copy per rotated sample would make it 21 launches and 16 copies.)
        let c = plan.counts();
        assert_eq!((c.launches, c.copies), (6, 1));
        // A decode-only plan of the same samples, and of one rotated sample alone.
        plan.plan_decode(jobs.iter().map(|j| &j.image))
            .expect("plan");
        let (launches, copies) = orient_steps(&plan);
        assert_eq!((launches.len(), copies), (1, 1));
        let c = plan.counts();
        assert_eq!((c.batches, c.launches, c.copies), (2, 6 + 3, 1 + 1));
        plan.plan_decode(jobs[..1].iter().map(|j| &j.image))
            .expect("plan");
        let (launches, copies) = orient_steps(&plan);
        assert_eq!((launches.len(), copies), (1, 1));
        // Small limits split the pass, still copying back once.
        let mut plan = BatchPlan::new(DeviceLimits {
            max_binding: 64 << 10,
            per_dim: 16,
        });
        plan.plan_decode(jobs.iter().map(|j| &j.image))
            .expect("plan");
        let (launches, copies) = orient_steps(&plan);
        assert!(launches.len() > 1, "{}", launches.len());
        assert_eq!(copies, 1);
    }

    /// Coefficients of a `w x h` image with every coefficient set from a counter-based
    /// hash of (`seed`, block, position): no two payloads alike, none zero throughout.
    fn busy_coefficients(w: u32, h: u32, samp: &[(u32, u32)], seed: u64) -> Box<Coefficients> {
        let mut c = zero_coefficients(w, h, samp);
        for (ci, comp) in c.components.iter_mut().enumerate() {
            for (b, block) in comp.blocks.iter_mut().enumerate() {
                for (k, v) in block.iter_mut().enumerate() {
                    let x =
                        crate::rng::mix64(seed ^ ((ci as u64) << 56 | (b as u64) << 6 | k as u64));
                    *v = (x % 2001) as i16 - 1000;
                }
            }
        }
        c
    }

    #[test]
    fn packed_samples_are_copied_once_into_the_upload_as_the_planner_packs_them() {
        // Greyscale, 4:2:0 and 4:4:4 at every scale, some rotated, some windows: the
        // samples the workers packed upload byte for byte as those the planner packs,
        // their payloads written straight from the samples (several per chunk, side by
        // side), in a batch large enough (8 MiB of payload) to be spread over threads.
        let aug = Augment::new().resize(16, 16);
        let samplings: [&[(u32, u32)]; 3] = [&[(1, 1)], &[(2, 2), (1, 1), (1, 1)], &[(1, 1); 3]];
        let jobs = |packed: bool| -> Vec<DeviceJob> {
            let pool = CoeffPool::default();
            (0..24u32)
                .map(|k| {
                    let (w, h) = (200 + 37 * k, 300 + 11 * (k % 7));
                    let scale = [1, 2, 4, 8][k as usize % 4];
                    let orientation = if k % 5 == 0 { 6 } else { 1 };
                    let window = if k % 3 == 0 {
                        [8, 16, 100.min(w / scale), 120.min(h / scale)]
                    } else {
                        [0, 0, w / scale, h / scale]
                    };
                    let image = DeviceSample::Jpeg {
                        coeffs: busy_coefficients(w, h, samplings[k as usize % 3], k.into()),
                        scale,
                        window,
                        orientation,
                    };
                    let image = if packed {
                        image.packed(&pool).expect("packs")
                    } else {
                        image
                    };
                    DeviceJob {
                        plan: aug.plan(7, 0, u64::from(k), 64, 64),
                        image,
                        mask: None,
                        cache_to: None,
                    }
                })
                .collect()
        };
        let upload = |jobs: &[DeviceJob]| {
            let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
            plan.plan(jobs, false).expect("plan");
            let mut bytes = vec![0xA5u8; plan.sizes().upload as usize];
            plan.write_upload(&mut bytes.as_mut_slice(), &|k| {
                jobs.get(k).map(|j| &j.image)
            })
            .expect("upload");
            (bytes, plan.counts(), plan.sizes(), plan.steps().to_vec())
        };
        let (by_planner, c0, sizes0, steps0) = upload(&jobs(false));
        let packed = jobs(true);
        assert!(packed
            .iter()
            .all(|j| matches!(j.image, DeviceSample::Packed { .. })));
        let (by_workers, c1, sizes1, steps1) = upload(&packed);
        assert_eq!((sizes0, &steps0), (sizes1, &steps1));
        assert!(by_planner == by_workers, "the uploads differ");
        let payload: u64 = packed
            .iter()
            .map(|j| match &j.image {
                DeviceSample::Packed { packed, .. } => 4 * packed.data.len() as u64,
                _ => 0,
            })
            .sum();
        assert_eq!(c0.payload_bytes, 0);
        assert_eq!(c1.payload_bytes, payload);
        assert!(payload > 2 * SPREAD_BYTES as u64, "{payload}");
        assert_eq!(c0.upload_bytes, c1.upload_bytes);
        // Planned from other samples than it is written from: refused, not garbage.
        let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
        plan.plan(&packed, false).expect("plan");
        let mut bytes = vec![0u8; plan.sizes().upload as usize];
        let swapped = |k: usize| packed.get(k ^ 1).map(|j| &j.image);
        assert!(plan
            .write_upload(&mut bytes.as_mut_slice(), &swapped)
            .is_err());
        // And into too small a buffer.
        let mut small = vec![0u8; plan.sizes().upload as usize - 1];
        assert!(plan
            .write_upload(&mut small.as_mut_slice(), &|k| packed
                .get(k)
                .map(|j| &j.image))
            .is_err());
    }

    #[test]
    fn stored_planes_follow_libjpeg_geometry() {
        // 4:2:0 of an odd size: chroma is ceil(w / 2) x ceil(h / 2), fancy upsampled.
        let (n, p) = stored_planes([101, 77], &[(2, 2), (1, 1), (1, 1)]).expect("planes");
        assert_eq!(n, 3);
        assert_eq!((p[0].width, p[0].height, p[0].pitch), (101, 77, 256));
        assert_eq!(p[0].method, Upsample::Full.code());
        for c in &p[1..] {
            assert_eq!((c.width, c.height), (51, 39));
            assert_eq!(c.method, Upsample::H2V2Fancy.code());
            assert_eq!((c.eh, c.ev), (2, 2));
        }
        // Each region is padded to whole 16x16 MCUs (77 rows: 5 MCU rows, 80 luma rows,
        // 40 chroma rows), then the guard bytes.
        assert_eq!((p[0].rows, p[1].rows, p[2].rows), (80, 40, 40));
        assert_eq!(p[1].offset, 256 * 80 + GUARD_BYTES);
        assert!(p.iter().all(|c| c.offset % 256 == 0 && c.pitch % 256 == 0));
        assert!(p[2].offset >= p[1].offset + p[1].pitch * 40 + GUARD_BYTES);
        // 4:2:2 and greyscale.
        let (_, p) = stored_planes([64, 8], &[(2, 1), (1, 1), (1, 1)]).expect("planes");
        assert_eq!((p[1].width, p[1].height), (32, 8));
        assert_eq!(p[1].method, Upsample::H2V1Fancy.code());
        let (n, p) = stored_planes([9, 9], &[(1, 1)]).expect("planes");
        assert_eq!((n, p[0].width, p[0].height, p[0].rows), (1, 9, 9, 16));
        // Two components (or four) are not for the hardware decoder.
        assert!(stored_planes([8, 8], &[(1, 1), (1, 1)]).is_none());
    }

    #[test]
    fn a_job_header_says_planes_or_rgb_rows() {
        let (components, planes) =
            stored_planes([40, 30], &[(2, 2), (1, 1), (1, 1)]).expect("planes");
        let job = EncodedJob {
            sample: 0,
            window: [0, 0, 40, 30],
            full: [40, 30],
            dst: 0,
            header: 0,
            rgbi: (1024, 256),
            components,
            planes,
        };
        // The region holds the RGB rows (256 x 30 bytes) or the planes, whichever is
        // larger: here the planes, Y (two MCU rows: 32 rows) and then Cb and Cr at half
        // size (16 rows), each followed by its guard bytes.
        assert_eq!(job.rgbi_bytes(), 256 * 32 + 2 * 256 * 16 + 3 * GUARD_BYTES);
        let h = job.header_words(false);
        assert_eq!(&h[..5], &[0, 1, 3, 16, 256]);
        // Component 1 (Cb): its plane offset and stride in words, sizes, method.
        let r = 16 + 16;
        assert_eq!(h[r + 7], (planes[1].offset / 4) as u32);
        assert_eq!(h[r + 8], 64);
        assert_eq!((h[r + 9], h[r + 10]), (20, 15));
        assert_eq!(h[r + 11], Upsample::H2V2Fancy.code());
        assert_eq!(job.header_words(true)[0], 1);
    }

    /// The decode input uploads of each block only the coefficients its component's IDCT
    /// reads: 32 words at 1/1, down to the DC alone (1 word) for luma at 1/8.
    #[test]
    fn coefficient_uploads_shrink_with_the_idct_scale() {
        // 256x256 gray (32x32 blocks) and 256x256 4:2:0 (32x32 luma blocks, 16x16 of
        // each chroma), whole, in one batch.
        let gray = zero_coefficients(256, 256, &[(1, 1)]);
        let ycc = zero_coefficients(256, 256, &[(2, 2), (1, 1), (1, 1)]);
        // Words of a block in the layout of each DCT output size.
        let words = |size: u32| match size {
            8 => 32,
            4 => 25,
            2 => 13,
            _ => 1,
        };
        // The chunk's header and record tables: 64 + 64 * 16 + 256 * 16 words.
        let tables = 5184;
        let mut got = Vec::new();
        for (scale, luma, chroma) in [(1, 8, 8), (2, 4, 8), (4, 2, 4), (8, 1, 2)] {
            let samples: Vec<DeviceSample> = [&gray, &ycc]
                .into_iter()
                .map(|c| DeviceSample::Jpeg {
                    coeffs: c.clone(),
                    scale,
                    window: [0, 0, 256 / scale, 256 / scale],
                    orientation: 1,
                })
                .collect();
            let mut plan = BatchPlan::new(DeviceLimits::UNBOUNDED);
            plan.plan_decode(samples.iter()).expect("plan");
            let counts = plan.counts();
            // Four quantisation tables of 32 words, 2048 luma blocks, 512 chroma blocks.
            let want = 4 * (tables + 4 * 32 + 2048 * words(luma) + 512 * words(chroma));
            assert_eq!(counts.decode_input_bytes, want, "1/{scale}");
            // The rest of the upload is the augment input's.
            assert_eq!(
                counts.upload_bytes - want,
                plan.sizes().augment_input,
                "1/{scale}"
            );
            got.push(counts.decode_input_bytes);
        }
        // 341 KiB at 1/1, 285 KiB at 1/2, 175 KiB at 1/4, 55 KiB at 1/8 (a block at 32
        // words whatever the scale would be 341 KiB each time).
        assert_eq!(got, [348_928, 291_584, 178_944, 56_064]);
    }
}
