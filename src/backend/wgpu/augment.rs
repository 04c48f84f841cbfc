//! The fused augmentation pass of the wgpu backend (`shaders/augment.wgsl`): decoded
//! windows in, batch slots out, pixel for pixel what [`crate::augment::reference`] makes
//! (resize exactly, jitter and normalisation within one 0-255 level).
//!
//! The host side is two pieces. [`AugmentInput`] collects a batch's plans and computes on
//! the host what the CPU path computes in f64 (the resize coefficient tables, Pillow's
//! nearest tables for label planes), into one blob to upload. [`AugmentKernels`] holds the
//! pipelines and records the passes into a command encoder.
//!
//! # The upload blob ([`AugmentInput::bytes`]), in little-endian u32 words
//!
//! | words | what |
//! | --- | --- |
//! | 0..16 | header: sample count, output width, height, dtype, layout, image bytes, word offsets of the descriptors, plans and data section, 7 zero words |
//! | 16.. | `capacity` descriptors of 16 words (see below) |
//! | then | `capacity` [`SamplePlan`]s, 28 words each, as they are |
//! | then | the data section: per sample, contiguous, in sample order: x bounds (`(first window column, taps)` per output column), x weights (`kx` per output column, i32 with 22 fractional bits, zero past a column's taps), y bounds (`(first row of the horizontal result, taps)` per output row), y weights, and with a mask: the nearest source column per output column, the source row per output row, then the label plane, two u16 per word, low half first |
//!
//! A descriptor is: window offset (word in the windows buffer), window width, window height,
//! first window row and row count the horizontal pass reads, first horizontal item (prefix
//! sum of `rows * out_width`), then data-relative word offsets of x bounds, x weights, `kx`,
//! y bounds, y weights, `ky`, mask pixels, mask width (0: no mask), mask height, nearest
//! tables. `capacity` grows by doubling and is kept across [`AugmentInput::clear`], so the
//! blob layout is stable from batch to batch.
//!
//! # Passes ([`AugmentKernels::encode`])
//!
//! 1. `horizontal`: one invocation per `(sample, window row read, output column)`, all
//!    samples of a group flattened (a binary search finds the sample), 256 per workgroup,
//!    a 2D grid of workgroups. Writes u8 RGB, one word per pixel, to a scratch buffer.
//! 2. `vertical_jitter`: one workgroup of 256 per sample (2D grid): the vertical resize,
//!    then the jitter ops in the plan's order; contrast reduces an exact integer sum of
//!    the floored grayscale in workgroup memory. Writes one word per output pixel to a
//!    second scratch buffer holding the whole batch.
//! 3. `write_image`: one invocation per u32 word of the batch output (2D grid): flips,
//!    normalise, layout and dtype (u8 four per word, f16 rounded to nearest even, f32).
//!    A word may hold elements of two samples; every word is written by one invocation.
//! 4. `write_mask` (when a mask output is given): one invocation per word of two u16
//!    labels: nearest through the host tables, flips; samples without a mask get 0.
//!
//! No binding is larger than the device's `max_storage_buffer_binding_size`: samples are
//! processed in groups whose windows, tables and intermediates fit, and the outputs in
//! chunks of words, each with its own bind group and parameter record.

use std::num::NonZeroU64;

use wgpu::util::DeviceExt;

use super::{shaders, storage_entry, WgpuContext};
use crate::augment::plan::SamplePlan;
use crate::augment::reference::{self, Coeffs};
use crate::decode::LabelPlane;
use crate::error::{Error, Result};

/// The record the decode pass returns for each sample's window (defined with the decode
/// pass): what [`AugmentInput::push`] takes.
pub use super::decode::GpuImage;

const HEADER_WORDS: usize = 16;
const DESC_WORDS: usize = 16;
const PLAN_WORDS: usize = 28;
const WORKGROUP: u64 = 256;
/// Bytes between parameter records: the largest offset alignment a device may ask for.
const PARAM_STRIDE: u64 = 256;
const PARAM_WORDS: usize = 16;
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
/// blob ([`AugmentInput::bytes`]) to upload into the buffer [`AugmentKernels::encode`]
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

    /// Adds a sample: its plan, its decoded window in the windows buffer, and its label
    /// plane when the batch has masks. Every sample of a batch must have the same output
    /// size, dtype and layout ([`Error::Config`] otherwise, as for a mask whose data does
    /// not match its size, or a batch beyond the 32-bit offsets of the blob).
    pub fn push(
        &mut self,
        plan: &SamplePlan,
        image: GpuImage,
        mask: Option<&LabelPlane>,
    ) -> Result<()> {
        let shape = Shape {
            width: plan.out_width,
            height: plan.out_height,
            dtype: plan.dtype() as u32,
            layout: plan.layout() as u32,
        };
        if shape.width == 0 || shape.height == 0 {
            return Err(Error::Config(format!(
                "output size {}x{} is empty",
                shape.width, shape.height
            )));
        }
        if shape.image_bytes() > u64::from(u32::MAX) {
            return Err(Error::Config(format!(
                "output size {}x{} is too large for one slot",
                shape.width, shape.height
            )));
        }
        match self.shape {
            Some(s) if s != shape => {
                return Err(Error::Config(format!(
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
                return Err(Error::Config(format!(
                    "label plane of sample {}: {}x{} with {} ids",
                    self.n,
                    m.width,
                    m.height,
                    m.data.len()
                )));
            }
        }
        if self.n == self.capacity {
            self.grow();
        }
        let (ow, oh) = (shape.width as usize, shape.height as usize);
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
        let (mut mask_at, mut mask_w, mut mask_h, mut nearest) = (0, 0, 0, 0);
        if let Some(m) = mask {
            nearest = rel(&self.words);
            let cols = reference::nearest_table(
                f64::from(plan.crop_x),
                f64::from(plan.crop_w),
                ow,
                m.width as usize,
            );
            let rows = reference::nearest_table(
                f64::from(plan.crop_y),
                f64::from(plan.crop_h),
                oh,
                m.height as usize,
            );
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
            return Err(Error::Config(format!(
                "batch input too large at sample {}: {} words of tables, {} resize items",
                self.n,
                self.words.len(),
                self.items + items
            )));
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
        ];
        let d = HEADER_WORDS + self.n * DESC_WORDS;
        self.words[d..d + DESC_WORDS].copy_from_slice(&desc);
        let p = HEADER_WORDS + self.capacity * DESC_WORDS + self.n * PLAN_WORDS;
        self.words[p..p + PLAN_WORDS]
            .copy_from_slice(bytemuck::cast_slice(std::slice::from_ref(plan)));
        self.item_starts.push(self.items);
        self.items += items;
        self.data
            .push(((data0 - start) as u64, (self.words.len() - start) as u64));
        let win0 = u64::from(image.offset);
        self.windows.push((
            win0,
            win0 + u64::from(image.width) * u64::from(image.height),
        ));
        self.shape = Some(shape);
        self.n += 1;
        self.write_header();
        Ok(())
    }
}

/// GPU buffers for the intermediates of [`AugmentKernels::encode`], grown when a batch
/// needs more and otherwise reused. One per batch in flight.
#[derive(Debug, Default)]
pub struct AugmentScratch {
    horizontal: Option<wgpu::Buffer>,
    resized: Option<wgpu::Buffer>,
}

/// The augmentation pipelines, built once per device.
#[derive(Debug)]
pub struct AugmentKernels {
    layout: wgpu::BindGroupLayout,
    horizontal: wgpu::ComputePipeline,
    vertical: wgpu::ComputePipeline,
    write_image: wgpu::ComputePipeline,
    write_mask: wgpu::ComputePipeline,
    max_binding: u64,
}

/// A buffer range to bind: byte offset (a multiple of [`BIND_ALIGN`]) and size.
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

    /// The first `max` bytes of a buffer (for bindings a pass does not read).
    fn head(buffer: &wgpu::Buffer, max: u64) -> Span {
        Span {
            offset: 0,
            size: (buffer.size().min(max) / 4 * 4).max(4),
        }
    }

    fn word(&self) -> u32 {
        (self.offset / 4) as u32
    }
}

/// One dispatch's parameters (the shader's `Params`).
#[derive(Debug, Clone, Copy, Default)]
struct Params {
    s0: u32,
    s1: u32,
    item0: u32,
    items: u32,
    win_base: u32,
    data_base: u32,
    r_base: u32,
    h_base: u32,
    byte0: u32,
    words: u32,
}

impl Params {
    fn words(&self) -> [u32; PARAM_WORDS] {
        let mut w = [0; PARAM_WORDS];
        w[..10].copy_from_slice(&[
            self.s0,
            self.s1,
            self.item0,
            self.items,
            self.win_base,
            self.data_base,
            self.r_base,
            self.h_base,
            self.byte0,
            self.words,
        ]);
        w
    }
}

/// Which pipeline a dispatch runs and over how many workgroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Horizontal,
    Vertical,
    WriteImage,
    WriteMask,
}

/// One dispatch: its pipeline, parameters, bindings and workgroup count.
#[derive(Debug, Clone, Copy)]
struct Dispatch {
    kind: Kind,
    params: Params,
    data: Span,
    windows: Span,
    horizontal: Span,
    resized: Span,
    out: Span,
    workgroups: u64,
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

fn bind(buffer: &wgpu::Buffer, span: Span, binding: u32) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer,
            offset: span.offset,
            size: NonZeroU64::new(span.size),
        }),
    }
}

fn check_storage(buffer: &wgpu::Buffer, what: &str, needed: u64) -> Result<()> {
    if !buffer.usage().contains(wgpu::BufferUsages::STORAGE) {
        return Err(Error::Device(format!("{what} buffer lacks STORAGE usage")));
    }
    if buffer.size() < needed.max(4) {
        return Err(Error::Device(format!(
            "{what} buffer holds {} bytes, the batch needs {}",
            buffer.size(),
            needed.max(4)
        )));
    }
    Ok(())
}

impl AugmentKernels {
    /// Compiles `shaders/augment.wgsl` and builds the four pipelines with one explicit
    /// bind group layout. A shader or pipeline the device rejects is [`Error::Device`].
    pub fn new(ctx: &WgpuContext) -> Result<Self> {
        let device = ctx.device();
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("augment.wgsl"),
            source: wgpu::ShaderSource::Wgsl(shaders::AUGMENT.into()),
        });
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: NonZeroU64::new((PARAM_WORDS * 4) as u64),
            },
            count: None,
        }];
        for (binding, read_only) in [
            (1, true),
            (2, true),
            (3, true),
            (4, false),
            (5, false),
            (6, false),
        ] {
            entries.push(storage_entry(binding, read_only));
        }
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("stoker augment"),
            entries: &entries,
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("stoker augment"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let make = |entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let kernels = AugmentKernels {
            horizontal: make("horizontal"),
            vertical: make("vertical_jitter"),
            write_image: make("write_image"),
            write_mask: make("write_mask"),
            layout,
            max_binding: u64::MAX,
        };
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Device(format!("augment shader rejected: {e}")));
        }
        Ok(kernels)
    }

    /// Binds at most `bytes` of any buffer per dispatch (the device's
    /// `max_storage_buffer_binding_size` applies anyway): batches are then split into
    /// more dispatches. For tests of the splitting, and for devices that are slow with
    /// large bindings.
    pub fn with_max_binding(mut self, bytes: u64) -> Self {
        self.max_binding = bytes;
        self
    }

    /// Records the augmentation of `input`'s batch into `encoder`: images into
    /// `images_out` (sample `i` at byte `i * image_bytes`; [`AugmentInput::images_bytes`]
    /// long at least) and, when given, label planes into `masks_out` (sample `i` at byte
    /// `i * out_width * out_height * 2`, u16 little-endian; [`AugmentInput::masks_bytes`]).
    ///
    /// `input_buffer` holds [`AugmentInput::bytes`]; `windows` the decoded windows the
    /// samples' [`GpuImage`]s point into. All need `STORAGE` usage. Buffers too small, a
    /// window outside `windows`, or a sample too large for the device's binding limit are
    /// [`Error::Device`], reported before anything is recorded.
    #[allow(clippy::too_many_arguments)]
    pub fn encode(
        &self,
        ctx: &WgpuContext,
        encoder: &mut wgpu::CommandEncoder,
        input: &AugmentInput,
        input_buffer: &wgpu::Buffer,
        windows: &wgpu::Buffer,
        images_out: &wgpu::Buffer,
        masks_out: Option<&wgpu::Buffer>,
        scratch: &mut AugmentScratch,
    ) -> Result<()> {
        let (n, Some(shape)) = (input.n, input.shape) else {
            return Ok(());
        };
        let device = ctx.device();
        let limits = device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(self.max_binding)
            .min(1 << 31)
            / 4
            * 4;
        let per_dim = u64::from(limits.max_compute_workgroups_per_dimension.max(1));
        check_storage(input_buffer, "augment input", input.bytes().len() as u64)?;
        check_storage(windows, "windows", 4)?;
        check_storage(images_out, "image output", input.images_bytes())?;
        if let Some(m) = masks_out {
            check_storage(m, "mask output", input.masks_bytes())?;
        }
        for (i, &(w0, w1)) in input.windows.iter().enumerate() {
            if w1 > w0 && w1 * 4 > windows.size() {
                return Err(Error::Device(format!(
                    "sample {i}: window words {w0}..{w1} lie outside the {}-byte windows buffer",
                    windows.size()
                )));
            }
        }
        let data_start = input.data_start() as u64;
        let meta = Span {
            offset: 0,
            size: data_start * 4,
        };
        if meta.size > max {
            return Err(Error::Device(format!(
                "{n} plans take {} bytes, more than one binding may hold ({max})",
                meta.size
            )));
        }
        let data_span = |s0: usize, s1: usize| {
            Span::covering(
                (data_start + input.data[s0].0) * 4,
                (data_start + input.data[s1 - 1].1) * 4,
            )
        };
        let npx = shape.pixels();
        let resized_span = |s0: u64, s1: u64| Span::covering(s0 * npx * 4, s1 * npx * 4);
        let item_end = |s: usize| input.item_starts.get(s).copied().unwrap_or(input.items);

        // Groups of samples for the resize passes.
        let mut dispatches = Vec::new();
        let mut max_h = 4;
        let mut s0 = 0;
        while s0 < n {
            let mut s1 = s0;
            let (mut lo, mut hi) = (u64::MAX, 0);
            loop {
                let (w0, w1) = input.windows[s1];
                let (nlo, nhi) = if w1 > w0 {
                    (lo.min(w0), hi.max(w1))
                } else {
                    (lo, hi)
                };
                let win = if nhi > nlo {
                    Span::covering(nlo * 4, nhi * 4)
                } else {
                    Span::head(windows, max)
                };
                let h = (item_end(s1 + 1) - input.item_starts[s0]) * 4;
                let fits = win.size <= max
                    && data_span(s0, s1 + 1).size <= max
                    && h <= max
                    && resized_span(s0 as u64, s1 as u64 + 1).size <= max;
                if !fits {
                    if s1 == s0 {
                        return Err(Error::Device(format!(
                            "sample {s0} needs bindings larger than the device allows ({max} bytes): window {} bytes, horizontal pass {h} bytes",
                            win.size
                        )));
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
                Span::covering(lo * 4, hi * 4)
            } else {
                Span::head(windows, max)
            };
            let (item0, items) = (input.item_starts[s0], item_end(s1) - input.item_starts[s0]);
            max_h = max_h.max(items * 4);
            let data = data_span(s0, s1);
            let resized = resized_span(s0 as u64, s1 as u64);
            let params = Params {
                s0: s0 as u32,
                s1: s1 as u32,
                item0: item0 as u32,
                items: items as u32,
                win_base: win.word(),
                data_base: data.word(),
                r_base: resized.word(),
                h_base: item0 as u32,
                ..Params::default()
            };
            let base = Dispatch {
                kind: Kind::Horizontal,
                params,
                data,
                windows: win,
                horizontal: Span {
                    offset: 0,
                    size: (items * 4).max(4),
                },
                resized,
                out: Span::head(images_out, max),
                workgroups: items.div_ceil(WORKGROUP),
            };
            if items > 0 {
                dispatches.push(base);
            }
            dispatches.push(Dispatch {
                kind: Kind::Vertical,
                workgroups: (s1 - s0) as u64,
                ..base
            });
            s0 = s1;
        }

        // Chunks of output words for the write passes.
        let step = BIND_ALIGN / 4;
        let image_bytes = shape.image_bytes();
        let total = n as u64 * image_bytes;
        let covered = |w0: u64, w1: u64, slot: u64| {
            let first = (w0 * 4 / slot).min(n as u64 - 1);
            let last = ((w1 * 4 - 1) / slot).min(n as u64 - 1);
            (first, last)
        };
        let image_chunks = chunks(total.div_ceil(4), step, |w0, w1| {
            let (first, last) = covered(w0, w1, image_bytes);
            (w1 - w0) * 4 <= max && resized_span(first, last + 1).size <= max
        })
        .ok_or_else(|| {
            Error::Device(format!(
                "one output image ({image_bytes} bytes) is too large for the binding limit ({max})"
            ))
        })?;
        for (w0, w1) in image_chunks {
            let (first, last) = covered(w0, w1, image_bytes);
            let resized = resized_span(first, last + 1);
            dispatches.push(Dispatch {
                kind: Kind::WriteImage,
                params: Params {
                    s0: first as u32,
                    s1: last as u32 + 1,
                    r_base: resized.word(),
                    byte0: (w0 * 4 - first * image_bytes) as u32,
                    words: (w1 - w0) as u32,
                    ..Params::default()
                },
                data: meta,
                windows: Span::head(windows, max),
                horizontal: Span { offset: 0, size: 4 },
                resized,
                out: Span {
                    offset: w0 * 4,
                    size: (w1 - w0) * 4,
                },
                workgroups: (w1 - w0).div_ceil(WORKGROUP),
            });
        }
        if masks_out.is_some() {
            let slot = npx * 2;
            let mask_chunks = chunks((n as u64 * slot).div_ceil(4), step, |w0, w1| {
                let (first, last) = covered(w0, w1, slot);
                (w1 - w0) * 4 <= max && data_span(first as usize, last as usize + 1).size <= max
            })
            .ok_or_else(|| {
                Error::Device(format!(
                    "a label plane's tables are too large for the binding limit ({max})"
                ))
            })?;
            for (w0, w1) in mask_chunks {
                let (first, last) = covered(w0, w1, slot);
                let data = data_span(first as usize, last as usize + 1);
                dispatches.push(Dispatch {
                    kind: Kind::WriteMask,
                    params: Params {
                        s0: first as u32,
                        s1: last as u32 + 1,
                        data_base: data.word(),
                        byte0: (w0 * 4 - first * slot) as u32,
                        words: (w1 - w0) as u32,
                        ..Params::default()
                    },
                    data,
                    windows: Span::head(windows, max),
                    horizontal: Span { offset: 0, size: 4 },
                    resized: Span { offset: 0, size: 4 },
                    out: Span {
                        offset: w0 * 4,
                        size: (w1 - w0) * 4,
                    },
                    workgroups: (w1 - w0).div_ceil(WORKGROUP),
                });
            }
        }
        for d in &dispatches {
            if d.workgroups > per_dim * per_dim {
                return Err(Error::Device(format!(
                    "{} workgroups exceed the device's grid",
                    d.workgroups
                )));
            }
        }

        let storage = wgpu::BufferUsages::STORAGE;
        let horizontal = &ctx.grow_buffer(
            &mut scratch.horizontal,
            "stoker augment horizontal",
            max_h,
            storage,
        )?;
        let resized = &ctx.grow_buffer(
            &mut scratch.resized,
            "stoker augment resized",
            n as u64 * npx * 4,
            storage,
        )?;
        let mut records = Vec::with_capacity(dispatches.len() * (PARAM_STRIDE as usize / 4));
        for d in &dispatches {
            records.extend(d.params.words());
            records.resize(records.len() + PARAM_STRIDE as usize / 4 - PARAM_WORDS, 0);
        }
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("stoker augment params"),
            contents: bytemuck::cast_slice(&records),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        let groups: Vec<wgpu::BindGroup> = dispatches
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let out = match (d.kind, masks_out) {
                    (Kind::WriteMask, Some(m)) => m,
                    _ => images_out,
                };
                device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("stoker augment"),
                    layout: &self.layout,
                    entries: &[
                        bind(
                            &params,
                            Span {
                                offset: i as u64 * PARAM_STRIDE,
                                size: (PARAM_WORDS * 4) as u64,
                            },
                            0,
                        ),
                        bind(input_buffer, meta, 1),
                        bind(input_buffer, d.data, 2),
                        bind(windows, d.windows, 3),
                        bind(horizontal, d.horizontal, 4),
                        bind(resized, d.resized, 5),
                        bind(out, d.out, 6),
                    ],
                })
            })
            .collect();
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Device(format!("augment bindings rejected: {e}")));
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("stoker augment"),
            timestamp_writes: None,
        });
        for (d, group) in dispatches.iter().zip(&groups) {
            pass.set_pipeline(match d.kind {
                Kind::Horizontal => &self.horizontal,
                Kind::Vertical => &self.vertical,
                Kind::WriteImage => &self.write_image,
                Kind::WriteMask => &self.write_mask,
            });
            pass.set_bind_group(0, group, &[]);
            let x = d.workgroups.min(per_dim);
            let y = d.workgroups.div_ceil(x.max(1));
            pass.dispatch_workgroups(x as u32, y as u32, 1);
        }
        Ok(())
    }
}
