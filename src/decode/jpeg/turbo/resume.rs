//! Entry points into a single-scan JPEG's Huffman-coded data: the entropy decoder's state
//! at the start of every MCU row, recorded by a decode that reads the whole file, so that
//! a later decode of a window starts entropy decoding at the window's first row instead
//! of the image's, and leaves each row at the window's last column instead of at the
//! image's right edge.
//!
//! Without restart markers, a JPEG's entropy-coded data can only be read from its start:
//! each block's DC coefficient is coded as the difference from the one before, and the
//! codes are of variable length. libjpeg therefore Huffman-decodes, and drops, every row
//! above a window it skips (`jpeg_skip_scanlines`) and every block right of a window it
//! crops (`jpeg_crop_scanline`); that is most of what a crop costs beyond its own pixels.
//! The state that decoding carries from one MCU to the next is small: the position in
//! the data, the bits already fetched from it, and the last DC value of each component.
//! Recorded once per MCU row (24 bytes), it lets a decode jump: the Huffman decoding of
//! the MCUs libjpeg would drop is not done, and at the first MCU it keeps the state
//! recorded there is put back. The coefficients it decodes are the same, so the pixels
//! are those of a decode from the start, bit for bit.
//!
//! Written here because libjpeg has no interface for it: the state lives in its private
//! Huffman decoder (`jdhuff.c`'s `huff_entropy_decoder`) and in fields the Rust binding
//! keeps private. [`Tail`], [`Huffman`] and [`Master`] mirror those layouts, for each
//! libjpeg build a binary may link ([`Build`]: the one `mozjpeg-sys` vendors, pinned by
//! the lock file, and libjpeg-turbo 3.1 in the test binaries); the constant assertions
//! below check [`Tail`] against every public field around it, [`Hook::install`] checks
//! the others against the state libjpeg sets at a scan's start, and `tests` check the
//! pixels.
//! The hook is libjpeg's own `decode_mcu` entry of the entropy decoder, which both the
//! single-pass coefficient controller and `jpeg_skip_scanlines` call, MCU by MCU, in the
//! order of the data.

use std::ffi::{c_int, c_uint, c_void};
use std::mem::offset_of;

use mozjpeg_sys as ffi;

/// The entropy decoder's state at the start of one MCU row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RowStart {
    /// The bits fetched from the data and not yet used (the low `bits` of them count).
    buffer: u64,
    /// Where the data is read next: an offset into the file.
    offset: u32,
    /// The last DC value of each component of the scan.
    dc: [i16; 4],
    /// How many of `buffer`'s bits are still to be used.
    bits: u8,
    /// The marker the decoder has met in the data, if it has (0 when not).
    marker: u8,
}

/// Where each MCU row of a file's single scan starts, and where the scan ends, recorded
/// by a whole decode of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowIndex {
    rows: Box<[RowStart]>,
    mcus_per_row: u32,
    file_len: u32,
}

impl RowIndex {
    /// An index of `rows` MCU rows, for tests of what holds indexes.
    #[cfg(test)]
    pub(crate) fn of_rows(rows: usize) -> RowIndex {
        let start = RowStart {
            buffer: 0,
            offset: 0,
            dc: [0; 4],
            bits: 0,
            marker: 0,
        };
        RowIndex {
            rows: vec![start; rows + 1].into_boxed_slice(),
            mcus_per_row: 1,
            file_len: 0,
        }
    }

    /// The heap bytes it holds.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.rows) + std::mem::size_of::<Self>()
    }
}

/// What a decode does with a file's [`RowIndex`].
pub(crate) enum Rows<'a> {
    /// Nothing: decode from the start.
    Plain,
    /// Record it, into the slot, when the decode reads every row of a file it can index
    /// (a single Huffman-coded scan without restart markers); the slot is left as it is
    /// otherwise.
    Record(&'a mut Option<RowIndex>),
    /// Jump with it where it fits the file, or decode from the start where it does not.
    Resume(&'a RowIndex),
}

/// The fields of libjpeg's `jpeg_decompress_struct` from `comp_info` on, most of which
/// the binding keeps private (the scan's geometry, the restart interval, the modules).
#[repr(C)]
#[allow(non_snake_case, dead_code)]
struct Tail {
    comp_info: *mut c_void,
    progressive_mode: c_int,
    arith_code: c_int,
    arith_dc_L: [u8; 16],
    arith_dc_U: [u8; 16],
    arith_ac_K: [u8; 16],
    restart_interval: c_uint,
    saw_JFIF_marker: c_int,
    JFIF_major_version: u8,
    JFIF_minor_version: u8,
    density_unit: u8,
    X_density: u16,
    Y_density: u16,
    saw_Adobe_marker: c_int,
    Adobe_transform: u8,
    CCIR601_sampling: c_int,
    marker_list: *mut c_void,
    max_h_samp_factor: c_int,
    max_v_samp_factor: c_int,
    min_DCT_scaled_size: c_int,
    total_iMCU_rows: c_uint,
    sample_range_limit: *mut c_void,
    comps_in_scan: c_int,
    cur_comp_info: [*mut c_void; 4],
    MCUs_per_row: c_uint,
    MCU_rows_in_scan: c_uint,
    blocks_in_MCU: c_int,
    MCU_membership: [c_int; 10],
    Ss: c_int,
    Se: c_int,
    Ah: c_int,
    Al: c_int,
    unread_marker: c_int,
    master: *mut c_void,
    main: *mut c_void,
    coef: *mut c_void,
    post: *mut c_void,
    inputctl: *mut c_void,
    marker: *mut c_void,
    entropy: *mut c_void,
    idct: *mut c_void,
    upsample: *mut c_void,
    cconvert: *mut c_void,
    cquantize: *mut c_void,
}

type Cinfo = ffi::jpeg_decompress_struct;
const TAIL_AT: usize = offset_of!(Cinfo, comp_info);
// The mirror agrees with the binding on every public field it shares, and on the size.
const _: () = {
    assert!(offset_of!(Tail, density_unit) == offset_of!(Cinfo, density_unit) - TAIL_AT);
    assert!(offset_of!(Tail, X_density) == offset_of!(Cinfo, X_density) - TAIL_AT);
    assert!(offset_of!(Tail, Y_density) == offset_of!(Cinfo, Y_density) - TAIL_AT);
    assert!(offset_of!(Tail, marker_list) == offset_of!(Cinfo, marker_list) - TAIL_AT);
    assert!(offset_of!(Tail, max_h_samp_factor) == offset_of!(Cinfo, max_h_samp_factor) - TAIL_AT);
    assert!(offset_of!(Tail, max_v_samp_factor) == offset_of!(Cinfo, max_v_samp_factor) - TAIL_AT);
    assert!(TAIL_AT + std::mem::size_of::<Tail>() == std::mem::size_of::<Cinfo>());
};

/// libjpeg's `decode_mcu`: decodes one MCU into the blocks `data` points to (drops it
/// when null); false when the data source suspends.
type DecodeMcu = unsafe extern "C-unwind" fn(*mut Cinfo, *mut ffi::JBLOCKROW) -> c_int;

/// A libjpeg build whose private layouts are mirrored: the public part of its entropy
/// decoder and what its `jpeg_decomp_master` holds before the crop's columns. Two builds
/// can be linked: the one `mozjpeg-sys` vendors (libjpeg-turbo 2.1's decoder), which the
/// library and its binaries use, and libjpeg-turbo 3.1, which `turbojpeg-sys` (a
/// dev-dependency, the decode benchmark's peer and the tests' encoder) builds and which
/// then provides every libjpeg symbol of the test binaries. They are told apart by the
/// size of their message tables, then checked against the state libjpeg sets at the
/// start of a scan ([`Hook::install`]); another build is not hooked.
trait Build: 'static {
    /// `jpeg_error_mgr::last_jpeg_message` as `jpeg_std_error` sets it.
    const LAST_MESSAGE: c_int;
    /// `struct jpeg_entropy_decoder`.
    type Public;
    /// What `jpeg_decomp_master` holds between `is_dummy_pass` and `first_iMCU_col`.
    type BeforeCrop;
    fn decode_mcu(p: &mut Self::Public) -> &mut Option<DecodeMcu>;
    fn insufficient_data(p: &mut Self::Public) -> &mut c_int;
}

/// The build `mozjpeg-sys` vendors.
struct Vendored;

/// libjpeg-turbo 3.1, built by `turbojpeg-sys`.
struct Turbo31;

#[repr(C)]
struct Public62 {
    start_pass: *mut c_void,
    decode_mcu: Option<DecodeMcu>,
    insufficient_data: c_int,
}

#[repr(C)]
struct Public31 {
    start_pass: *mut c_void,
    decode_mcu: Option<DecodeMcu>,
    decode_mcus: *mut c_void,
    process_restart: *mut c_void,
    insufficient_data: c_int,
}

impl Build for Vendored {
    const LAST_MESSAGE: c_int = 131;
    type Public = Public62;
    type BeforeCrop = ();
    fn decode_mcu(p: &mut Public62) -> &mut Option<DecodeMcu> {
        &mut p.decode_mcu
    }
    fn insufficient_data(p: &mut Public62) -> &mut c_int {
        &mut p.insufficient_data
    }
}

impl Build for Turbo31 {
    const LAST_MESSAGE: c_int = 129;
    type Public = Public31;
    /// `lossless`.
    type BeforeCrop = c_int;
    fn decode_mcu(p: &mut Public31) -> &mut Option<DecodeMcu> {
        &mut p.decode_mcu
    }
    fn insufficient_data(p: &mut Public31) -> &mut c_int {
        &mut p.insufficient_data
    }
}

/// The start of libjpeg's `jpeg_decomp_master` (`jpegint.h`), to the crop's iMCU columns.
#[repr(C)]
#[allow(dead_code)]
struct Master<B: Build> {
    prepare_for_output_pass: *mut c_void,
    finish_output_pass: *mut c_void,
    is_dummy_pass: c_int,
    before_crop: B::BeforeCrop,
    first_imcu_col: c_uint,
    last_imcu_col: c_uint,
}

/// The start of `jdhuff.c`'s `huff_entropy_decoder`: the public entropy decoder, then the
/// bit reader's and the DC predictors' state at the start of the next MCU.
#[repr(C)]
struct Huffman<B: Build> {
    public: B::Public,
    bitstate: BitState,
    last_dc_val: [c_int; 4],
    restarts_to_go: c_uint,
}

/// `jdhuff.h`'s `bitread_perm_state` (a struct of its own, so padded to 16 bytes).
#[repr(C)]
struct BitState {
    get_buffer: usize,
    bits_left: c_int,
}

/// The decode's state around libjpeg's own `decode_mcu`, reached from the hook through
/// `client_data`.
pub(super) struct Hook<'a> {
    file: &'a [u8],
    real: Option<DecodeMcu>,
    /// The next MCU's number in the scan.
    next: u64,
    mcus_per_row: u64,
    /// The MCUs in the scan.
    mcus: u64,
    mode: Mode<'a>,
}

enum Mode<'a> {
    Off,
    Record { rows: Vec<RowStart>, complete: bool },
    Resume { index: &'a RowIndex, behind: bool },
}

impl<'a> Hook<'a> {
    /// A hook for decoding `file`, not yet installed.
    pub(super) fn new(file: &'a [u8]) -> Self {
        Hook {
            file,
            real: None,
            next: 0,
            mcus_per_row: 0,
            mcus: 0,
            mode: Mode::Off,
        }
    }

    /// Installs the hook for `rows` when the file has the one scan it can index and the
    /// linked libjpeg is a build mirrored here. It stays installed until the
    /// decompressor's image memory is freed (the decode's end); the caller then clears
    /// `client_data`.
    ///
    /// # Safety
    /// `cinfo` must be started (`jpeg_start_decompress`), with no MCU decoded yet, on
    /// `self.file`'s bytes from `jpeg_mem_src`, and `self` must neither move nor be
    /// dropped while libjpeg decodes.
    pub(super) unsafe fn install(&mut self, cinfo: &mut Cinfo, rows: &Rows<'a>) {
        if matches!(rows, Rows::Plain) {
            return;
        }
        // SAFETY: `cinfo` is started (the caller's contract); its error manager is set.
        let last = unsafe { (*cinfo.common.err).last_jpeg_message };
        // SAFETY: passed on from the caller.
        unsafe {
            if last == Vendored::LAST_MESSAGE {
                self.install_for::<Vendored>(cinfo, rows);
            } else if last == Turbo31::LAST_MESSAGE {
                self.install_for::<Turbo31>(cinfo, rows);
            }
        }
    }

    /// # Safety
    /// As [`Hook::install`], `B` the build linked.
    unsafe fn install_for<B: Build>(&mut self, cinfo: &mut Cinfo, rows: &Rows<'a>) {
        // SAFETY: `cinfo` is a started decompressor (the caller's contract), so the tail
        // mirror is its memory, and `entropy` and `master` point to its live modules
        // whenever the checks below pass: a single Huffman-coded scan, decoded by
        // `jdhuff.c`.
        unsafe {
            let t = &*tail(cinfo);
            let single_scan = t.progressive_mode == 0
                && t.arith_code == 0
                && t.restart_interval == 0
                && cinfo.buffered_image == 0
                && t.comps_in_scan == cinfo.num_components
                && (1..=4).contains(&t.comps_in_scan)
                && !t.entropy.is_null()
                && !t.master.is_null();
            if !single_scan || self.file.len() > u32::MAX as usize {
                return;
            }
            let h = &mut *t.entropy.cast::<Huffman<B>>();
            let m = &*t.master.cast::<Master<B>>();
            // What `start_pass_huff_decoder` leaves at a scan's start, and a crop within
            // the row: the mirror fits the decoder.
            let fresh = h.bitstate.get_buffer == 0
                && h.bitstate.bits_left == 0
                && *B::insufficient_data(&mut h.public) == 0
                && h.last_dc_val
                    .iter()
                    .take(t.comps_in_scan as usize)
                    .all(|&v| v == 0)
                && h.restarts_to_go == 0
                && m.first_imcu_col <= m.last_imcu_col
                && m.last_imcu_col < t.MCUs_per_row;
            if !fresh {
                return;
            }
            let mcu_rows = u64::from(t.MCU_rows_in_scan);
            self.mcus_per_row = u64::from(t.MCUs_per_row);
            self.mcus = self.mcus_per_row * mcu_rows;
            self.mode = match rows {
                Rows::Plain => return,
                Rows::Record(_) => Mode::Record {
                    rows: Vec::with_capacity(mcu_rows.min(1 << 16) as usize + 1),
                    complete: true,
                },
                Rows::Resume(index) => {
                    let fits = u64::from(index.mcus_per_row) == self.mcus_per_row
                        && index.rows.len() as u64 == mcu_rows + 1
                        && index.file_len as usize == self.file.len();
                    if !fits {
                        return;
                    }
                    Mode::Resume {
                        index,
                        behind: false,
                    }
                }
            };
            let decode_mcu = B::decode_mcu(&mut h.public);
            self.real = *decode_mcu;
            if self.real.is_none() {
                self.mode = Mode::Off;
                return;
            }
            cinfo.common.client_data = (self as *mut Hook).cast();
            *decode_mcu = Some(hooked::<B>);
        }
    }

    /// The index recorded, when the decode read every MCU row of the scan.
    ///
    /// # Safety
    /// `cinfo` must be the decompressor [`Hook::install`] was given, not yet finished.
    pub(super) unsafe fn recorded(&mut self, cinfo: &Cinfo) -> Option<RowIndex> {
        // SAFETY: the caller's contract: the tail mirror is `cinfo`'s memory.
        let mcu_rows = unsafe { (*tail(cinfo)).MCU_rows_in_scan } as usize;
        match std::mem::replace(&mut self.mode, Mode::Off) {
            Mode::Record { rows, complete } if complete && rows.len() == mcu_rows + 1 => {
                Some(RowIndex {
                    rows: rows.into_boxed_slice(),
                    mcus_per_row: u32::try_from(self.mcus_per_row).ok()?,
                    file_len: u32::try_from(self.file.len()).ok()?,
                })
            }
            _ => None,
        }
    }
}

/// The entropy decoder's state now (at the start of an MCU), or `None` when it does not
/// fit a [`RowStart`].
///
/// # Safety
/// `cinfo` must be decoding `file` with the hook for `B` installed.
unsafe fn snapshot<B: Build>(file: &[u8], cinfo: &Cinfo) -> Option<RowStart> {
    // SAFETY: the caller's contract: the tail, its Huffman decoder and the source manager
    // are live, and the source reads `file`.
    unsafe {
        let t = &*tail(cinfo);
        let h = &*t.entropy.cast::<Huffman<B>>();
        let src = &*cinfo.src;
        let offset = src.next_input_byte.offset_from(file.as_ptr());
        // Only the scan's components count; libjpeg leaves the others unset.
        let comps = usize::try_from(t.comps_in_scan).ok()?;
        let mut dc = [0i16; 4];
        for (d, &v) in dc.iter_mut().zip(&h.last_dc_val).take(comps) {
            *d = i16::try_from(v).ok()?;
        }
        Some(RowStart {
            buffer: u64::try_from(h.bitstate.get_buffer).ok()?,
            offset: u32::try_from(offset).ok()?,
            dc,
            bits: u8::try_from(h.bitstate.bits_left)
                .ok()
                .filter(|&b| b <= 64)?,
            marker: u8::try_from(t.unread_marker).ok()?,
        })
    }
}

/// Puts back the state recorded at `at`'s MCU row.
///
/// # Safety
/// As [`snapshot`]; `at` was recorded from a file of `file`'s length.
unsafe fn restore<B: Build>(file: &[u8], cinfo: &mut Cinfo, at: &RowStart) {
    let offset = (at.offset as usize).min(file.len());
    // SAFETY: the caller's contract; the offset is within the file, so the source manager
    // points into (or just past) `file`'s bytes.
    unsafe {
        let t = &mut *tail_mut(cinfo);
        let h = &mut *t.entropy.cast::<Huffman<B>>();
        h.bitstate.get_buffer = at.buffer as usize;
        h.bitstate.bits_left = c_int::from(at.bits);
        let comps = usize::try_from(t.comps_in_scan).unwrap_or(0);
        for (v, &d) in h.last_dc_val.iter_mut().zip(&at.dc).take(comps) {
            *v = c_int::from(d);
        }
        *B::insufficient_data(&mut h.public) = 0;
        t.unread_marker = c_int::from(at.marker);
        let src = &mut *cinfo.src;
        src.next_input_byte = file.as_ptr().add(offset);
        src.bytes_in_buffer = file.len() - offset;
    }
}

/// # Safety
/// `cinfo` must be a live decompressor.
unsafe fn tail(cinfo: &Cinfo) -> *const Tail {
    // SAFETY: the mirror starts at `comp_info`'s offset within the struct (checked above).
    unsafe { (cinfo as *const Cinfo).cast::<u8>().add(TAIL_AT).cast() }
}

/// # Safety
/// As [`tail`].
unsafe fn tail_mut(cinfo: &mut Cinfo) -> *mut Tail {
    // SAFETY: as in `tail`.
    unsafe { (cinfo as *mut Cinfo).cast::<u8>().add(TAIL_AT).cast() }
}

/// The `decode_mcu` installed by [`Hook::install`]: records the state at each MCU row's
/// start, or skips the MCUs whose coefficients libjpeg drops (those it discards while
/// skipping rows, and those right of the crop's last iMCU column, exactly the test of
/// `jdcoefct.c`'s single-pass decode) and puts back the recorded state at the next row's
/// start, then calls libjpeg's own.
///
/// # Safety
/// Called by libjpeg only, on a decompressor whose `client_data` points to the
/// [`Hook`] installed for build `B`.
unsafe extern "C-unwind" fn hooked<B: Build>(
    cinfo: *mut Cinfo,
    data: *mut ffi::JBLOCKROW,
) -> c_int {
    // SAFETY: libjpeg passes the live decompressor the hook was installed on, and its
    // `client_data` points to the hook, which outlives the decode (`install`'s contract).
    unsafe {
        let cinfo = &mut *cinfo;
        let hook = &mut *cinfo.common.client_data.cast::<Hook>();
        let Some(real) = hook.real else { return 0 };
        let n = hook.next;
        hook.next += 1;
        let per_row = hook.mcus_per_row.max(1);
        let (row, col) = (n / per_row, n % per_row);
        let file = hook.file;
        match &mut hook.mode {
            Mode::Off => {}
            Mode::Record { rows, complete } => {
                let mut record = |cinfo: &Cinfo| {
                    if *complete {
                        match snapshot::<B>(file, cinfo) {
                            Some(at) => rows.push(at),
                            None => *complete = false,
                        }
                    }
                };
                if col == 0 {
                    record(cinfo);
                }
                let decoded = real(cinfo, data);
                if n + 1 == hook.mcus {
                    // The scan's end: where the markers after it are read.
                    record(cinfo);
                }
                return decoded;
            }
            Mode::Resume { index, behind } => {
                let master = &*(*tail(cinfo)).master.cast::<Master<B>>();
                if data.is_null() || col > u64::from(master.last_imcu_col) {
                    *behind = true;
                    if n + 1 == hook.mcus {
                        // The last MCU skipped: to the scan's end, where a decode that
                        // reaches it goes on to read the markers after it.
                        let Some(end) = index.rows.last() else {
                            return 0;
                        };
                        *behind = false;
                        restore::<B>(file, cinfo, end);
                    }
                    return 1;
                }
                if *behind {
                    // Skipped MCUs always run to a row's end; anything else would be a
                    // libjpeg this mirror does not know: stop the decode (an error the
                    // caller answers with a decode from the start).
                    let Some(at) = index.rows.get(row as usize).filter(|_| col == 0) else {
                        return 0;
                    };
                    *behind = false;
                    restore::<B>(file, cinfo, at);
                }
            }
        }
        real(cinfo, data)
    }
}

#[cfg(test)]
mod tests {
    use super::{RowIndex, Rows};
    use crate::decode::jpeg::turbo::{decode, decode_rows, Hints, Output, Request};
    use crate::decode::DecodeError;

    // A fresh seed per run (printed on failure) and numbers from it.
    use crate::rng::fresh_for_tests as rng;

    /// A JPEG from libjpeg-turbo 3's encoder (a build of its own, not the decoder's) of
    /// `w` x `h` pixels: gradients, flat patches and noise, so rows differ in how many
    /// bits they take.
    fn jpeg(next: &mut impl FnMut(u32) -> u32, w: u32, h: u32) -> Vec<u8> {
        use turbojpeg::Subsamp::*;
        let subsamp = [None, Sub2x1, Sub2x2, Sub1x2, Sub4x1, Gray][next(6) as usize];
        let noise = 1 + next(120);
        let mut rgb = Vec::with_capacity((w * h * 3) as usize);
        for y in 0..h {
            for x in 0..w {
                let flat = (x / 24 + y / 16) % 3 == 0;
                for c in 0..3u32 {
                    let v = if flat {
                        40 * c
                    } else {
                        (x * (c + 1) + y * (3 - c)) % 256 + next(noise)
                    };
                    rgb.push(v.min(255) as u8);
                }
            }
        }
        let image = turbojpeg::Image {
            pixels: &rgb[..],
            width: w as usize,
            pitch: (w * 3) as usize,
            height: h as usize,
            format: turbojpeg::PixelFormat::RGB,
        };
        let mut c = turbojpeg::Compressor::new().expect("compressor");
        c.set_quality(30 + next(71) as i32).expect("quality");
        c.set_subsamp(subsamp).expect("subsampling");
        c.compress_to_vec(image).expect("encode")
    }

    fn run(bytes: &[u8], req: &Request, rows: Rows<'_>) -> Result<(Output, Vec<u8>), DecodeError> {
        let info = crate::decode::jpeg::markers::peek(bytes)?;
        let mut out = Vec::new();
        let (o, _) = decode_rows(bytes, req, &Hints::of(bytes, &info), &mut out, rows)?;
        Ok((o, out))
    }

    fn whole(strict: bool) -> Request {
        Request {
            scale: 1,
            window: None,
            strict,
            to_end: false,
        }
    }

    /// The index of `bytes`, recorded by a whole decode; checked against the index a
    /// windowed decode read on to the end records (the pipeline's first crop).
    fn index_of(bytes: &[u8], next: &mut impl FnMut(u32) -> u32) -> Option<RowIndex> {
        let mut index = None;
        run(bytes, &whole(false), Rows::Record(&mut index)).ok()?;
        let (o, _) = run(bytes, &whole(false), Rows::Plain).ok()?;
        let (w, h) = (o.full_width, o.full_height);
        let y0 = next(h);
        let req = Request {
            window: Some([next(w), y0, w, y0 + 1 + next(h - y0)]),
            to_end: true,
            ..whole(true)
        };
        let mut again = None;
        if run(bytes, &req, Rows::Record(&mut again)).is_ok() {
            assert_eq!(
                index, again,
                "a windowed decode read to the end records the same"
            );
        }
        index
    }

    /// Windows decoded with a file's row index are the windows decoded from the start:
    /// the same pixels, bit for bit, and the same geometry, at every scale, on fresh
    /// random JPEGs of every chroma subsampling and on the bundled ones.
    #[test]
    fn a_window_resumed_from_the_index_is_the_window_decoded_from_the_start() {
        let (seed, mut next) = rng();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .expect("test JPEGs")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
            .map(|p| (p.display().to_string(), std::fs::read(&p).expect("read")))
            .collect();
        for i in 0..16 {
            let (w, h) = (1 + next(700), 1 + next(500));
            files.push((format!("random {i} ({w}x{h})"), jpeg(&mut next, w, h)));
        }
        let mut indexed = 0;
        for (name, bytes) in &files {
            let Some(index) = index_of(bytes, &mut next) else {
                assert!(
                    !name.starts_with("random"),
                    "seed {seed}: {name} not indexed"
                );
                continue;
            };
            indexed += 1;
            for case in 0..40 {
                let scale = [1, 2, 4, 8][next(4) as usize];
                let Ok((o, _)) = run(
                    bytes,
                    &Request {
                        scale,
                        ..whole(false)
                    },
                    Rows::Plain,
                ) else {
                    continue;
                };
                let (w, h) = (o.full_width, o.full_height);
                let (x0, y0) = (next(w), next(h));
                let req = Request {
                    scale,
                    window: Some([x0, y0, x0 + 1 + next(w - x0), y0 + 1 + next(h - y0)]),
                    strict: next(2) == 0,
                    to_end: false,
                };
                let plain = run(bytes, &req, Rows::Plain);
                let resumed = run(bytes, &req, Rows::Resume(&index));
                assert!(
                    plain.as_ref().ok() == resumed.as_ref().ok(),
                    "seed {seed}: {name}, case {case}: {req:?} differs"
                );
            }
        }
        assert!(indexed >= 16, "seed {seed}: only {indexed} files indexed");
    }

    /// An index is used only on a file it fits (its MCU rows and columns and its length);
    /// on another, the decode runs from the start.
    #[test]
    fn an_index_that_does_not_fit_the_file_is_not_used() {
        let (seed, mut next) = rng();
        let draw = |next: &mut dyn FnMut(u32) -> u32| {
            let (w, h) = (64 + next(300), 64 + next(300));
            jpeg(&mut |n| next(n), w, h)
        };
        let (a, b) = (draw(&mut next), draw(&mut next));
        let index = index_of(&a, &mut next).expect("indexed");
        let info = crate::decode::jpeg::markers::peek(&b).expect("headers");
        let hints = Hints::of(&b, &info);
        let req = Request {
            window: Some([10, 20, 50, 60]),
            ..whole(true)
        };
        let mut out = Vec::new();
        let plain = decode(&b, &req, &hints, &mut out).map(|(o, _)| (o, out.clone()));
        let other = run(&b, &req, Rows::Resume(&index));
        assert!(plain.ok() == other.ok(), "seed {seed}");
    }
}
