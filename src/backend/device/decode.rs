//! Host side of the hybrid JPEG decode on a GPU: entropy decoding happened on the host
//! ([`crate::decode::jpeg::read_coefficients`]); the `idct` kernel dequantises
//! and inverse-transforms the blocks a window needs into component planes, and the
//! `color` kernel upsamples and converts them into RGBA windows (`shaders/*.wgsl`,
//! `kernels/*.cu`).
//!
//! [`DecodeInput`] gathers a batch into one upload blob ([`DecodeInput::bytes`]), made of
//! *chunks*, each small enough to bind whole (128 MiB by default, WebGPU's guaranteed
//! `max_storage_buffer_binding_size`). A chunk starts on a 256-byte boundary and is:
//!
//! | words | what |
//! | --- | --- |
//! | 0-63 | header: 0 images, 1 components, 2 image table offset, 3 component table offset, 4 IDCT invocations, 5 output pixels, 6 plane words, 7 output words, 8-10 and 12 entropy chunks only (intervals, interval table offset, coefficient words, the most blocks an interval holds: see `decode::jpeg::huffman`), 11 the blocks' layout, 13-63 zero |
//! | 64.. | image table: [`ImageDesc`] records (16 words), `IMAGES_PER_CHUNK` slots |
//! | .. | component table: [`ComponentDesc`] records (16 words), `COMPONENTS_PER_CHUNK` slots |
//! | .. | data: quantisation tables, blocks, passthrough pixels (see `decode::jpeg::coeffs`) |
//!
//! A chunk holds host-decoded coefficients or, an *entropy chunk*, entropy-coded bytes
//! that the `huffman` kernel decodes into [`Buffer::Coefficients`]. Header word 11 says
//! where the `idct` kernel finds the blocks and in which layout (`decode::jpeg::coeffs`):
//! 0, in the chunk's data, each component's in the layout of its DCT output size (the
//! coefficients its IDCT reads, 32 words a block at 8 down to 1 at 1); 1 (entropy
//! chunks), in the coefficient buffer, 32 words a block at every size.
//!
//! Offsets in a chunk's records are relative to the chunk: data offsets to its first word,
//! plane offsets to the start of the plane scratch buffer (reused by every chunk), output
//! offsets to the chunk's first output word (chunks' outputs start on 64-word boundaries in
//! the windows buffer, so they can be bound there). [`DecodeInput::launches`] plans two
//! launches per chunk, the IDCT then colour conversion.
//!
//! After the chunks, once the batch is finished, [`DecodeInput::append_table`] places
//! tables another pass reads (the orientation pass's job table), each on a 256-byte
//! boundary, so that the decode-only batches upload them too.
#![doc(hidden)]

use super::error::DeviceError;
use super::launch::{grid, Binding, Buffer, Kernel, Launch};
use super::sync_decode::{SyncBatch, SYNC_STATUS_WORDS};
use crate::decode::jpeg::coeffs::{
    pack, packed_size, Coefficients, ComponentDesc, ImageDesc, PackedJpeg, KIND_PASSTHROUGH,
};
use crate::decode::jpeg::huffman::{IntervalDesc, PackedEntropy};
use crate::decode::{DecodeError, Image8};
use crate::error::Result;

/// One decoded window in the windows buffer: `width * height` RGBA words (R in the low
/// byte, A = 255), row-major, from word `offset`. The record the augment pass reads.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DeviceImage {
    /// First word of the window in the windows buffer.
    pub offset: u32,
    /// Window width.
    pub width: u32,
    /// Window height.
    pub height: u32,
    /// Window origin x in the scaled full image.
    pub origin_x: u32,
    /// Window origin y in the scaled full image.
    pub origin_y: u32,
    /// Scaled full image width.
    pub full_width: u32,
    /// Scaled full image height.
    pub full_height: u32,
    /// IDCT scale denominator.
    pub scale: u32,
}

/// Words in a chunk header.
const HEADER_WORDS: usize = 64;
/// Header word: 1 when the chunk's blocks are in [`Buffer::Coefficients`], in the layout
/// of size 8; 0 when they are in its data, in the layout of each component's size.
pub(super) const H_FULL_BLOCKS: usize = 11;
/// Image records a chunk holds.
pub const IMAGES_PER_CHUNK: usize = 64;
/// Component records a chunk holds.
pub const COMPONENTS_PER_CHUNK: usize = 256;
const RECORD_WORDS: usize = 16;
/// Words of an image's scan record ([`crate::decode::jpeg::huffman::ScanDesc`]), placed
/// before its data in an entropy chunk.
const SCAN_WORDS: usize = 16;
/// Chunk starts (in the blob) and chunk outputs (in the windows buffer) are aligned to
/// this many words: 256 bytes, a multiple of every offset alignment a device may ask for.
const ALIGN_WORDS: usize = 64;
const IMAGE_TABLE: usize = HEADER_WORDS;
const COMPONENT_TABLE: usize = IMAGE_TABLE + IMAGES_PER_CHUNK * RECORD_WORDS;
const DATA_START: usize = COMPONENT_TABLE + COMPONENTS_PER_CHUNK * RECORD_WORDS;
/// Default per-binding budget: WebGPU's guaranteed `max_storage_buffer_binding_size`.
const DEFAULT_BINDING_BYTES: u64 = 128 << 20;

/// Words of one chunk's bindings when the device binds at most `max_binding` bytes (at
/// least 64 KiB, as [`DecodeInput::with_max_binding`] takes it).
fn binding_words(max_binding: u64) -> u64 {
    max_binding.max(64 << 10) / 4
}

/// What one image takes of a chunk: data words (after the chunk's tables), plane words,
/// output pixels (one word each).
#[derive(Debug, Clone, Copy)]
struct Need {
    data_words: u64,
    plane_words: u64,
    pixels: u64,
    /// Coefficient blocks (uploaded, or decoded on the device).
    blocks: u64,
}

impl Need {
    /// Whether a chunk holding this image alone overflows a binding of `max_words`.
    fn exceeds(&self, max_words: u64) -> bool {
        DATA_START as u64 + self.data_words > max_words
            || self.plane_words > max_words
            || self.pixels > max_words
    }

    /// Says which window of which image needs what, against a binding of `max_words`.
    fn describe(&self, image: &ImageDesc, max_words: u64) -> String {
        let (w, h, s) = (image.width, image.height, image.scale.max(1));
        let what = if image.kind == KIND_PASSTHROUGH {
            format!("a {w}x{h} window decoded on the host")
        } else {
            let blocks = self.blocks;
            format!(
                "the {w}x{h} window at ({}, {}) of the {}x{} image at IDCT scale 1/{s} \
                 ({}x{} stored pixels, {blocks} coefficient blocks)",
                image.x0,
                image.y0,
                image.full_width,
                image.full_height,
                u64::from(w) * u64::from(s),
                u64::from(h) * u64::from(s),
            )
        };
        format!(
            "{what} needs {} bytes of input, {} of planes and {} of output; \
             a GPU binding holds {} bytes",
            4 * (DATA_START as u64 + self.data_words),
            4 * self.plane_words,
            4 * self.pixels,
            4 * max_words
        )
    }
}

/// Why the device cannot decode the `window` of `coeffs` at IDCT `scale` with storage
/// bindings of `max_binding` bytes (its input, planes or output would not fit one
/// [`DecodeInput`] chunk; the message says which window of which image needs what), or
/// `None` when it can. A JPEG refused here can be decoded by the CPU instead
/// ([`super::job::Prepared::fit_bindings`]); [`DecodeInput::push_jpeg`] refuses the same.
pub fn jpeg_binding_refusal(
    coeffs: &Coefficients,
    scale: u32,
    window: [u32; 4],
    max_binding: u64,
) -> std::result::Result<Option<String>, DecodeError> {
    let max_words = binding_words(max_binding);
    let size = packed_size(coeffs, scale, window)?;
    let desc = ImageDesc::window_of(coeffs, scale, size.window, coeffs.scaled_size(scale));
    let need = Need {
        data_words: size.data_words,
        plane_words: size.plane_words,
        pixels: size.pixels,
        blocks: size.blocks,
    };
    Ok(need
        .exceeds(max_words)
        .then(|| need.describe(&desc, max_words)))
}

/// [`jpeg_binding_refusal`] for host pixels passed through the device
/// ([`DecodeInput::push_rgb`] refuses the same).
pub fn rgb_binding_refusal(img: &Image8, max_binding: u64) -> Option<String> {
    let max_words = binding_words(max_binding);
    let pixels = u64::from(img.width) * u64::from(img.height);
    let need = Need {
        data_words: pixels,
        plane_words: 0,
        pixels,
        blocks: 0,
    };
    let desc = ImageDesc {
        kind: KIND_PASSTHROUGH,
        width: img.width,
        height: img.height,
        ..ImageDesc::default()
    };
    need.exceeds(max_words)
        .then(|| need.describe(&desc, max_words))
}

/// Blocks in the regions of `components`.
fn region_blocks(components: &[ComponentDesc]) -> u64 {
    components
        .iter()
        .map(|c| u64::from(c.bw) * u64::from(c.bh))
        .sum()
}

/// Host bookkeeping of one chunk.
#[derive(Debug, Clone, Copy, Default)]
struct Chunk {
    /// First word of the chunk in the upload.
    start: usize,
    /// Where that word is in the blob (earlier payloads left out: [`DecodeInput::deferring`]).
    blob_start: usize,
    images: usize,
    components: usize,
    idct: u64,
    pixels: u64,
    plane_words: u64,
    /// First output word of the chunk in the windows buffer.
    out_base: u64,
    out_words: u64,
    /// Its blocks are decoded on the device (`huffman`) into [`Buffer::Coefficients`].
    entropy: bool,
    /// Restart intervals (entropy chunks).
    intervals: u64,
    /// First word of its blocks in [`Buffer::Coefficients`] (a multiple of 64).
    coef_base: u64,
    coef_words: u64,
    /// First word of its intervals' status in [`Buffer::EntropyStatus`] (a multiple of 64).
    status_base: u64,
    /// Its interval table has been written (the chunk is closed).
    closed: bool,
    /// The most blocks one of its intervals holds (header word 12).
    max_interval_blocks: u32,
    /// Words of its status in [`Buffer::EntropyStatus`]: its intervals', then a sync
    /// sample's (`super::sync_decode::SYNC_STATUS_WORDS`) in push order.
    status_words: u64,
    /// Its samples on the sync decode.
    sync: SyncBatch,
}

impl Chunk {
    /// Writes `image`'s record and its `components`' records into this chunk's tables in
    /// `blob`, after the chunk's earlier ones: the image's first component, output and
    /// pixels rebased to where the chunk stands, the components' planes and IDCT groups
    /// likewise, and their coefficients and quantisation tables moved by `data_base`
    /// words. Counts the image, its components, pixels and `plane_words` in the chunk and
    /// returns where its window lands in the batch output.
    fn place(
        &mut self,
        blob: &mut [u32],
        mut image: ImageDesc,
        components: &[ComponentDesc],
        data_base: u32,
        plane_words: u32,
    ) -> DeviceImage {
        let pixels = u64::from(image.width) * u64::from(image.height);
        image.first_component = self.components as u32;
        image.out_offset = self.out_words as u32;
        image.pixel_start = self.pixels as u32;
        let at = self.blob_start + IMAGE_TABLE + self.images * RECORD_WORDS;
        blob[at..at + RECORD_WORDS].copy_from_slice(bytemuck::cast_slice(&[image]));
        for (i, c) in components.iter().enumerate() {
            let d = ComponentDesc {
                coef_offset: c.coef_offset + data_base,
                quant_offset: c.quant_offset + data_base,
                plane_offset: c.plane_offset + self.plane_words as u32,
                group_start: self.idct as u32,
                ..*c
            };
            self.idct += u64::from(c.groups);
            let at = self.blob_start + COMPONENT_TABLE + (self.components + i) * RECORD_WORDS;
            blob[at..at + RECORD_WORDS].copy_from_slice(bytemuck::cast_slice(&[d]));
        }
        let out = DeviceImage {
            offset: (self.out_base + self.out_words) as u32,
            width: image.width,
            height: image.height,
            origin_x: image.x0,
            origin_y: image.y0,
            full_width: image.full_width,
            full_height: image.full_height,
            scale: image.scale,
        };
        self.images += 1;
        self.components += components.len();
        self.pixels += pixels;
        self.out_words += pixels;
        self.plane_words += u64::from(plane_words);
        out
    }
}

/// A batch's upload for the decode shaders, built on the host and reused batch after
/// batch ([`Self::clear`]).
#[derive(Debug, Clone)]
pub struct DecodeInput {
    blob: Vec<u32>,
    chunks: Vec<Chunk>,
    packed: PackedJpeg,
    max_binding_words: u64,
    /// The open entropy chunk's interval records, written at its end when it closes.
    pending: Vec<IntervalDesc>,
    /// The open entropy chunk's sync batch table, written after its interval records.
    pending_sync: Vec<u32>,
    /// Per image on the device entropy path: its push index and its status words.
    entropy_images: Vec<EntropyImage>,
    /// Images pushed so far.
    pushed: usize,
    /// The word where the chunks end and the appended tables begin, once there are any.
    tables: Option<usize>,
    /// Whether the payloads of samples packed beforehand are left out of the blob.
    defer: bool,
    /// Those left out, in upload order.
    holes: Vec<Hole>,
    /// Their words.
    deferred_words: usize,
}

/// A payload left out of the blob ([`DecodeInput::deferring`]): the `words` words of push
/// `push`'s data belong at upload word `at`. The writer of the upload copies them from the
/// sample itself ([`crate::backend::device::BatchPlan::write_upload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hole {
    /// First word in the upload.
    pub at: usize,
    /// Words.
    pub words: usize,
    /// Which push (0 for the first image pushed into the batch).
    pub push: usize,
}

/// A stretch of the upload ([`DecodeInput::segments`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment<'a> {
    /// Words the blob holds, from upload word `at`.
    Blob {
        /// First word in the upload.
        at: usize,
        /// The words.
        words: &'a [u32],
    },
    /// A payload left out of the blob.
    Payload(Hole),
}

/// An image of the batch on the device entropy path: which push it was and where its
/// intervals' status words are in [`Buffer::EntropyStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntropyImage {
    /// Its position among the images pushed (0 for the first push of the batch).
    pub pushed: usize,
    /// Its status words.
    pub status: std::ops::Range<u64>,
}

impl Default for DecodeInput {
    fn default() -> Self {
        Self::new()
    }
}

impl DecodeInput {
    /// An empty batch whose chunks fit bindings of 128 MiB.
    pub fn new() -> Self {
        DecodeInput {
            blob: Vec::new(),
            chunks: Vec::new(),
            packed: PackedJpeg::default(),
            max_binding_words: DEFAULT_BINDING_BYTES / 4,
            pending: Vec::new(),
            pending_sync: Vec::new(),
            entropy_images: Vec::new(),
            pushed: 0,
            tables: None,
            defer: false,
            holes: Vec::new(),
            deferred_words: 0,
        }
    }

    /// Leaves the data of samples the workers packed ([`Self::push_packed`],
    /// [`Self::push_entropy`]) out of the blob when `on`: the upload is then written from
    /// [`Self::segments`], each payload copied once, straight from its sample (by several
    /// threads at once: [`crate::backend::device::BatchPlan::write_upload`]), rather than
    /// into the blob and again out of it. Off (the default), [`Self::bytes`] is the whole
    /// upload.
    pub fn deferring(mut self, on: bool) -> Self {
        self.defer = on;
        self
    }

    /// Words of the upload: the blob's and the payloads left out of it.
    pub fn upload_words(&self) -> usize {
        self.blob.len() + self.deferred_words
    }

    /// The upload in order: stretches of the blob and the payloads left out of it.
    pub fn segments(&self) -> impl Iterator<Item = Segment<'_>> + '_ {
        let mut blob_at = 0;
        let mut upload_at = 0;
        let mut holes = self.holes.iter();
        let mut next = holes.next();
        let mut hole_due = false;
        std::iter::from_fn(move || loop {
            if hole_due {
                hole_due = false;
                let h = next.copied()?;
                next = holes.next();
                upload_at = h.at + h.words;
                return Some(Segment::Payload(h));
            }
            let until = next.map_or(self.upload_words(), |h| h.at);
            let n = until.saturating_sub(upload_at);
            let words = self.blob.get(blob_at..blob_at + n).unwrap_or(&[]);
            let at = upload_at;
            blob_at += n;
            upload_at = until;
            hole_due = next.is_some();
            if !words.is_empty() {
                return Some(Segment::Blob { at, words });
            }
            next?;
        })
    }

    /// The payloads left out of the blob, in upload order.
    pub fn holes(&self) -> &[Hole] {
        &self.holes
    }

    /// Keeps every chunk's blob, planes and outputs within `bytes` (at least 64 KiB):
    /// for devices with smaller storage bindings, and for tests of the chunking.
    pub fn with_max_binding(mut self, bytes: u64) -> Self {
        self.max_binding_words = binding_words(bytes);
        self
    }

    /// Empties the batch, keeping the allocations.
    pub fn clear(&mut self) {
        self.blob.clear();
        self.chunks.clear();
        self.pending.clear();
        self.pending_sync.clear();
        self.entropy_images.clear();
        self.pushed = 0;
        self.tables = None;
        self.holes.clear();
        self.deferred_words = 0;
    }

    /// The images on the device entropy path and their status words.
    pub fn entropy_images(&self) -> &[EntropyImage] {
        &self.entropy_images
    }

    /// The last chunk on the device entropy path: the buffers' ends are its ends.
    fn last_entropy_chunk(&self) -> Option<&Chunk> {
        self.chunks.iter().rev().find(|c| c.entropy)
    }

    /// Words [`Buffer::Coefficients`] needs.
    pub fn coefficient_words(&self) -> u64 {
        self.last_entropy_chunk()
            .map_or(0, |c| c.coef_base + c.coef_words)
    }

    /// Words [`Buffer::EntropyStatus`] needs.
    pub fn status_words(&self) -> u64 {
        self.last_entropy_chunk()
            .map_or(0, |c| c.status_base + c.status_words)
    }

    /// Words [`Buffer::SyncRecords`] needs (the sync decode's records).
    pub fn sync_record_words(&self) -> u64 {
        self.last_entropy_chunk()
            .map_or(0, |c| c.sync.record_base + c.sync.record_words)
    }

    /// Closes the last chunk: an entropy chunk gets its interval table. Call once every
    /// image is pushed, before [`Self::bytes`] and [`Self::launches`].
    pub fn finish(&mut self) {
        self.close_chunk();
    }

    /// Writes the open entropy chunk's interval table after its data.
    fn close_chunk(&mut self) {
        let Some(c) = self.chunks.last_mut() else {
            return;
        };
        if c.closed {
            return;
        }
        c.closed = true;
        if !c.entropy {
            return;
        }
        let table = (self.blob.len() + self.deferred_words - c.start) as u32;
        let start = c.blob_start;
        let (n, coef_words, most) = (
            c.intervals as u32,
            c.coef_words as u32,
            c.max_interval_blocks,
        );
        self.blob
            .extend_from_slice(bytemuck::cast_slice(&self.pending));
        self.pending.clear();
        // The sync decode's batch table.
        c.sync.table = (self.blob.len() + self.deferred_words - c.start) as u32;
        self.blob.extend_from_slice(&self.pending_sync);
        self.pending_sync.clear();
        let h = &mut self.blob[start..start + 13];
        h[8..11].copy_from_slice(&[n, table, coef_words]);
        h[12] = most;
    }

    /// The byte offset (a multiple of 256) where [`Self::append_table`] places its words.
    pub fn table_offset(&self) -> u64 {
        self.upload_words().next_multiple_of(ALIGN_WORDS) as u64 * 4
    }

    /// Appends `words` after the chunks (and the tables appended before) at
    /// [`Self::table_offset`], which it returns: a table another pass reads from the
    /// upload. It finishes the batch ([`Self::finish`]): no image can be pushed after it
    /// (until [`Self::clear`]).
    pub fn append_table(&mut self, words: &[u32]) -> u64 {
        self.close_chunk();
        let end = self.upload_words();
        self.tables.get_or_insert(end);
        let at = end.next_multiple_of(ALIGN_WORDS);
        self.blob.resize(self.blob.len() + (at - end), 0);
        self.blob.extend_from_slice(words);
        at as u64 * 4
    }

    /// Refuses an image pushed after a table was appended.
    fn open_for_images(&self) -> std::result::Result<(), DecodeError> {
        match self.tables {
            Some(_) => Err(DecodeError::Panicked(
                "an image pushed after DecodeInput::append_table".into(),
            )),
            None => Ok(()),
        }
    }

    /// Samples in the batch.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.images).sum()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The blob: the whole upload (everything the shaders read, to be written to the input
    /// buffer) unless payloads are left out of it ([`Self::deferring`]; then
    /// [`Self::segments`] says where its words go).
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.blob)
    }

    /// Bytes of the upload, payloads left out of the blob included.
    pub fn upload_bytes(&self) -> u64 {
        self.upload_words() as u64 * 4
    }

    /// Words the windows buffer needs (4 bytes each).
    pub fn window_words(&self) -> u64 {
        self.chunks.last().map_or(0, |c| c.out_base + c.out_words)
    }

    /// Plane scratch words the largest chunk needs.
    pub fn plane_words(&self) -> u64 {
        self.chunks.iter().map(|c| c.plane_words).max().unwrap_or(0)
    }

    /// Adds the window `[x0, y0, x1, y1)` of `coeffs` decoded at IDCT scale `1/scale`
    /// (see `pack`; the window is clamped to the scaled image). Errors: what `pack`
    /// refuses, and a window too large for one binding.
    pub fn push_jpeg(
        &mut self,
        coeffs: &Coefficients,
        scale: u32,
        window: [u32; 4],
    ) -> std::result::Result<DeviceImage, DecodeError> {
        let mut packed = std::mem::take(&mut self.packed);
        let r = pack(coeffs, scale, window, &mut packed).and_then(|()| self.append(&packed, false));
        self.packed = packed;
        r
    }

    /// Adds an image decoded on the host (the CPU fallback): its pixels are copied into
    /// the windows as RGBA words. `img.data` must hold `width * height` RGB pixels.
    pub fn push_rgb(&mut self, img: &Image8) -> std::result::Result<DeviceImage, DecodeError> {
        let n = img.width as usize * img.height as usize;
        if img.data.len() != n * 3 || n == 0 {
            return Err(DecodeError::BadHeader(format!(
                "{}x{} image holds {} bytes",
                img.width,
                img.height,
                img.data.len()
            )));
        }
        let mut packed = std::mem::take(&mut self.packed);
        packed.components.clear();
        packed.data.clear();
        packed.plane_words = 0;
        packed.data.extend(
            img.data
                .chunks_exact(3)
                .map(|p| u32::from_le_bytes([p[0], p[1], p[2], 255])),
        );
        packed.image = ImageDesc {
            kind: KIND_PASSTHROUGH,
            x0: img.origin.0,
            y0: img.origin.1,
            width: img.width,
            height: img.height,
            full_width: img.full.0,
            full_height: img.full.1,
            scale: img.scale,
            ..ImageDesc::default()
        };
        let r = self.append(&packed, false);
        self.packed = packed;
        r
    }

    /// Adds an image a worker packed (`crate::decode::jpeg::coeffs::pack`), as
    /// [`Self::push_jpeg`] does after packing. Its data is left out of the blob where
    /// [`Self::deferring`].
    pub fn push_packed(&mut self, p: &PackedJpeg) -> std::result::Result<DeviceImage, DecodeError> {
        self.append(p, self.defer)
    }

    /// Appends `words` of push [`Self::pushed`] to the upload: into the blob, or, when
    /// `defer`, as a hole.
    fn put_data(&mut self, words: &[u32], defer: bool) {
        if defer && !words.is_empty() {
            self.holes.push(Hole {
                at: self.upload_words(),
                words: words.len(),
                push: self.pushed,
            });
            self.deferred_words += words.len();
        } else {
            self.blob.extend_from_slice(words);
        }
    }

    /// Places a packed image in the open chunk, or in a new one when it does not fit.
    fn append(
        &mut self,
        p: &PackedJpeg,
        defer: bool,
    ) -> std::result::Result<DeviceImage, DecodeError> {
        self.open_for_images()?;
        let pixels = u64::from(p.image.width) * u64::from(p.image.height);
        let data = p.data.len() as u64;
        let comps = p.components.len();
        let idct: u64 = p.components.iter().map(|c| u64::from(c.groups)).sum();
        let fits = |c: &Chunk, blob_len: usize| {
            c.images < IMAGES_PER_CHUNK
                && c.components + comps <= COMPONENTS_PER_CHUNK
                && (blob_len - c.start) as u64 + data <= self.max_binding_words
                && c.plane_words + u64::from(p.plane_words) <= self.max_binding_words
                && c.out_words + pixels <= self.max_binding_words
                && c.idct + idct <= u64::from(u32::MAX)
        };
        let need = Need {
            data_words: data,
            plane_words: u64::from(p.plane_words),
            pixels,
            blocks: region_blocks(&p.components),
        };
        if need.exceeds(self.max_binding_words) {
            return Err(DecodeError::Unsupported(
                need.describe(&p.image, self.max_binding_words),
            ));
        }
        let open = self
            .chunks
            .last()
            .is_some_and(|c| !c.entropy && !c.closed && fits(c, self.upload_words()));
        if !open {
            self.open_chunk(false);
        }
        let blob_len = self.upload_words();
        if self
            .chunks
            .last()
            .is_some_and(|c| c.out_base + c.out_words + pixels > u64::from(u32::MAX))
        {
            return Err(DecodeError::Unsupported(
                "batch output exceeds 2^32 words".into(),
            ));
        }
        let Some(chunk) = self.chunks.last_mut() else {
            return Err(DecodeError::Panicked("no open chunk".into()));
        };
        let base = (blob_len - chunk.start) as u32;
        let mut image = p.image;
        if image.kind == KIND_PASSTHROUGH {
            image.src_offset = base;
        }
        let out = chunk.place(&mut self.blob, image, &p.components, base, p.plane_words);
        let chunk = *chunk;
        self.put_data(&p.data, defer);
        self.write_header(&chunk);
        self.pushed += 1;
        Ok(out)
    }

    /// Adds an image whose blocks the device decodes from its restart intervals
    /// (`crate::decode::jpeg::huffman::pack_entropy`'s output): placed in an entropy chunk, its records rebased, its
    /// intervals' status words noted ([`Self::entropy_images`]). Errors: a window too large
    /// for one binding.
    pub fn push_entropy(
        &mut self,
        p: &PackedEntropy,
    ) -> std::result::Result<DeviceImage, DecodeError> {
        self.open_for_images()?;
        let q = &p.packed;
        let pixels = u64::from(q.image.width) * u64::from(q.image.height);
        let data = q.data.len() as u64 + SCAN_WORDS as u64;
        let comps = q.components.len();
        let idct: u64 = q.components.iter().map(|c| u64::from(c.groups)).sum();
        let intervals = p.intervals.len() as u64;
        let max = self.max_binding_words;
        // A sample on the sync decode: its chunk's header, its records' and table's words.
        let sync = p
            .sync
            .and_then(|at| q.data.get(at as usize..at as usize + 2));
        let (records, table) = sync.map_or((0, 0), SyncBatch::need);
        let status_words = if sync.is_some() {
            SYNC_STATUS_WORDS
        } else {
            intervals
        };
        let tables = self.pending_sync.len() as u64 + table;
        // The interval and sync tables are written after the data when the chunk closes.
        let fits = |c: &Chunk, blob_len: usize, pending: usize| {
            c.images < IMAGES_PER_CHUNK
                && c.components + comps <= COMPONENTS_PER_CHUNK
                && (blob_len - c.start) as u64 + data + 8 * (pending as u64 + intervals) + tables
                    <= max
                && c.sync.record_words + records <= max
                && c.status_words + status_words <= max
                && c.plane_words + u64::from(q.plane_words) <= max
                && c.out_words + pixels <= max
                && c.coef_words + p.coef_words <= max
                && c.intervals + intervals <= max
                && c.idct + idct <= u64::from(u32::MAX)
        };
        let need = Need {
            data_words: data + 8 * intervals + table,
            plane_words: u64::from(q.plane_words).max(p.coef_words).max(records),
            pixels,
            blocks: region_blocks(&q.components),
        };
        if need.exceeds(max) {
            return Err(DecodeError::Unsupported(need.describe(&q.image, max)));
        }
        let open = self.chunks.last().is_some_and(|c| {
            c.entropy && !c.closed && fits(c, self.upload_words(), self.pending.len())
        });
        if !open {
            self.open_chunk(true);
        }
        let blob_len = self.upload_words();
        let Some(chunk) = self.chunks.last_mut() else {
            return Err(DecodeError::Panicked("no open chunk".into()));
        };
        if chunk.out_base + chunk.out_words + pixels > u64::from(u32::MAX)
            || chunk.coef_base + chunk.coef_words + p.coef_words > u64::from(u32::MAX)
        {
            return Err(DecodeError::Unsupported(
                "batch output exceeds 2^32 words".into(),
            ));
        }
        let scan_at = (blob_len - chunk.start) as u32;
        let (scan, ivs, components) = p.placed(
            scan_at + SCAN_WORDS as u32,
            scan_at,
            chunk.components as u32,
            chunk.status_words as u32,
            chunk.coef_words as u32,
        );
        let first_status = chunk.status_base + chunk.status_words;
        if let (Some(header), Some(at)) = (sync, p.sync) {
            let e = chunk.sync.add(
                header,
                scan_at + SCAN_WORDS as u32 + at,
                chunk.coef_words as u32,
                chunk.status_words as u32,
            );
            self.pending_sync.extend_from_slice(&e.words());
        }
        // `placed` has rebased the components' coefficients and tables already.
        let out = chunk.place(&mut self.blob, q.image, &components, 0, q.plane_words);
        chunk.coef_words += p.coef_words;
        chunk.intervals += intervals;
        chunk.status_words += status_words;
        chunk.max_interval_blocks = chunk.max_interval_blocks.max(p.max_interval_blocks());
        let chunk = *chunk;
        self.blob.extend_from_slice(bytemuck::cast_slice(&[scan]));
        self.put_data(&q.data, self.defer);
        self.pending.extend_from_slice(&ivs);
        self.write_header(&chunk);
        // A sync sample's changed words (after its status word) are not its verdict.
        let verdict = if sync.is_some() { 1 } else { intervals };
        self.entropy_images.push(EntropyImage {
            pushed: self.pushed,
            status: first_status..first_status + verdict,
        });
        self.pushed += 1;
        Ok(out)
    }

    fn open_chunk(&mut self, entropy: bool) {
        self.close_chunk();
        let end = self.upload_words();
        let start = end.next_multiple_of(ALIGN_WORDS);
        let blob_start = self.blob.len() + (start - end);
        let out_base = self.chunks.last().map_or(0, |c| {
            (c.out_base + c.out_words).next_multiple_of(ALIGN_WORDS as u64)
        });
        let align = |n: u64| n.next_multiple_of(ALIGN_WORDS as u64);
        let coef_base = align(self.coefficient_words());
        let status_base = align(self.status_words());
        let sync = SyncBatch {
            record_base: align(self.sync_record_words()),
            ..SyncBatch::default()
        };
        self.blob.resize(blob_start + DATA_START, 0);
        let chunk = Chunk {
            start,
            blob_start,
            out_base,
            entropy,
            coef_base,
            status_base,
            sync,
            ..Chunk::default()
        };
        self.chunks.push(chunk);
        self.write_header(&chunk);
    }

    fn write_header(&mut self, c: &Chunk) {
        let h = &mut self.blob[c.blob_start..c.blob_start + 8];
        h.copy_from_slice(&[
            c.images as u32,
            c.components as u32,
            IMAGE_TABLE as u32,
            COMPONENT_TABLE as u32,
            c.idct as u32,
            c.pixels as u32,
            c.plane_words as u32,
            c.out_words as u32,
        ]);
        self.blob[c.blob_start + H_FULL_BLOCKS] = u32::from(c.entropy);
    }

    /// Word range of chunk `i` in the blob.
    fn chunk_words(&self, i: usize) -> (usize, usize) {
        let start = self.chunks[i].start;
        let last = self.tables.unwrap_or(self.upload_words());
        let end = self.chunks.get(i + 1).map_or(last, |c| c.start);
        (start, end)
    }

    /// The launches that decode the batch: per chunk the IDCT into [`Buffer::Planes`]
    /// ([`Self::plane_words`] words), then colour conversion into [`Buffer::Windows`]
    /// ([`Self::window_words`] words), reading [`Buffer::DecodeInput`] ([`Self::bytes`]).
    /// No binding exceeds `max_binding` bytes and no grid `per_dim` workgroups along a
    /// dimension ([`crate::Error::Device`] otherwise).
    pub fn launches(&self, max_binding: u64, per_dim: u64) -> Result<Vec<Launch>> {
        let (mut entropy, rest) = self.planned(max_binding, per_dim)?;
        entropy.extend(rest);
        Ok(entropy)
    }

    /// [`Self::launches`] in two parts: the `huffman` launches of the entropy chunks
    /// (into [`Buffer::Coefficients`] and [`Buffer::EntropyStatus`]), which must all run
    /// (and their status be read, where the caller checks it) before the rest: per chunk
    /// the IDCT, then colour conversion.
    pub fn planned(&self, max_binding: u64, per_dim: u64) -> Result<(Vec<Launch>, Vec<Launch>)> {
        if self.chunks.last().is_some_and(|c| c.entropy && !c.closed) {
            return Err(crate::Error::internal(
                "a decode input planned before DecodeInput::finish",
            ));
        }
        let mut entropy = Vec::new();
        let mut out = Vec::with_capacity(self.chunks.len() * 2);
        for (i, c) in self.chunks.iter().enumerate() {
            let (start, end) = self.chunk_words(i);
            let blob = Binding {
                buffer: Buffer::DecodeInput,
                offset: start as u64 * 4,
                size: (end - start) as u64 * 4,
            };
            let planes = Binding {
                buffer: Buffer::Planes,
                offset: 0,
                size: (c.plane_words * 4).max(4),
            };
            let windows = Binding {
                buffer: Buffer::Windows,
                offset: c.out_base * 4,
                size: (c.out_words * 4).max(4),
            };
            let coefs = Binding {
                buffer: Buffer::Coefficients,
                offset: c.coef_base * 4,
                size: (c.coef_words * 4).max(4),
            };
            let status = Binding {
                buffer: Buffer::EntropyStatus,
                offset: c.status_base * 4,
                size: (c.status_words * 4).max(4),
            };
            if let Some(s) = [
                blob.size,
                planes.size,
                windows.size,
                coefs.size,
                status.size,
            ]
            .into_iter()
            .find(|&s| s > max_binding)
            {
                return Err(DeviceError::Binding {
                    what: "a decode chunk (DecodeInput::with_max_binding splits them)",
                    bytes: s,
                    max: max_binding,
                }
                .into());
            }
            // `kernel` over `items` invocations, bound to `bindings`.
            let launch = |kernel: Kernel, items: u64, bindings: Vec<Binding>| {
                let groups = grid(items, kernel.workgroup(), per_dim).ok_or(DeviceError::Grid {
                    what: "a decode chunk",
                    workgroups: items.div_ceil(u64::from(kernel.workgroup())),
                    per_dim,
                })?;
                Ok::<_, DeviceError>(Launch {
                    kernel,
                    grid: groups,
                    bindings,
                    params: Default::default(),
                })
            };
            if c.entropy && c.intervals > 0 {
                entropy.push(launch(
                    Kernel::Huffman,
                    c.intervals,
                    vec![blob, coefs, status],
                )?);
            }
            if c.entropy {
                let sync = super::sync_decode::launches(&c.sync, [blob, coefs, status], per_dim)?;
                entropy.extend(sync);
            }
            if c.idct > 0 {
                // Blocks from the chunk itself (host-decoded coefficients) or from what the
                // huffman pass decoded.
                let blocks = if c.entropy { coefs } else { blob };
                out.push(launch(Kernel::Idct, c.idct, vec![blob, planes, blocks])?);
            }
            out.push(launch(
                Kernel::Color,
                c.pixels,
                vec![blob, planes, windows],
            )?);
        }
        Ok((entropy, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::jpeg::coeffs::zero_coefficients;

    #[test]
    fn what_a_binding_cannot_hold_is_refused_up_front_naming_its_window() {
        let max = 1u64 << 20;
        // 2400x2400 gray at 1/4: a 300x300 window (352 KiB of output) of 151x151 blocks
        // (the window's 150x150 and one iMCU more), 13 words each in the layout of size
        // 2: 1.1 MiB of coefficients, more than a 1 MiB binding holds.
        let coeffs = zero_coefficients(2400, 2400, &[(1, 1)]);
        let why = jpeg_binding_refusal(&coeffs, 4, [0, 0, 300, 300], max)
            .unwrap()
            .expect("refused");
        assert!(
            why.contains("300x300 window at (0, 0) of the 600x600 image at IDCT scale 1/4")
                && why.contains("1200x1200 stored pixels, 22801 coefficient blocks")
                && why.contains(&format!(
                    "{} bytes of input",
                    4 * (DATA_START + 32 + 13 * 22801)
                ))
                && why.contains("a GPU binding holds 1048576 bytes"),
            "{why}"
        );
        let mut input = DecodeInput::new().with_max_binding(max);
        let pushed = input.push_jpeg(&coeffs, 4, [0, 0, 300, 300]).unwrap_err();
        assert_eq!(pushed, DecodeError::Unsupported(why));
        // A quarter of it fits, and is taken.
        assert_eq!(
            jpeg_binding_refusal(&coeffs, 4, [0, 0, 150, 150], max).unwrap(),
            None
        );
        assert!(input.push_jpeg(&coeffs, 4, [0, 0, 150, 150]).is_ok());
        // Host pixels: a window whose pixels and the chunk's tables overflow.
        let side = 512;
        let img = Image8::new(side, side, vec![0; (side * side * 3) as usize]);
        let why = rgb_binding_refusal(&img, max).expect("refused");
        assert!(
            why.contains("a 512x512 window decoded on the host"),
            "{why}"
        );
        assert_eq!(input.push_rgb(&img), Err(DecodeError::Unsupported(why)));
    }
}
