//! The fused augmentation pass of the GPU backends (`shaders/augment.wgsl`,
//! `kernels/augment.cu`): decoded windows in, batch slots out, pixel for pixel what [`crate::augment::reference`] makes
//! (resize exactly, jitter and normalisation within one 0-255 level).
//!
//! The host side is two pieces. [`AugmentInput`] collects a batch's plans and computes on
//! the host what the CPU path computes in f64 (the resize coefficient tables, Pillow's
//! nearest tables for label planes), into one blob to upload. [`AugmentInput::launches`]
//! plans the passes over it.
//!
//! # The upload blob ([`AugmentInput::bytes`]), in little-endian u32 words
//!
//! | words | what |
//! | --- | --- |
//! | 0..16 | header: sample count, output width, height, dtype, layout, image bytes, word offsets of the descriptors, plans and data section, 7 zero words |
//! | 16.. | `capacity` descriptors of 20 words (see below) |
//! | then | `capacity` [`SamplePlan`]s, 64 words each, as they are (the valid and erased rects clamped) |
//! | then | the data section: per sample, contiguous, in sample order: x bounds (`(first window column, taps)` per output column), x weights (`kx` per output column, i32 with 22 fractional bits, zero past a column's taps), y bounds (`(first row of the horizontal result, taps)` per output row), y weights, with a Gaussian blur its kernel sizes and integer weights (`kx, ky`, then `kx` and `ky` weights), and with a mask: the nearest source column per output column, the source row per output row, then the label plane, two u16 per word, low half first |
//!
//! A descriptor is: window offset (word in the windows buffer), window width, window height,
//! first window row and row count the horizontal pass reads, first horizontal item (prefix
//! sum of `rows * out_width`), then data-relative word offsets of x bounds, x weights, `kx`,
//! y bounds, y weights, `ky`, mask pixels, mask width (0: no mask), mask height, nearest
//! tables, the blur's weights (0: no blur), 3 zero words. `capacity` grows by doubling and is kept across [`AugmentInput::clear`], so the
//! blob layout is stable from batch to batch.
//!
//! # Passes ([`AugmentInput::launches`])
//!
//! 1. `horizontal`: one invocation per `(sample, window row read, output column)`, all
//!    samples of a group flattened (a binary search finds the sample), 256 per workgroup,
//!    a 2D grid of workgroups. Writes u8 RGB, one word per pixel, to a scratch buffer.
//! 2. `vertical_jitter`, spread over the whole GPU: phase 0 runs one invocation per
//!    output pixel (`ceil(pixels / 256)` workgroups per sample, each within one sample,
//!    a 2D grid): the vertical resize and the colour ops before the plan's first
//!    whole-image op ([`reference::needs_whole_image`]: contrast, auto-contrast,
//!    equalize, sharpness, blur), one word per output pixel into a second scratch buffer
//!    holding the whole batch. Then per whole-image op `r` (a round; a plan may hold
//!    several), over the same grid: phase 1 gathers what the op needs after the group's
//!    horizontal items in the horizontal scratch buffer, `STATS_WORDS` (768) per sample for
//!    a statistic that the sample's first workgroup computes (contrast's mean from an
//!    exact integer sum with a carry word, the channels' extremes, equalize's tables from
//!    three histograms in workgroup atomics), then, when the group has a neighbourhood
//!    op, `TEMP_WORDS` (3) per pixel of each sample that every invocation fills (sharpness:
//!    its pixel; blur: its horizontal sums); phase 2 (one invocation per pixel) applies
//!    the op from there and runs the per-pixel ops up to the next round.
//! 3. `write_image`: one invocation per u32 word of the batch output (2D grid): flips,
//!    normalise, layout and dtype (u8 four per word, f16 rounded to nearest even, f32).
//!    A word may hold elements of two samples; every word is written by one invocation.
//! 4. `write_mask` (when a mask output is given): one invocation per word of two u16
//!    labels: nearest through the host tables, flips; samples without a mask get 0.
//!
//! No binding is larger than the device's `max_storage_buffer_binding_size`: samples are
//! processed in groups whose windows, tables and intermediates fit, and the outputs in
//! chunks of words, each with its own bind group and parameter record.
#![doc(hidden)]

use super::error::DeviceError;
use super::launch::{Binding, Buffer, Kernel, Launch, PARAM_WORDS};
use super::mix::MixShape;
use crate::augment::plan::{DType, Layout, SamplePlan, JITTER, OP_BLUR, OP_SHARPNESS};
use crate::augment::reference::{self, Coeffs};
use crate::decode::LabelPlane;
use crate::error::{Error, Result};

use super::decode::DeviceImage;

const HEADER_WORDS: usize = 16;
pub(super) const DESC_WORDS: usize = 20;
/// Words per sample after a group's horizontal items that hold a whole-image op's
/// statistic (`vertical_jitter`'s phase 1): the contrast mean, the auto-contrast extremes
/// or the equalize tables (3 x 256).
pub(super) const STATS_WORDS: u64 = 768;
/// Words per output pixel of the copy a neighbourhood op (sharpness, blur) reads.
pub(super) const TEMP_WORDS: u64 = 3;
const PLAN_WORDS: usize = std::mem::size_of::<SamplePlan>() / 4;
const WORKGROUP: u64 = 256;
/// Binding offsets are kept at multiples of this (a multiple of every valid alignment).
const BIND_ALIGN: u64 = 256;

/// Output shape shared by every sample of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    width: u32,
    height: u32,
    dtype: u32,
    layout: u32,
}

impl Shape {
    fn pixels(&self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    fn image_bytes(&self) -> u64 {
        3 * self.pixels() * dtype_size(self.dtype)
    }
}

fn dtype_size(dtype: u32) -> u64 {
    match dtype {
        1 => 2,
        2 => 4,
        _ => 1,
    }
}

/// The host half of a batch: plans, coefficient tables, mask pixels and descriptors in one
/// blob ([`AugmentInput::bytes`]) to upload into the buffer [`AugmentInput::launches`]
/// reads. Reuse one per batch slot: [`AugmentInput::clear`] keeps the allocations.
#[derive(Debug, Default)]
pub struct AugmentInput {
    words: Vec<u32>,
    capacity: usize,
    n: usize,
    shape: Option<Shape>,
    items: u64,
    /// Per sample: first horizontal item.
    item_starts: Vec<u64>,
    /// Per sample: data words `[start, end)` relative to the data section.
    data: Vec<(u64, u64)>,
    /// Per sample: window words `[start, end)` in the windows buffer.
    windows: Vec<(u64, u64)>,
    /// Per sample: its whole-image colour ops (`vertical_jitter`'s rounds), and whether
    /// one reads a neighbourhood (sharpness, blur: the copy they read needs room).
    rounds: Vec<(u32, bool)>,
    kx: Coeffs,
    ky: Coeffs,
}

impl AugmentInput {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets every sample, keeping the allocations and the blob layout.
    pub fn clear(&mut self) {
        let start = self.data_start();
        self.words.truncate(start);
        self.n = 0;
        self.shape = None;
        self.items = 0;
        self.item_starts.clear();
        self.data.clear();
        self.windows.clear();
        self.rounds.clear();
        self.write_header();
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no sample was pushed.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Bytes of one image slot (0 when empty).
    pub fn image_bytes(&self) -> u64 {
        self.shape.map_or(0, |s| s.image_bytes())
    }

    /// Bytes the image output buffer needs: every slot, rounded up to 4.
    pub fn images_bytes(&self) -> u64 {
        (self.n as u64 * self.image_bytes()).div_ceil(4) * 4
    }

    /// The batch's images as the mixing pass sees them (`super::mix`); `None` before
    /// the first sample.
    pub fn mix_shape(&self) -> Option<MixShape> {
        let shape = self.shape?;
        Some(MixShape {
            dtype: DType::from_code(shape.dtype),
            layout: Layout::from_code(shape.layout),
            len: self.n,
            width: shape.width,
            height: shape.height,
        })
    }

    /// Bytes the mask output buffer needs: `out_width * out_height` u16 per sample,
    /// rounded up to 4.
    pub fn masks_bytes(&self) -> u64 {
        let pixels = self.shape.map_or(0, |s| s.pixels());
        (self.n as u64 * pixels * 2).div_ceil(4) * 4
    }

    /// The blob to upload (see the module documentation for its layout).
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }

    fn data_start(&self) -> usize {
        HEADER_WORDS + self.capacity * (DESC_WORDS + PLAN_WORDS)
    }

    fn write_header(&mut self) {
        if self.words.len() < HEADER_WORDS {
            self.words.resize(HEADER_WORDS, 0);
        }
        let shape = self.shape.unwrap_or(Shape {
            width: 0,
            height: 0,
            dtype: 0,
            layout: 0,
        });
        let header = [
            self.n as u32,
            shape.width,
            shape.height,
            shape.dtype,
            shape.layout,
            shape.image_bytes() as u32,
            HEADER_WORDS as u32,
            (HEADER_WORDS + self.capacity * DESC_WORDS) as u32,
            self.data_start() as u32,
        ];
        self.words[..header.len()].copy_from_slice(&header);
    }

    /// Doubles the descriptor and plan capacity, moving the data section up.
    fn grow(&mut self) {
        let old_cap = self.capacity;
        let old_start = self.data_start();
        if self.words.len() < old_start {
            self.words.resize(old_start, 0);
        }
        let new_cap = (old_cap * 2).max(16);
        let mut words = vec![0u32; HEADER_WORDS + new_cap * (DESC_WORDS + PLAN_WORDS)];
        let descs = HEADER_WORDS;
        words[descs..descs + old_cap * DESC_WORDS]
            .copy_from_slice(&self.words[descs..descs + old_cap * DESC_WORDS]);
        let (old_plans, new_plans) = (
            HEADER_WORDS + old_cap * DESC_WORDS,
            HEADER_WORDS + new_cap * DESC_WORDS,
        );
        words[new_plans..new_plans + old_cap * PLAN_WORDS]
            .copy_from_slice(&self.words[old_plans..old_plans + old_cap * PLAN_WORDS]);
        words.extend_from_slice(self.words.get(old_start..).unwrap_or(&[]));
        self.words = words;
        self.capacity = new_cap;
        self.write_header();
    }

    /// The output shape of the sample of `plan`, checked against the batch's (see
    /// [`Self::push`]), and its label plane's size against its data.
    fn checked_shape(&self, plan: &SamplePlan, mask: Option<&LabelPlane>) -> Result<Shape> {
        let shape = Shape {
            width: plan.out_width,
            height: plan.out_height,
            dtype: plan.dtype() as u32,
            layout: plan.layout() as u32,
        };
        if shape.width == 0 || shape.height == 0 {
            return Err(Error::config(
                "size",
                format!("output size {}x{} is empty", shape.width, shape.height),
            ));
        }
        if shape.image_bytes() > u64::from(u32::MAX) {
            return Err(Error::config(
                "size",
                format!(
                    "output size {}x{} is too large for one slot",
                    shape.width, shape.height
                ),
            ));
        }
        match self.shape {
            Some(s) if s != shape => {
                return Err(Error::config("augment", format!(
                    "sample {} of the batch has output {}x{} dtype {} layout {}, the batch has {}x{} dtype {} layout {}",
                    self.n, shape.width, shape.height, shape.dtype, shape.layout,
                    s.width, s.height, s.dtype, s.layout
                )))
            }
            _ => {}
        }
        if let Some(m) = mask {
            if m.width == 0 || m.height == 0 || m.data.len() != m.width as usize * m.height as usize
            {
                return Err(Error::config(
                    "mask",
                    format!(
                        "label plane of sample {}: {}x{} with {} ids",
                        self.n,
                        m.width,
                        m.height,
                        m.data.len()
                    ),
                ));
            }
        }
        Ok(shape)
    }

    /// Adds a sample: its plan, its decoded window in the windows buffer, and its label
    /// plane when the batch has masks. Every sample of a batch must have the same output
    /// size, dtype and layout ([`Error::Config`] otherwise, as for a mask whose data does
    /// not match its size, or a batch beyond the 32-bit offsets of the blob).
    pub fn push(
        &mut self,
        plan: &SamplePlan,
        image: DeviceImage,
        mask: Option<&LabelPlane>,
    ) -> Result<()> {
        let shape = self.checked_shape(plan, mask)?;
        if self.n == self.capacity {
            self.grow();
        }
        let ow = shape.width as usize;
        let (ox, oy) = (image.origin_x as usize, image.origin_y as usize);
        reference::resize_coeffs(
            plan,
            (image.origin_x, image.origin_y),
            (image.width, image.height),
            image.scale.max(1),
            &mut self.kx,
            &mut self.ky,
        );
        let (first, last) = self.ky.span(oy);
        let rows = (last - first) as u64;
        let items = rows * ow as u64;
        let start = self.data_start();
        let data0 = self.words.len();
        let rel = |words: &Vec<u32>| (words.len() - start) as u32;
        let xb = rel(&self.words);
        for &(x, n) in &self.kx.bounds {
            self.words.extend([(x - ox) as u32, n as u32]);
        }
        let xw = rel(&self.words);
        self.words.extend(self.kx.weights.iter().map(|&w| w as u32));
        let yb = rel(&self.words);
        for &(y, n) in &self.ky.bounds {
            self.words.extend([(y - first) as u32, n as u32]);
        }
        let yw = rel(&self.words);
        self.words.extend(self.ky.weights.iter().map(|&w| w as u32));
        // The Gaussian blur's weights: `kx, ky`, then the kx and ky integer weights.
        let mut blur = 0;
        if plan.has(JITTER) {
            if let Some(k) = plan.jitter_ops().position(|op| op == OP_BLUR) {
                blur = rel(&self.words);
                let (kx, ky) = plan.blur_kernel();
                let sigma = plan.op_factor(k, 0.0);
                self.words.extend([kx, ky]);
                self.words.extend(reference::blur_weights(kx, sigma));
                self.words.extend(reference::blur_weights(ky, sigma));
            }
        }
        let (mut mask_at, mut mask_w, mut mask_h, mut nearest) = (0, 0, 0, 0);
        if let Some(m) = mask {
            nearest = rel(&self.words);
            let (cols, rows) = reference::mask_tables(plan, m.width as usize, m.height as usize);
            self.words
                .extend(cols.iter().chain(&rows).map(|&i| i as u32));
            mask_at = rel(&self.words);
            self.words.extend(
                m.data
                    .chunks(2)
                    .map(|p| u32::from(p[0]) | (u32::from(p.get(1).copied().unwrap_or(0)) << 16)),
            );
            (mask_w, mask_h) = (m.width, m.height);
        }
        if self.words.len() > u32::MAX as usize || self.items + items > u64::from(u32::MAX) {
            self.words.truncate(data0);
            return Err(Error::config(
                "batch_size",
                format!(
                    "batch input too large at sample {}: {} words of tables, {} resize items",
                    self.n,
                    self.words.len(),
                    self.items + items
                ),
            ));
        }
        let desc: [u32; DESC_WORDS] = [
            image.offset,
            image.width,
            image.height,
            (first - oy) as u32,
            rows as u32,
            self.items as u32,
            xb,
            xw,
            self.kx.ksize as u32,
            yb,
            yw,
            self.ky.ksize as u32,
            mask_at,
            mask_w,
            mask_h,
            nearest,
            blur,
            0,
            0,
            0,
        ];
        let d = HEADER_WORDS + self.n * DESC_WORDS;
        self.words[d..d + DESC_WORDS].copy_from_slice(&desc);
        // The valid rect as the reference reads it (clamped to the frame), so no plan can
        // send the warp's taps outside the sample's pixels.
        let ((vx0, vx1), (vy0, vy1)) = plan.valid_rect();
        let ((ex0, ex1), (ey0, ey1)) = plan.erase_rect();
        let packed = SamplePlan {
            valid: [vx0 | vx1 << 16, vy0 | vy1 << 16],
            erase: [ex0 | ex1 << 16, ey0 | ey1 << 16],
            ..*plan
        };
        let p = HEADER_WORDS + self.capacity * DESC_WORDS + self.n * PLAN_WORDS;
        self.words[p..p + PLAN_WORDS]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(&packed)));
        self.item_starts.push(self.items);
        self.items += items;
        self.data
            .push(((data0 - start) as u64, (self.words.len() - start) as u64));
        let win0 = u64::from(image.offset);
        self.windows.push((
            win0,
            win0 + u64::from(image.width) * u64::from(image.height),
        ));
        self.rounds.push(whole_image_ops(plan));
        self.shape = Some(shape);
        self.n += 1;
        self.write_header();
        Ok(())
    }

    /// The launches that augment the batch: images into [`Buffer::Images`] (sample `i`
    /// at byte `i * image_bytes`; [`Self::images_bytes`] long) and, with `masks`, label
    /// planes into [`Buffer::Masks`] (sample `i` at byte `i * out_width * out_height * 2`,
    /// u16 little-endian; [`Self::masks_bytes`]). They read [`Buffer::AugmentInput`]
    /// ([`Self::bytes`]) and the decoded windows ([`Buffer::Windows`], `windows_bytes`
    /// long) and use the scratch buffers [`Buffer::Horizontal`] and [`Buffer::Resized`]
    /// of the sizes returned.
    ///
    /// No binding exceeds `max_binding` bytes and no grid `per_dim` workgroups along a
    /// dimension: samples go in groups whose windows, tables and intermediates fit, and
    /// the outputs in chunks of words, each with its own bindings and parameters. A window
    /// outside the windows buffer or a sample too large for the limits is
    /// [`Error::Device`].
    pub fn launches(
        &self,
        windows_bytes: u64,
        masks: bool,
        max_binding: u64,
        per_dim: u64,
    ) -> Result<(Vec<Launch>, ScratchSizes)> {
        let (n, Some(shape)) = (self.n, self.shape) else {
            return Ok((Vec::new(), ScratchSizes::default()));
        };
        // Word indices in the kernels are u32: bindings stay below 2 GiB.
        let max = max_binding.min(1 << 31) / 4 * 4;
        for (i, &(w0, w1)) in self.windows.iter().enumerate() {
            if w1 > w0 && w1 * 4 > windows_bytes {
                return Err(DeviceError::Outside {
                    sample: i,
                    buffer: Buffer::Windows,
                    start: w0 * 4,
                    end: w1 * 4,
                    len: windows_bytes,
                }
                .into());
            }
        }
        let data_start = self.data_start() as u64;
        let meta = Binding {
            buffer: Buffer::AugmentInput,
            offset: 0,
            size: data_start * 4,
        };
        if meta.size > max {
            return Err(DeviceError::Binding {
                what: "the batch's augment plans",
                bytes: meta.size,
                max,
            }
            .into());
        }
        let npx = shape.pixels();
        let ranges = Ranges {
            input: self,
            max,
            data_start,
            npx,
            windows_head: head(Buffer::Windows, windows_bytes, max),
        };
        let mut launches = Vec::new();
        let mut push = |kernel: Kernel, groups: u64, p: Params, bindings: Vec<Binding>| {
            let x = groups.min(per_dim).max(1);
            let y = groups.div_ceil(x).max(1);
            if y > per_dim {
                return Err(DeviceError::Grid {
                    what: "an augment pass",
                    workgroups: groups,
                    per_dim,
                }
                .into());
            }
            launches.push(Launch {
                kernel,
                grid: [x as u32, y as u32],
                bindings,
                params: p.words(),
            });
            Ok(())
        };
        let max_h = ranges.resize_passes(n, meta, &mut push)?;

        // Chunks of output words for the write passes: images, then label planes.
        let scratch = |buffer: Buffer| Binding {
            buffer,
            offset: 0,
            size: 4,
        };
        // The bindings every write launch shares; each replaces the one its pass reads
        // per sample (`WritePass::input`) and appends its output range.
        let shared = [
            meta,
            meta,
            ranges.windows_head,
            scratch(Buffer::Horizontal),
            scratch(Buffer::Resized),
        ];
        let image_bytes = shape.image_bytes();
        WritePass {
            kernel: Kernel::WriteImage,
            out: Buffer::Images,
            slot: image_bytes,
            input: WriteInput::Resized,
            span: &|s0, s1| ranges.resized_span(s0, s1),
        }
        .plan(n as u64, max, shared, &mut push, || {
            DeviceError::Binding {
                what: "one output image",
                bytes: image_bytes,
                max,
            }
            .into()
        })?;
        if masks {
            WritePass {
                kernel: Kernel::WriteMask,
                out: Buffer::Masks,
                slot: npx * 2,
                input: WriteInput::Tables,
                span: &|s0, s1| ranges.data_span(s0 as usize, s1 as usize),
            }
            .plan(n as u64, max, shared, &mut push, || {
                DeviceError::LabelTables { max }.into()
            })?;
        }
        Ok((
            launches,
            ScratchSizes {
                horizontal: max_h,
                resized: (n as u64 * npx * 4).max(4),
            },
        ))
    }
}

/// The binding of the first `bytes` of `buffer` (at most `max`, at least one word).
fn head(buffer: Buffer, bytes: u64, max: u64) -> Binding {
    Binding {
        buffer,
        offset: 0,
        size: (bytes.min(max) / 4 * 4).max(4),
    }
}

/// The binding of the aligned span of `buffer` covering bytes `[start, end)`.
fn span(buffer: Buffer, start: u64, end: u64) -> Binding {
    let s = Span::covering(start, end);
    Binding {
        buffer,
        offset: s.offset,
        size: s.size,
    }
}

/// Where the launches of a batch ([`AugmentInput::launches`]) find what a group of
/// samples reads and writes, no binding over `max` bytes.
struct Ranges<'a> {
    input: &'a AugmentInput,
    max: u64,
    /// Word of the upload where the samples' tables start.
    data_start: u64,
    /// Pixels of one output.
    npx: u64,
    /// The windows buffer's first `max` bytes.
    windows_head: Binding,
}

impl Ranges<'_> {
    /// The span of the upload holding the tables of samples `[s0, s1)`.
    fn data_span(&self, s0: usize, s1: usize) -> Binding {
        span(
            Buffer::AugmentInput,
            (self.data_start + self.input.data[s0].0) * 4,
            (self.data_start + self.input.data[s1 - 1].1) * 4,
        )
    }

    /// The words after a group's horizontal items that hold the whole-image ops'
    /// statistics, and the copies the neighbourhood ops read (when a sample of the group
    /// has one), for samples `[s0, s1)`.
    fn sums(&self, s0: usize, s1: usize) -> u64 {
        let temp = self.input.rounds[s0..s1].iter().any(|r| r.1);
        (s1 - s0) as u64 * (STATS_WORDS + if temp { TEMP_WORDS * self.npx } else { 0 })
    }

    /// The span of [`Buffer::Resized`] holding samples `[s0, s1)`.
    fn resized_span(&self, s0: u64, s1: u64) -> Binding {
        span(Buffer::Resized, s0 * self.npx * 4, s1 * self.npx * 4)
    }

    /// The first horizontal item of sample `s` (the number of items when `s` is past the
    /// last).
    fn item_end(&self, s: usize) -> u64 {
        self.input
            .item_starts
            .get(s)
            .copied()
            .unwrap_or(self.input.items)
    }

    /// The resize passes over the `n` samples, in groups whose windows, tables and
    /// intermediates fit; each launch goes to `push`. Returns the bytes of
    /// [`Buffer::Horizontal`] the largest group needs.
    fn resize_passes(
        &self,
        n: usize,
        meta: Binding,
        push: &mut dyn FnMut(Kernel, u64, Params, Vec<Binding>) -> Result<()>,
    ) -> Result<u64> {
        // Workgroups per sample in `vertical_jitter`'s phases 0 and 2.
        let per_sample = self.npx.div_ceil(WORKGROUP);
        let word = |b: &Binding| (b.offset / 4) as u32;
        // Groups of samples for the resize passes.
        let mut max_h = 4;
        let mut s0 = 0;
        while s0 < n {
            let mut s1 = s0;
            let (mut lo, mut hi) = (u64::MAX, 0);
            loop {
                let (w0, w1) = self.input.windows[s1];
                let (nlo, nhi) = if w1 > w0 {
                    (lo.min(w0), hi.max(w1))
                } else {
                    (lo, hi)
                };
                let win = if nhi > nlo {
                    span(Buffer::Windows, nlo * 4, nhi * 4)
                } else {
                    self.windows_head
                };
                let h = (self.item_end(s1 + 1) - self.input.item_starts[s0]
                    + self.sums(s0, s1 + 1))
                    * 4;
                let fits = win.size <= self.max
                    && self.data_span(s0, s1 + 1).size <= self.max
                    && h <= self.max
                    && self.resized_span(s0 as u64, s1 as u64 + 1).size <= self.max;
                if !fits {
                    if s1 == s0 {
                        return Err(DeviceError::SampleBindings {
                            sample: s0,
                            window: win.size,
                            horizontal: h,
                            max: self.max,
                        }
                        .into());
                    }
                    break;
                }
                (lo, hi) = (nlo, nhi);
                s1 += 1;
                if s1 == n {
                    break;
                }
            }
            let win = if hi > lo {
                span(Buffer::Windows, lo * 4, hi * 4)
            } else {
                self.windows_head
            };
            let (item0, items) = (
                self.input.item_starts[s0],
                self.item_end(s1) - self.input.item_starts[s0],
            );
            let h_words = items + self.sums(s0, s1);
            max_h = max_h.max(h_words * 4);
            let data = self.data_span(s0, s1);
            let resized = self.resized_span(s0 as u64, s1 as u64);
            let params = Params {
                s0: s0 as u32,
                s1: s1 as u32,
                item0: item0 as u32,
                items: items as u32,
                win_base: word(&win),
                data_base: word(&data),
                r_base: word(&resized),
                h_base: item0 as u32,
                ..Params::default()
            };
            let bindings = vec![
                meta,
                data,
                win,
                Binding {
                    buffer: Buffer::Horizontal,
                    offset: 0,
                    size: h_words * 4,
                },
                resized,
                head(Buffer::Images, self.input.images_bytes(), self.max),
            ];
            if items > 0 {
                push(
                    Kernel::Horizontal,
                    items.div_ceil(WORKGROUP),
                    params,
                    bindings.clone(),
                )?;
            }
            let spread = (s1 - s0) as u64 * per_sample;
            push(Kernel::VerticalJitter, spread, params, bindings.clone())?;
            let rounds = self.input.rounds[s0..s1]
                .iter()
                .map(|r| r.0)
                .max()
                .unwrap_or(0);
            for round in 1..=rounds {
                let mut p = params;
                p.contrast = round;
                p.phase = 1;
                push(Kernel::VerticalJitter, spread, p, bindings.clone())?;
                p.phase = 2;
                push(Kernel::VerticalJitter, spread, p, bindings.clone())?;
            }
            s0 = s1;
        }
        Ok(max_h)
    }
}

/// Bytes of the scratch buffers [`AugmentInput::launches`] uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScratchSizes {
    /// [`Buffer::Horizontal`].
    pub horizontal: u64,
    /// [`Buffer::Resized`].
    pub resized: u64,
}

/// A buffer range: byte offset (a multiple of [`BIND_ALIGN`]) and size.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u64,
    size: u64,
}

impl Span {
    /// The aligned span covering bytes `[start, end)`, at least one word.
    fn covering(start: u64, end: u64) -> Span {
        let offset = start / BIND_ALIGN * BIND_ALIGN;
        let end = end.max(offset + 4).div_ceil(4) * 4;
        Span {
            offset,
            size: end - offset,
        }
    }
}

/// The parameter words of an augment launch ([`Launch::params`]), field for field the
/// `Params` uniform of `shaders/augment.wgsl` (`tests/suite/shaders_validate.rs` checks the two
/// layouts agree) and the words `S0`..`WORDS` of `kernels/augment.cu`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Params {
    /// First sample of the launch.
    pub s0: u32,
    /// One past its last sample.
    pub s1: u32,
    /// `horizontal`: first item of the group.
    pub item0: u32,
    /// `horizontal`: items of the group.
    pub items: u32,
    /// Word of the windows buffer where the bound range starts.
    pub win_base: u32,
    /// Word of the upload where the bound data range starts.
    pub data_base: u32,
    /// Word of the resized buffer where the bound range starts.
    pub r_base: u32,
    /// First item the bound horizontal buffer holds.
    pub h_base: u32,
    /// Write passes: byte of sample `s0`'s slot where the chunk starts.
    pub byte0: u32,
    /// Write passes: words in the chunk.
    pub words: u32,
    /// `vertical_jitter`: 0 (resize and the ops before the first whole-image op), 1 (what
    /// whole-image op `contrast` needs), 2 (the op and the ops up to the next).
    pub phase: u32,
    /// `vertical_jitter` phases 1 and 2: which whole-image op (from 1; named for the
    /// first of them, contrast).
    pub contrast: u32,
    /// Zero: the record is [`PARAM_WORDS`] words long.
    pub pad: [u32; PARAM_WORDS - 12],
}

const _: () = assert!(std::mem::size_of::<Params>() == PARAM_WORDS * 4);

impl Params {
    fn words(&self) -> [u32; PARAM_WORDS] {
        bytemuck::cast(*self)
    }
}

/// The whole-image colour ops of `plan`, counted as `vertical_jitter` counts its rounds
/// ([`reference::needs_whole_image`]), and whether one reads a neighbourhood.
fn whole_image_ops(plan: &SamplePlan) -> (u32, bool) {
    if !plan.has(JITTER) {
        return (0, false);
    }
    let (mut n, mut temp) = (0, false);
    for (k, op) in plan.jitter_ops().enumerate() {
        if reference::needs_whole_image(plan, k) {
            n += 1;
            temp |= op == OP_SHARPNESS || op == OP_BLUR;
        }
    }
    (n, temp)
}

/// Where a write launch reads each sample's input: the resized pixels (`write_image`) or
/// the upload's tables (`write_mask`).
#[derive(Debug, Clone, Copy)]
enum WriteInput {
    Resized,
    Tables,
}

/// One write pass (`write_image` or `write_mask`): `slot` bytes of `out` per sample, from
/// the `span(s0, s1)` of its input that samples `[s0, s1)` need.
struct WritePass<'a> {
    kernel: Kernel,
    out: Buffer,
    slot: u64,
    input: WriteInput,
    span: &'a dyn Fn(u64, u64) -> Binding,
}

impl WritePass<'_> {
    /// Plans the pass over `n` samples in chunks of output words that start on multiples
    /// of [`BIND_ALIGN`], each as long as its output range and its input span fit `max`
    /// bytes. `shared` are the bindings of every launch; each launch binds its input span
    /// in place of the input's slot in them (1: tables, 4: resized pixels) and its output
    /// range after them, and goes to `push`. Not even one step fitting is the error
    /// `too_large` makes.
    fn plan(
        &self,
        n: u64,
        max: u64,
        shared: [Binding; 5],
        push: &mut dyn FnMut(Kernel, u64, Params, Vec<Binding>) -> Result<()>,
        too_large: impl FnOnce() -> Error,
    ) -> Result<()> {
        // Samples `[s0, s1)` whose slots words `[w0, w1)` touch.
        let covered = |w0: u64, w1: u64| {
            let first = (w0 * 4 / self.slot).min(n - 1);
            let last = ((w1 * 4 - 1) / self.slot).min(n - 1);
            (first, last + 1)
        };
        let fits = |w0: u64, w1: u64| {
            let (s0, s1) = covered(w0, w1);
            (w1 - w0) * 4 <= max && (self.span)(s0, s1).size <= max
        };
        let ranges =
            chunks((n * self.slot).div_ceil(4), BIND_ALIGN / 4, fits).ok_or_else(too_large)?;
        for (w0, w1) in ranges {
            let (s0, s1) = covered(w0, w1);
            let input = (self.span)(s0, s1);
            let base = (input.offset / 4) as u32;
            let mut params = Params {
                s0: s0 as u32,
                s1: s1 as u32,
                byte0: (w0 * 4 - s0 * self.slot) as u32,
                words: (w1 - w0) as u32,
                ..Params::default()
            };
            let mut bindings = shared.to_vec();
            match self.input {
                WriteInput::Tables => (params.data_base, bindings[1]) = (base, input),
                WriteInput::Resized => (params.r_base, bindings[4]) = (base, input),
            }
            bindings.push(Binding {
                buffer: self.out,
                offset: w0 * 4,
                size: (w1 - w0) * 4,
            });
            push(self.kernel, (w1 - w0).div_ceil(WORKGROUP), params, bindings)?;
        }
        Ok(())
    }
}

/// Splits `[0, total)` words into chunks starting at multiples of `step` words, each as
/// long as `fits(start, end)` allows; `None` when not even one step fits.
fn chunks(total: u64, step: u64, fits: impl Fn(u64, u64) -> bool) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut w0 = 0;
    while w0 < total {
        let end = |k: u64| (w0 + k * step).min(total);
        let most = (total - w0).div_ceil(step);
        if !fits(w0, end(1)) {
            return None;
        }
        let (mut lo, mut hi) = (1, most);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(w0, end(mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        out.push((w0, end(lo)));
        w0 = end(lo);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Augment;

    /// The planned `vertical_jitter` launches of `n` samples of a `w x h` output: the
    /// workgroups of each, with its phase and contrast change.
    fn vertical(aug: &Augment, n: u64, (w, h): (u32, u32)) -> Vec<(u64, u32, u32)> {
        let mut input = AugmentInput::new();
        let mut neighbourhood = false;
        for id in 0..n {
            let plan = aug.plan(1, 0, id, 300, 200);
            neighbourhood |= whole_image_ops(&plan).1;
            let image = DeviceImage {
                offset: (id * 300 * 200) as u32,
                width: 300,
                height: 200,
                full_width: 300,
                full_height: 200,
                scale: 1,
                ..DeviceImage::default()
            };
            input.push(&plan, image, None).expect("push");
        }
        assert_eq!(input.image_bytes(), 3 * u64::from(w) * u64::from(h));
        let (launches, scratch) = input
            .launches(n * 300 * 200 * 4, false, 1 << 30, 65535)
            .expect("plan");
        let vj: Vec<_> = launches
            .iter()
            .filter(|l| l.kernel == Kernel::VerticalJitter)
            .map(|l| {
                let p: Params = bytemuck::cast(l.params);
                let hbuf = l.bindings[3];
                // The statistics fit the horizontal binding and scratch (and the copies
                // for neighbourhood ops, which need a sample's pixels three times).
                let temp = if neighbourhood {
                    TEMP_WORDS * u64::from(w) * u64::from(h)
                } else {
                    0
                };
                let need = u64::from(p.items) + u64::from(p.s1 - p.s0) * (STATS_WORDS + temp);
                assert!(hbuf.size >= need * 4 && scratch.horizontal >= need * 4);
                let groups = u64::from(l.grid[0]) * u64::from(l.grid[1]);
                (groups, p.phase, p.contrast)
            })
            .collect();
        vj
    }

    #[test]
    fn the_vertical_pass_spreads_over_every_output_pixel() {
        // 224 x 224: 196 workgroups of 256 per sample, not one.
        let aug = Augment::new().resize(224, 224);
        let vj = vertical(&aug, 4, (224, 224));
        assert_eq!(vj.len(), 1, "{vj:?}");
        assert!(vj[0].0 >= 4 * 196 && vj[0].0 < 4 * 196 + 256, "{vj:?}");
        assert_eq!(vj[0].1, 0);
    }

    #[test]
    fn contrast_adds_a_mean_and_a_blend_phase() {
        // Jitter with contrast: per group, phase 0 over every pixel, the mean (one
        // workgroup per sample does it, the grid covers every pixel as phase 1 of a
        // neighbourhood op needs), the blend over every pixel again.
        let aug = Augment::new().resize(100, 60).color_jitter(0.4, 0.5, 0.4);
        let vj = vertical(&aug, 5, (100, 60));
        let per = 6000u64.div_ceil(256);
        assert_eq!(vj.len(), 3, "{vj:?}");
        assert_eq!((vj[0].1, vj[1].1, vj[2].1), (0, 1, 2));
        assert_eq!((vj[1].2, vj[2].2), (1, 1));
        assert!(vj[0].0 >= 5 * per && vj[2].0 == vj[0].0, "{vj:?}");
        assert_eq!(vj[1].0, vj[0].0, "{vj:?}");
        // A plan whose contrast factor is 1 has no contrast change.
        let mut plan = aug.plan(1, 0, 0, 300, 200);
        plan.contrast = 1.0;
        assert_eq!(whole_image_ops(&plan).0, 0);
        plan.contrast = 1.5;
        plan.flags |= crate::augment::plan::JITTER;
        plan.jitter_order = 0x0403_0201;
        assert_eq!(whole_image_ops(&plan).0, 1);
        // The ops stop at the first empty one, as the shader's `op_count` does.
        plan.jitter_order = 0x0200_0201;
        assert_eq!(whole_image_ops(&plan).0, 1);
        plan.jitter_order = 0x0202_0202;
        assert_eq!(whole_image_ops(&plan).0, 4);
        // The list goes on in the second word (colour ops after the jitter).
        plan.jitter_order_hi = 0x0000_0205;
        assert_eq!(whole_image_ops(&plan).0, 5);
        plan.jitter_order = 0x0000_0201;
        assert_eq!(
            whole_image_ops(&plan).0,
            1,
            "the first word's 0 ends the list"
        );
    }

    #[test]
    fn whole_image_ops_add_rounds_and_neighbourhood_ops_a_copy() {
        let aug = Augment::new()
            .resize(40, 30)
            .gaussian_blur((5, 3), (0.5, 2.0), 1.0)
            .random_adjust_sharpness(2.0, 1.0)
            .random_autocontrast(1.0)
            .random_equalize(1.0);
        let plan = aug.plan(1, 0, 0, 300, 200);
        assert_eq!(whole_image_ops(&plan), (4, true));
        let vj = vertical(&aug, 3, (40, 30));
        assert_eq!(vj.len(), 9, "{vj:?}");
        for r in 1..=4u32 {
            assert_eq!(vj[2 * r as usize - 1].1, 1);
            assert_eq!(vj[2 * r as usize].1, 2);
            assert_eq!(vj[2 * r as usize].2, r);
        }
        // Statistics alone need no copy.
        let stats = Augment::new().resize(40, 30).random_equalize(1.0);
        assert_eq!(whole_image_ops(&stats.plan(1, 0, 0, 300, 200)), (1, false));
        // Sharpness on an image 2 pixels wide leaves it as it is: no round.
        let thin = Augment::new()
            .resize(2, 30)
            .random_adjust_sharpness(2.0, 1.0);
        assert_eq!(whole_image_ops(&thin.plan(1, 0, 0, 300, 200)), (0, false));
    }
}
