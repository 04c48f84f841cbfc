//! libjpeg-turbo's decoder (the build vendored by `mozjpeg-sys`) behind a safe wrapper:
//! the FFI module of the CPU decoder. `unsafe` lives only in FFI and memory modules: here
//! (libjpeg), `pipeline::memory` (the host batch slots), `backend::cuda::memory`
//! (device and pinned memory, launches, raw copies) and `backend::cuda::nvjpeg` (the
//! nvJPEG FFI); the rest of `backend::cuda` only probes for and loads the CUDA libraries
//! and calls `memory`'s `unsafe fn`s, each call with its reason.
//!
//! Why a wrapper of our own over `mozjpeg-sys` rather than a safe crate (`turbojpeg`,
//! `jpeg-decoder`, `zune-jpeg`): the pipeline needs libjpeg-turbo's exact pixels (its
//! accurate integer IDCT and fancy upsampling, the CPU reference every backend is held
//! to), its scaled and cropped decode (`jpeg_crop_scanline`, `jpeg_skip_scanlines`), raw
//! DCT coefficients for the device paths (`jpeg_read_coefficients`), and corrupt-data
//! warnings as errors in strict mode; no safe crate exposes all of these.
//!
//! It decodes at a reduced IDCT scale (1/2, 1/4, 1/8), skips the rows above a window with
//! `jpeg_skip_scanlines`, decodes only the iMCU columns the window needs with
//! `jpeg_crop_scanline`, and stops after the window's last row.
//!
//! libjpeg reports fatal errors through `error_exit`, which must not return. Ours unwinds
//! with [`std::panic::resume_unwind`] (no panic hook, nothing printed) through the C code,
//! which `mozjpeg-sys`'s `unwinding` feature compiles with unwind tables; every entry into
//! libjpeg is wrapped in `catch_unwind` and the error becomes a [`DecodeError`]. This
//! needs `panic = "unwind"` (the default); the crate refuses to build with `abort`.

use std::cell::RefCell;
use std::ffi::{c_int, c_ulong};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use mozjpeg_sys as ffi;

use crate::decode::jpeg::coeffs::{CoeffStatus, Coefficients, ColorModel};
use crate::decode::{DecodeError, DecodeWarning, WarningKind};

/// What to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    /// IDCT scale denominator: 1, 2, 4 or 8.
    pub scale: u32,
    /// `[x0, y0, x1, y1)` in the scaled image; `None` for the whole image.
    pub window: Option<[u32; 4]>,
    /// Refuse damaged data (a [`WarningKind::Damaged`] verdict) instead of delivering it.
    pub strict: bool,
}

/// What was decoded: a window of the scaled image, `channels` bytes per pixel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Output {
    pub width: u32,
    pub height: u32,
    pub x0: u32,
    pub y0: u32,
    pub full_width: u32,
    pub full_height: u32,
    /// 3 (RGB, gray expanded) or 4 (CMYK, as stored).
    pub channels: u32,
}

/// Our error manager: libjpeg's, followed by what we collect. `base` must stay first: the
/// callbacks receive a pointer to it and cast it back to the whole struct.
#[repr(C)]
struct ErrorMgr {
    base: ffi::jpeg_error_mgr,
    seen: Seen,
    /// Set per decode: stop at the first sign of damage (strict decoding).
    stop_on_damage: bool,
    /// Set per decode: the file is arithmetic-coded (its end inside a scan is damage).
    arithmetic: bool,
}

impl ErrorMgr {
    /// A boxed (address-stable) error manager with our callbacks installed.
    fn new_boxed() -> Box<ErrorMgr> {
        // SAFETY: plain C data for which all-zero is the documented starting state
        // before `jpeg_std_error` fills it.
        let mut err = Box::new(ErrorMgr {
            base: unsafe { std::mem::zeroed() },
            seen: Seen::default(),
            stop_on_damage: false,
            arithmetic: false,
        });
        // SAFETY: `err.base` is a valid, boxed (address-stable) error manager.
        unsafe { ffi::jpeg_std_error(&mut err.base) };
        err.base.error_exit = Some(on_error);
        err.base.emit_message = Some(on_message);
        err
    }

    /// Forgets the last run's warnings and sets how this one stops.
    fn reset(&mut self, strict: bool, hints: &Hints) {
        self.seen = Seen::default();
        self.stop_on_damage = strict;
        self.arithmetic = hints.arithmetic;
    }
}

/// The unwind payload of a strict decode stopped at the first damage it met: what the
/// verdict on the whole decode would have been. Stopping there keeps what a damaged
/// file costs proportional to the data it holds: libjpeg would otherwise go on filling
/// every row its header claims (a 44 KB file claiming 13370x13370 pixels is 536 MB of
/// them) only for the result to be refused.
struct Stopped(DecodeWarning);

/// The warnings libjpeg emitted during one decode, by what they mean.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Seen {
    /// `JWRN_EXTRANEOUS_DATA`: the byte count, the marker and the message of each (the
    /// first [`MAX_EXTRANEOUS`]; `extraneous_more` says there were more).
    extraneous: Vec<(u32, u8, String)>,
    extraneous_more: bool,
    /// `JWRN_JPEG_EOF`: the data ran out (libjpeg then inserts an end-of-image marker).
    eof: bool,
    /// `JWRN_HIT_MARKER`: the entropy decoder needed more data than its scan holds.
    hit_marker: bool,
    /// The first warning that means damaged data (every other corrupt-data code).
    damage: Option<String>,
}

/// At most this many runs of extraneous bytes are judged; a file with more is damaged.
const MAX_EXTRANEOUS: usize = 8;

/// At most this many extraneous bytes after a scan's entropy-coded data are taken as
/// padding (some Motion-JPEG encoders and cameras write a few before the end marker);
/// more are taken as the unread tail of a scan whose corrupt data made the Huffman
/// decoder finish early, which is how most corruption shows: libjpeg-turbo's fast
/// Huffman path does not report bad codes.
const TRAILING_PADDING_MAX: u32 = 4;

/// What the decoder knows, after the decode, about the scans it read.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Scans {
    /// Arithmetic-coded: its decoder fills missing data without a warning.
    arithmetic: bool,
    /// Progressive: the DC coefficients of every component were received.
    dc_complete: bool,
    /// Progressive: the first coefficient not refined to its last bit, described.
    unrefined: Option<String>,
    /// Sequential: the scans read cover every component (one interleaved scan).
    sequential_complete: bool,
    /// Whether the file is progressive.
    progressive: bool,
}

/// The unwind payload of a fatal libjpeg error: its message code and text.
struct Fatal {
    code: c_int,
    msg: String,
    /// Raised by a compressor (writing), not a decompressor (reading).
    writing: bool,
}

/// Formats libjpeg's current message.
///
/// # Safety
/// `cinfo.err` must point to a live, initialised `jpeg_error_mgr`.
unsafe fn message(cinfo: &mut ffi::jpeg_common_struct) -> String {
    let mut buf = [0u8; 80];
    // SAFETY: guaranteed by the caller.
    let format = unsafe { (*cinfo.err).format_message };
    if let Some(f) = format {
        // SAFETY: libjpeg writes at most JMSG_LENGTH_MAX (80) bytes into the buffer. The
        // binding declares the parameter as `&[u8; 80]`; a pointer to our own mutable
        // buffer has the same ABI and makes the write sound.
        unsafe {
            let f: unsafe extern "C-unwind" fn(&mut ffi::jpeg_common_struct, *mut u8) =
                std::mem::transmute(f);
            f(cinfo, buf.as_mut_ptr());
        }
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

unsafe extern "C-unwind" fn on_error(cinfo: &mut ffi::jpeg_common_struct) {
    // SAFETY: libjpeg calls this with the cinfo whose `err` we installed.
    let (code, msg) = unsafe { ((*cinfo.err).msg_code, message(cinfo)) };
    let writing = cinfo.is_decompressor == 0;
    resume_unwind(Box::new(Fatal { code, msg, writing }));
}

unsafe extern "C-unwind" fn on_message(cinfo: &mut ffi::jpeg_common_struct, level: c_int) {
    if level >= 0 {
        return; // trace messages
    }
    // SAFETY: `cinfo.err` points to the `base` field of our `ErrorMgr`, its first field
    // in a `#[repr(C)]` struct, so the cast recovers the whole struct; no other reference
    // to it is live while libjpeg runs (`message` reads only `base`, before we borrow).
    unsafe {
        let code = (*cinfo.err).msg_code;
        // Two ints for JWRN_EXTRANEOUS_DATA (count, marker); unused for the others.
        let parm = *(*cinfo.err).msg_parm.i();
        let msg = message(cinfo);
        let mgr = &mut *(cinfo.err as *mut ErrorMgr);
        let seen = &mut mgr.seen;
        match code {
            c if c == ffi::JWRN_EXTRANEOUS_DATA as c_int => {
                if seen.extraneous.len() < MAX_EXTRANEOUS {
                    let run = (parm[0].max(0) as u32, (parm[1] & 0xFF) as u8, msg);
                    seen.extraneous.push(run);
                } else {
                    seen.extraneous_more = true;
                }
            }
            c if c == ffi::JWRN_JPEG_EOF as c_int => seen.eof = true,
            c => {
                if c == ffi::JWRN_HIT_MARKER as c_int {
                    seen.hit_marker = true;
                }
                seen.damage.get_or_insert(msg);
            }
        }
        if mgr.stop_on_damage {
            if let Some(w) = damage_so_far(&mgr.seen, mgr.arithmetic) {
                // Unwinds as `error_exit` does; libjpeg's own TJFLAG_STOPONWARNING stops
                // from this callback the same way.
                resume_unwind(Box::new(Stopped(w)));
            }
        }
    }
}

/// The damage libjpeg reported, as the verdict states it (`None` when it reported none).
fn damage_warning(seen: &Seen) -> Option<DecodeWarning> {
    let m = seen.damage.as_ref()?;
    let m = if seen.eof && seen.hit_marker {
        format!("Premature end of JPEG file inside a scan's entropy-coded data ({m})")
    } else {
        m.clone()
    };
    Some(DecodeWarning::new(WarningKind::Damaged, m))
}

/// What is known to be damage while the decode still runs: a damage warning, or the end
/// of an arithmetic-coded file's data (where it ends is unknown, see [`eof_warning`]).
/// The verdict on the whole decode is then this warning, whatever comes after.
fn damage_so_far(seen: &Seen, arithmetic: bool) -> Option<DecodeWarning> {
    damage_warning(seen).or_else(|| {
        (seen.eof && arithmetic).then(|| {
            eof_warning(&Scans {
                arithmetic: true,
                dc_complete: false,
                unrefined: None,
                sequential_complete: false,
                progressive: false,
            })
        })
    })
}

/// The verdict on one decode: the warning to attach to the image (`None` when libjpeg
/// warned of nothing). See the module docs of [`crate::decode::jpeg`] for the rules.
fn verdict(seen: &Seen, scans: &Scans, bytes: &[u8]) -> Option<DecodeWarning> {
    if let Some(w) = damage_warning(seen) {
        return Some(w);
    }
    // Every fault found is a candidate; the most severe wins (the first of equals), so a
    // harmless one never hides damage.
    let candidates = [
        seen.eof.then(|| eof_warning(scans)),
        extraneous_warning(seen, bytes),
        scans
            .unrefined
            .as_ref()
            .filter(|_| scans.progressive)
            .map(|u| {
                DecodeWarning::new(
                    WarningKind::Incomplete,
                    format!("progressive JPEG without its last refinement scans ({u})"),
                )
            }),
    ];
    candidates
        .into_iter()
        .flatten()
        .fold(None, |best, w| match best {
            Some(b) if b.kind >= w.kind => Some(b),
            _ => Some(w),
        })
}

/// The verdict on data that ran out (no `HIT_MARKER`): at a scan boundary, or not.
fn eof_warning(scans: &Scans) -> DecodeWarning {
    let at_boundary = !scans.arithmetic
        && if scans.progressive {
            scans.dc_complete
        } else {
            scans.sequential_complete
        };
    if at_boundary {
        DecodeWarning::new(
            WarningKind::Incomplete,
            "Premature end of JPEG file, after a complete scan (no end-of-image marker)",
        )
    } else if scans.arithmetic {
        DecodeWarning::new(
            WarningKind::Damaged,
            "Premature end of JPEG file in arithmetic-coded data (where it ends is unknown)",
        )
    } else {
        DecodeWarning::new(
            WarningKind::Damaged,
            "Premature end of JPEG file before every component had a scan",
        )
    }
}

/// The verdict on libjpeg's extraneous-bytes warnings: between segments (found in the
/// file) or a few after a scan they are harmless; more after a scan, or too many runs,
/// mean the decoder stopped short of the data.
fn extraneous_warning(seen: &Seen, bytes: &[u8]) -> Option<DecodeWarning> {
    let (_, _, first) = seen.extraneous.first()?;
    let gaps = crate::decode::jpeg::markers::segment_gaps(bytes);
    for (n, marker, m) in &seen.extraneous {
        if !gaps.contains(&(*n as usize, *marker)) && *n > TRAILING_PADDING_MAX {
            return Some(DecodeWarning::new(
                WarningKind::Damaged,
                format!(
                    "{m}: after a scan's entropy-coded data, the decoder stopped short \
                     of them, as corrupt data makes it do"
                ),
            ));
        }
    }
    if seen.extraneous_more {
        return Some(DecodeWarning::new(
            WarningKind::Damaged,
            format!("more than {MAX_EXTRANEOUS} runs of extraneous bytes"),
        ));
    }
    Some(DecodeWarning::new(WarningKind::Extraneous, first.clone()))
}

/// Clears `cinfo.coef_bits` before a decode. libjpeg sets it only when it meets a
/// progressive file, allocates it from the image's memory pool (freed by
/// `jpeg_finish_decompress` and `jpeg_abort_decompress`) and never clears it, so on a
/// reused decompressor it would still point at a freed array when the next file is not
/// progressive.
fn forget_progression(cinfo: &mut ffi::jpeg_decompress_struct) {
    cinfo.coef_bits = std::ptr::null_mut();
}

/// Reads what [`Scans`] needs from a decompressor that has read its input.
///
/// # Safety
/// `cinfo` must have read its headers (`jpeg_read_header`) in this decode, after
/// [`forget_progression`], and the image's memory must not have been freed since (no
/// `jpeg_finish_decompress`, `jpeg_abort_decompress` or reset): `coef_bits` lives there.
unsafe fn scans_of(cinfo: &ffi::jpeg_decompress_struct, hints: &Hints) -> Scans {
    let n = usize::try_from(cinfo.num_components).unwrap_or(0);
    let mut scans = Scans {
        arithmetic: hints.arithmetic,
        dc_complete: false,
        unrefined: None,
        sequential_complete: cinfo.input_scan_number == 1
            && usize::from(hints.first_scan_components) == n,
        progressive: !cinfo.coef_bits.is_null(),
    };
    if scans.progressive {
        // SAFETY: non-null in a progressive decode: `num_components` arrays of 64 ints
        // (libjpeg-turbo allocates twice as many; the first half is the current state).
        let bits = unsafe { std::slice::from_raw_parts(cinfo.coef_bits as *const [c_int; 64], n) };
        scans.dc_complete = n > 0 && bits.iter().all(|b| b[0] >= 0);
        scans.unrefined = bits.iter().enumerate().find_map(|(ci, b)| {
            let k = b.iter().position(|&v| v != 0)?;
            Some(if b[k] < 0 {
                format!("component {ci}, coefficient {k} never sent")
            } else {
                format!("component {ci}, coefficient {k} known to bit {}", b[k])
            })
        });
    }
    scans
}

/// One libjpeg decompressor, reused across images on a thread.
struct Decoder {
    cinfo: Box<ffi::jpeg_decompress_struct>,
    err: Box<ErrorMgr>,
}

impl Decoder {
    fn new() -> Option<Decoder> {
        let mut err = ErrorMgr::new_boxed();
        // SAFETY: plain C data for which all-zero is the documented starting state
        // before `jpeg_create_decompress` fills it.
        let mut cinfo: Box<ffi::jpeg_decompress_struct> = Box::new(unsafe { std::mem::zeroed() });
        cinfo.common.err = &mut err.base;
        // SAFETY: `cinfo` is zeroed with its error manager set, as jpeg_create_decompress
        // requires; a failure unwinds into catch_unwind.
        catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_create_decompress(&mut *cinfo)
        }))
        .ok()?;
        Some(Decoder { cinfo, err })
    }

    fn decode(
        &mut self,
        bytes: &[u8],
        req: &Request,
        hints: &Hints,
        out: &mut Vec<u8>,
    ) -> Result<(Output, Option<DecodeWarning>), DecodeError> {
        self.reset(req.strict, hints);
        let cinfo = &mut *self.cinfo;
        forget_progression(cinfo);
        // SAFETY: `cinfo` was created by jpeg_create_decompress and is reset below after
        // every use; `bytes` outlives the call (jpeg_mem_src keeps only a pointer used
        // within it); `out` is sized before libjpeg writes rows into it (see `run`),
        // which also reads the progression state before finishing frees it.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe {
            run(cinfo, bytes, req, hints, out)
        }));
        // SAFETY: returns the decompressor to its idle state, keeping it reusable.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_abort_decompress(cinfo)
        }));
        self.judge(r, req.strict, bytes)
    }

    /// Forgets the last decode's warnings and sets how this one stops.
    fn reset(&mut self, strict: bool, hints: &Hints) {
        self.err.reset(strict, hints);
    }

    /// The result of a decode that may have warned: a damaged file is an error when
    /// `strict`; otherwise the value, with the warning [`verdict`] gives.
    fn judge<T>(
        &mut self,
        r: std::thread::Result<Result<(T, Scans), DecodeError>>,
        strict: bool,
        bytes: &[u8],
    ) -> Result<(T, Option<DecodeWarning>), DecodeError> {
        match r {
            Ok(Ok((t, scans))) => match verdict(&self.err.seen, &scans, bytes) {
                Some(w) if strict && w.kind == WarningKind::Damaged => {
                    Err(DecodeError::Jpeg(format!("corrupt data: {}", w.message)))
                }
                w => Ok((t, w)),
            },
            Ok(Err(e)) => Err(e),
            Err(p) => Err(match p.downcast::<Fatal>() {
                Ok(f) => classify(&f),
                Err(p) => match p.downcast::<Stopped>() {
                    Ok(stop) => DecodeError::Jpeg(format!("corrupt data: {}", stop.0.message)),
                    Err(p) => DecodeError::Panicked(crate::error::panic_message(p.as_ref())),
                },
            }),
        }
    }

    fn read_coefficients(
        &mut self,
        bytes: &[u8],
        strict: bool,
        hints: &Hints,
        out: &mut Coefficients,
    ) -> Result<CoeffStatus, DecodeError> {
        self.reset(strict, hints);
        let cinfo = &mut *self.cinfo;
        forget_progression(cinfo);
        // SAFETY: as in `decode`; `out` is plain Rust data filled by copying; nothing
        // frees the image's memory before `scans_of` (no jpeg_finish_decompress here).
        let r = catch_unwind(AssertUnwindSafe(|| unsafe {
            let status = run_coefficients(cinfo, bytes, out)?;
            Ok((status, scans_of(cinfo, hints)))
        }));
        // SAFETY: returns the decompressor to its idle state, keeping it reusable.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_abort_decompress(cinfo)
        }));
        let (status, warning) = self.judge(r, strict, bytes)?;
        let status = match &warning {
            Some(w) if w.kind == WarningKind::Damaged => {
                CoeffStatus::CpuOnly(format!("corrupt data: {}", w.message))
            }
            _ => status,
        };
        out.warning = warning;
        Ok(status)
    }
}

/// What our own marker scan knows that the verdict needs (libjpeg keeps it private).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hints {
    /// Arithmetic-coded (SOF9-SOF11).
    pub arithmetic: bool,
    /// Components in the first scan (0 when there is none).
    pub first_scan_components: u8,
}

impl Hints {
    /// The hints for `bytes`, whose headers are `info`.
    pub(crate) fn of(bytes: &[u8], info: &crate::decode::ImageInfo) -> Hints {
        Hints {
            arithmetic: info.process == Some(crate::decode::JpegProcess::Arithmetic),
            first_scan_components: crate::decode::jpeg::markers::first_scan_components(bytes)
                .unwrap_or(0),
        }
    }
}

impl Drop for Decoder {
    fn drop(&mut self) {
        let cinfo = &mut *self.cinfo;
        // SAFETY: created by jpeg_create_decompress and not used after this.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_destroy_decompress(cinfo)
        }));
    }
}

/// A fatal libjpeg error as a [`DecodeError`]: by message code, the features this build
/// does not decode are `Unsupported`; everything else is damaged data.
fn classify(f: &Fatal) -> DecodeError {
    let msg = &f.msg;
    match f.code {
        c if c == ffi::JERR_BAD_PRECISION as c_int => {
            DecodeError::Unsupported(format!("12-bit JPEG ({msg})"))
        }
        c if c == ffi::JERR_SOF_UNSUPPORTED as c_int => {
            DecodeError::Unsupported(format!("JPEG process ({msg})"))
        }
        c if c == ffi::JERR_CONVERSION_NOTIMPL as c_int => {
            DecodeError::Unsupported(format!("colour space ({msg})"))
        }
        _ => DecodeError::Jpeg(msg.clone()),
    }
}

/// # Safety
/// `cinfo` must be an idle decompressor created by `jpeg_create_decompress` whose error
/// manager unwinds on fatal errors.
unsafe fn run(
    cinfo: &mut ffi::jpeg_decompress_struct,
    bytes: &[u8],
    req: &Request,
    hints: &Hints,
    out: &mut Vec<u8>,
) -> Result<(Output, Scans), DecodeError> {
    // SAFETY: (whole body) calls follow libjpeg's documented decompression sequence on a
    // valid decompressor; a row pointer handed to jpeg_read_scanlines points to row `r`
    // of `out`, which holds at least `(r + 1) * stride` bytes by then, and each call
    // writes that one row of `stride` bytes.
    unsafe {
        ffi::jpeg_mem_src(cinfo, bytes.as_ptr(), bytes.len() as c_ulong);
        ffi::jpeg_read_header(cinfo, 1);
        let cmyk = matches!(
            cinfo.jpeg_color_space,
            ffi::J_COLOR_SPACE::JCS_CMYK | ffi::J_COLOR_SPACE::JCS_YCCK
        );
        cinfo.out_color_space = if cmyk {
            ffi::J_COLOR_SPACE::JCS_CMYK
        } else {
            ffi::J_COLOR_SPACE::JCS_EXT_RGB
        };
        cinfo.dct_method = ffi::J_DCT_METHOD::JDCT_ISLOW;
        cinfo.do_fancy_upsampling = 1;
        cinfo.scale_num = 1;
        cinfo.scale_denom = req.scale.clamp(1, 8);
        ffi::jpeg_start_decompress(cinfo);
        let (fw, fh) = (cinfo.output_width, cinfo.output_height);
        let [wx0, wy0, wx1, wy1] = req.window.unwrap_or([0, 0, fw, fh]);
        let (wx1, wy1) = (wx1.min(fw), wy1.min(fh));
        let (mut x0, y0) = (wx0.min(wx1), wy0.min(wy1));
        let mut w = wx1 - x0;
        if w == 0 || wy1 == y0 {
            return Err(DecodeError::BadHeader("empty decode window".into()));
        }
        if x0 > 0 || w < fw {
            ffi::jpeg_crop_scanline(cinfo, &mut x0, &mut w);
        }
        let channels = cinfo.output_components as usize;
        let stride = w as usize * channels;
        let rows = (wy1 - y0) as usize;
        // Grown as rows arrive (doubling, so amortised), not sized by the header up front:
        // what a file cut short or damaged costs is what it decoded before it was refused
        // (strict decoding stops at the first damage). Every byte is written by
        // jpeg_read_scanlines below: no need to clear.
        out.truncate(stride * rows);
        if y0 > 0 {
            let skipped = ffi::jpeg_skip_scanlines(cinfo, y0);
            if skipped != y0 {
                return Err(DecodeError::Jpeg(format!(
                    "could skip only {skipped} of {y0} rows"
                )));
            }
        }
        while cinfo.output_scanline < wy1 {
            let r = (cinfo.output_scanline - y0) as usize;
            let need = (r + 1) * stride;
            if out.len() < need {
                let grown = need.max(2 * out.len()).min(stride * rows);
                crate::decode::set_len(out, grown);
            }
            let mut row = [out[r * stride..].as_mut_ptr()];
            if ffi::jpeg_read_scanlines(cinfo, row.as_mut_ptr(), 1) != 1 {
                return Err(DecodeError::Jpeg(
                    "decoder stopped before the last row".into(),
                ));
            }
        }
        // Before finishing, which frees the progression state `scans_of` reads.
        let scans = scans_of(cinfo, hints);
        if wy1 == fh {
            ffi::jpeg_finish_decompress(cinfo);
        }
        let output = Output {
            width: w,
            height: rows as u32,
            x0,
            y0,
            full_width: fw,
            full_height: fh,
            channels: channels as u32,
        };
        Ok((output, scans))
    }
}

thread_local! {
    static DECODER: RefCell<Option<Decoder>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's reusable decompressor, or with a fresh one for a file that
/// would otherwise borrow the tables an earlier file left in it
/// ([`crate::decode::jpeg::markers::borrows_tables`]). Clearing the decompressor's table
/// pointers instead would leak: libjpeg allocates a table from its permanent pool whenever
/// the pointer is null, and frees that pool only when the decompressor is destroyed.
fn with_decoder<R>(
    bytes: &[u8],
    f: impl FnOnce(&mut Decoder) -> Result<R, DecodeError>,
) -> Result<R, DecodeError> {
    if crate::decode::jpeg::markers::borrows_tables(bytes) {
        let mut fresh = Decoder::new().ok_or_else(|| {
            DecodeError::Panicked("libjpeg could not create a decompressor".into())
        })?;
        return f(&mut fresh);
    }
    DECODER.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| DecodeError::Panicked("re-entrant JPEG decode".into()))?;
        if slot.is_none() {
            *slot = Decoder::new();
        }
        let dec = slot.as_mut().ok_or_else(|| {
            DecodeError::Panicked("libjpeg could not create a decompressor".into())
        })?;
        f(dec)
    })
}

/// Decodes with this thread's reusable decompressor.
pub(crate) fn decode(
    bytes: &[u8],
    req: &Request,
    hints: &Hints,
    out: &mut Vec<u8>,
) -> Result<(Output, Option<DecodeWarning>), DecodeError> {
    with_decoder(bytes, |dec| dec.decode(bytes, req, hints, out))
}

/// Entropy-decodes `bytes` (baseline, extended, progressive or arithmetic-coded JPEG; gray,
/// YCbCr, RGB, CMYK or YCCK) into `out`, reusing its allocations, with libjpeg-turbo on
/// this thread's reusable decompressor. Its faults are classified as the CPU decoder's
/// (see [`crate::decode::jpeg`]): with `strict`, damaged data is an error, as
/// [`crate::decode::DecodeOptions::strict`] makes it for the CPU decoder; what was
/// tolerated is left in [`Coefficients::warning`], and damaged data decoded leniently is
/// [`CoeffStatus::CpuOnly`] (libjpeg's decode fills what is missing). Check the pixel limits
/// (`decode::check_limits`) on the headers first: this allocates
/// `width_in_blocks * height_in_blocks` blocks per component.
pub fn read_coefficients(
    bytes: &[u8],
    strict: bool,
    out: &mut Coefficients,
) -> Result<CoeffStatus, DecodeError> {
    // The same checks the CPU decoder makes before libjpeg sees the file.
    let info = crate::decode::jpeg::markers::peek(bytes)?;
    crate::decode::jpeg::markers::jpeg_preflight(&info)?;
    out.clear();
    out.adobe_inverted = info.adobe_transform.is_some();
    let hints = Hints::of(bytes, &info);
    let status = with_decoder(bytes, |dec| {
        dec.read_coefficients(bytes, strict, &hints, out)
    })?;
    if status != CoeffStatus::Ready {
        return Ok(status);
    }
    if let Err(why) = out.check_supported() {
        return Ok(CoeffStatus::CpuOnly(why.to_string()));
    }
    Ok(match beyond_simd_range(out) {
        Some(why) => CoeffStatus::CpuOnly(why),
        None => CoeffStatus::Ready,
    })
}

/// Why the device IDCT would not give the CPU decoder's pixels for these coefficients:
/// the first block no 8-bit encoder writes (see [`super::idct::agrees_with_simd`]), whose
/// samples libjpeg's C code (which the shaders port) and its SIMD code compute differently.
fn beyond_simd_range(c: &Coefficients) -> Option<String> {
    c.components.iter().enumerate().find_map(|(ci, comp)| {
        let at = comp
            .blocks
            .iter()
            .position(|b| !super::idct::agrees_with_simd(b, &comp.quant))?;
        let w = comp.width_in_blocks.max(1) as usize;
        Some(format!(
            "coefficients beyond what an 8-bit encoder writes (component {ci}, block {} of row \
             {}): only the CPU decoder reproduces their pixels",
            at % w,
            at / w
        ))
    })
}

/// # Safety
/// As for [`run`].
unsafe fn run_coefficients(
    cinfo: &mut ffi::jpeg_decompress_struct,
    bytes: &[u8],
    out: &mut Coefficients,
) -> Result<CoeffStatus, DecodeError> {
    // SAFETY: (whole body) calls follow libjpeg's documented transcoding sequence
    // (jpeg_read_header, jpeg_read_coefficients) on a valid decompressor. `comp_info`
    // holds `num_components` entries after jpeg_read_header; `arrays` holds one virtual
    // block array per component, each `height_in_blocks` rows (rounded up) of at least
    // `width_in_blocks` blocks, which access_virt_barray returns one row at a time;
    // `coef_bits`, when not null (progressive files), points to `2 * num_components`
    // arrays of 64 ints (libjpeg-turbo's layout: current and previous scan).
    // `cinfo.common.err` points to the `base` field, first in the `#[repr(C)]`
    // `ErrorMgr`, so the cast recovers the whole struct; libjpeg is not running while we
    // read it.
    unsafe {
        ffi::jpeg_mem_src(cinfo, bytes.as_ptr(), bytes.len() as c_ulong);
        ffi::jpeg_read_header(cinfo, 1);
        let n = usize::try_from(cinfo.num_components).unwrap_or(0);
        out.color = match (cinfo.jpeg_color_space, n) {
            (ffi::J_COLOR_SPACE::JCS_GRAYSCALE, 1) => ColorModel::Gray,
            (ffi::J_COLOR_SPACE::JCS_YCbCr, 3) => ColorModel::YCbCr,
            (ffi::J_COLOR_SPACE::JCS_RGB, 3) => ColorModel::Rgb,
            (ffi::J_COLOR_SPACE::JCS_CMYK, 4) => ColorModel::Cmyk,
            (ffi::J_COLOR_SPACE::JCS_YCCK, 4) => ColorModel::Ycck,
            (space, n) => {
                return Err(DecodeError::Unsupported(format!(
                    "colour space {space:?} with {n} components"
                )))
            }
        };
        out.width = cinfo.image_width;
        out.height = cinfo.image_height;
        let arrays = ffi::jpeg_read_coefficients(cinfo);
        let access = (*cinfo.common.mem).access_virt_barray;
        let (Some(access), false) = (access, arrays.is_null()) else {
            return Err(DecodeError::Jpeg("no coefficient arrays".into()));
        };
        let mgr = &*(cinfo.common.err as *const ErrorMgr);
        if let Some(w) = damage_so_far(&mgr.seen, mgr.arithmetic) {
            // Decoded leniently: only the CPU decoder reproduces what libjpeg fills in, so
            // the coefficients (as many as the header claims) are not copied.
            return Ok(CoeffStatus::CpuOnly(format!("corrupt data: {}", w.message)));
        }
        let comps = std::slice::from_raw_parts(cinfo.comp_info, n);
        // The largest sampling factor over the components, at least 1.
        let max_factor = |f: fn(&ffi::jpeg_component_info) -> c_int| {
            comps.iter().map(f).max().unwrap_or(1).max(1) as u32
        };
        out.max_h = max_factor(|c| c.h_samp_factor);
        out.max_v = max_factor(|c| c.v_samp_factor);
        for (ci, comp) in comps.iter().enumerate() {
            if comp.quant_table.is_null() {
                // libjpeg latches a component's table at its first scan: a component no
                // scan carried. The CPU decoder gives the verdict (a missing scan: the
                // file is damaged) and, leniently, the grey libjpeg fills in.
                return Ok(CoeffStatus::CpuOnly(format!(
                    "component {ci} is in no scan (it has no quantisation table)"
                )));
            }
            let (wib, hib) = (comp.width_in_blocks, comp.height_in_blocks);
            let dst = out.push_component(
                comp.h_samp_factor.max(0) as u32,
                comp.v_samp_factor.max(0) as u32,
                wib,
                hib,
                (*comp.quant_table).quantval,
            );
            dst.blocks.reserve_exact(wib as usize * hib as usize);
            let array = *arrays.add(ci);
            for row in 0..hib {
                let rows = access(&mut cinfo.common, array, row, 1, 0);
                if rows.is_null() || (*rows).is_null() {
                    return Err(DecodeError::Jpeg("coefficient row missing".into()));
                }
                dst.blocks
                    .extend_from_slice(std::slice::from_raw_parts(*rows, wib as usize));
            }
        }
        if !cinfo.coef_bits.is_null() {
            let bits = std::slice::from_raw_parts(cinfo.coef_bits as *const [c_int; 64], n);
            if let Some(why) = smoothing_needed(comps, bits) {
                return Ok(CoeffStatus::CpuOnly(why));
            }
        }
        Ok(CoeffStatus::Ready)
    }
}

/// libjpeg-turbo's `smoothing_ok` (jdcoefct.c) after the last scan: a progressive file
/// whose first AC coefficients are not fully refined is decoded with block smoothing,
/// which the GPU path does not do. Returns the reason when it would be applied.
fn smoothing_needed(comps: &[ffi::jpeg_component_info], bits: &[[c_int; 64]]) -> Option<String> {
    // Natural-order positions of zigzag coefficients 0-9 (DC and the first 9 AC).
    const FIRST: [usize; 10] = [0, 1, 8, 16, 9, 2, 3, 10, 17, 24];
    let mut useful = None;
    for (ci, (comp, bits)) in comps.iter().zip(bits).enumerate() {
        // SAFETY: checked non-null in `run_coefficients`; libjpeg keeps the table alive
        // until the decompressor is reset.
        let q = unsafe { &(*comp.quant_table).quantval };
        if FIRST.iter().any(|&p| q[p] == 0) || bits[0] < 0 {
            return None;
        }
        if useful.is_none() {
            if let Some(k) = (1..10).find(|&k| bits[k] != 0) {
                useful = Some(format!(
                    "progressive JPEG with incomplete refinement (component {ci}, coefficient {k} \
                     known to bit {}): libjpeg smooths its blocks",
                    bits[k]
                ));
            }
        }
    }
    useful
}

// ---------------------------------------------------------------------------------------
// Lossless transcoding (`crate::decode::jpeg::transcode`): coefficients in, coefficients
// out, as jpegtran does, with restart markers, one baseline scan and optimised tables.
// ---------------------------------------------------------------------------------------

/// Why [`transcode`] gave no output.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TranscodeStop {
    /// libjpeg warned reading the input: the verdict on what it read (any kind).
    Warned(DecodeWarning),
    /// A progressive file libjpeg decodes with block smoothing (its refinement is
    /// incomplete): a baseline copy of its coefficients would decode to other pixels.
    Smoothing(String),
    /// A fatal libjpeg error reading the input (or setting up libjpeg).
    Failed(DecodeError),
    /// libjpeg refused to write the coefficients as a baseline file (a coefficient
    /// beyond what 8-bit baseline Huffman coding holds, ...): its message.
    WriteFailed(String),
    /// The output grew past this many bytes.
    TooLarge(usize),
}

/// The unwind payload of an output that outgrew its bound.
struct OutputFull(usize);

/// A destination manager writing into a `Vec` that grows (doubling) up to `max` bytes.
/// `base` must stay first: the callbacks cast `cinfo.dest` back to the whole struct.
#[repr(C)]
struct VecDest {
    base: ffi::jpeg_destination_mgr,
    buf: Vec<u8>,
    /// The first allocation.
    start: usize,
    /// The most bytes the output may hold.
    max: usize,
}

unsafe extern "C-unwind" fn dest_init(cinfo: &mut ffi::jpeg_compress_struct) {
    // SAFETY: `cinfo.dest` points to the `base` field, first in the `#[repr(C)]`
    // `VecDest` we installed, which outlives the compression; nothing else borrows it
    // while libjpeg runs.
    let d = unsafe { &mut *(cinfo.dest as *mut VecDest) };
    d.buf.clear();
    d.buf.resize(d.start.clamp(1, d.max.max(1)), 0);
    d.base.next_output_byte = d.buf.as_mut_ptr();
    d.base.free_in_buffer = d.buf.len();
}

unsafe extern "C-unwind" fn dest_empty(cinfo: &mut ffi::jpeg_compress_struct) -> ffi::boolean {
    // SAFETY: as in `dest_init`.
    let d = unsafe { &mut *(cinfo.dest as *mut VecDest) };
    // libjpeg calls this when the whole buffer is written (`free_in_buffer` is 0).
    let old = d.buf.len();
    let new = old.saturating_mul(2).min(d.max);
    if new <= old {
        resume_unwind(Box::new(OutputFull(d.max)));
    }
    d.buf.resize(new, 0);
    // SAFETY: `old < new == buf.len()`: the pointer stays inside the buffer.
    d.base.next_output_byte = unsafe { d.buf.as_mut_ptr().add(old) };
    d.base.free_in_buffer = new - old;
    1
}

unsafe extern "C-unwind" fn dest_term(cinfo: &mut ffi::jpeg_compress_struct) {
    // SAFETY: as in `dest_init`.
    let d = unsafe { &mut *(cinfo.dest as *mut VecDest) };
    let used = d.buf.len().saturating_sub(d.base.free_in_buffer);
    d.buf.truncate(used);
}

/// A decompressor and a compressor for lossless transcoding, reused across images on a
/// thread (apart from [`Decoder`]'s: this one saves every APPn and COM marker).
struct Transcoder {
    /// The compressor is mozjpeg's (see [`is_mozjpeg`]): its extensions may be set.
    mozjpeg: bool,
    src: Box<ffi::jpeg_decompress_struct>,
    src_err: Box<ErrorMgr>,
    dst: Box<ffi::jpeg_compress_struct>,
    dst_err: Box<ErrorMgr>,
    dest: Box<VecDest>,
}

impl Transcoder {
    fn new() -> Option<Transcoder> {
        let mut src_err = ErrorMgr::new_boxed();
        let mut dst_err = ErrorMgr::new_boxed();
        // SAFETY: plain C data for which all-zero is the documented starting state before
        // `jpeg_create_decompress` / `jpeg_create_compress` fill them.
        let mut src: Box<ffi::jpeg_decompress_struct> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: as above.
        let mut dst: Box<ffi::jpeg_compress_struct> = Box::new(unsafe { std::mem::zeroed() });
        src.common.err = &mut src_err.base;
        dst.common.err = &mut dst_err.base;
        // SAFETY: zeroed structs with their error managers set, as the create functions
        // require; a failure unwinds into catch_unwind. A compressor created only when the
        // decompressor was is destroyed by `Drop` below; if the second creation fails the
        // first object is destroyed here.
        catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_create_decompress(&mut *src)
        }))
        .ok()?;
        // SAFETY: as above.
        if catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_create_compress(&mut *dst)
        }))
        .is_err()
        {
            // SAFETY: created above and not used after this.
            let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
                ffi::jpeg_destroy_decompress(&mut src)
            }));
            return None;
        }
        let dest = Box::new(VecDest {
            base: ffi::jpeg_destination_mgr {
                next_output_byte: std::ptr::null_mut(),
                free_in_buffer: 0,
                init_destination: Some(dest_init),
                empty_output_buffer: Some(dest_empty),
                term_destination: Some(dest_term),
            },
            buf: Vec::new(),
            start: 0,
            max: 0,
        });
        let mozjpeg = is_mozjpeg(&mut dst);
        Some(Transcoder {
            mozjpeg,
            src,
            src_err,
            dst,
            dst_err,
            dest,
        })
    }

    fn transcode(
        &mut self,
        bytes: &[u8],
        hints: &Hints,
        restart_interval: u16,
        max_out: usize,
    ) -> Result<Vec<u8>, TranscodeStop> {
        // Strict: the first damage stops the read (what the input is, is all we judge).
        self.src_err.reset(true, hints);
        self.dst_err.reset(false, hints);
        self.dest.start = bytes.len().saturating_add(64 << 10).min(max_out);
        self.dest.max = max_out;
        self.dest.buf = Vec::new();
        let (src, dst) = (&mut *self.src, &mut *self.dst);
        forget_progression(src);
        src.common.err = &mut self.src_err.base;
        dst.common.err = &mut self.dst_err.base;
        dst.dest = &mut self.dest.base;
        // SAFETY: both objects were created and are idle (aborted after every use below);
        // `bytes` outlives the call; `dst.dest` points to our boxed `VecDest`, which
        // outlives it; `run_transcode` reads the progression state and the warnings before
        // anything frees the source's image memory.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe {
            run_transcode(src, dst, self.mozjpeg, bytes, hints, restart_interval)
        }));
        // SAFETY: returns both objects to their idle state, keeping them reusable (the
        // compressor after the decompressor whose coefficient arrays it may still hold).
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_abort_compress(dst)
        }));
        // SAFETY: as above.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_abort_decompress(src)
        }));
        let out = std::mem::take(&mut self.dest.buf);
        match r {
            Ok(Ok(())) => Ok(out),
            Ok(Err(stop)) => Err(stop),
            Err(p) => Err(match p.downcast::<Fatal>() {
                Ok(f) if f.writing => TranscodeStop::WriteFailed(f.msg),
                Ok(f) => TranscodeStop::Failed(classify(&f)),
                Err(p) => match p.downcast::<Stopped>() {
                    Ok(stop) => TranscodeStop::Warned(stop.0),
                    Err(p) => match p.downcast::<OutputFull>() {
                        Ok(full) => TranscodeStop::TooLarge(full.0),
                        Err(p) => TranscodeStop::Failed(DecodeError::Panicked(
                            crate::error::panic_message(p.as_ref()),
                        )),
                    },
                },
            }),
        }
    }
}

/// Whether `dst`, a new compressor, is mozjpeg's: its `jpeg_set_defaults` chooses
/// progressive scans and optimised tables (mozjpeg's default profile), plain libjpeg's
/// neither. A program that also links another libjpeg (the test binaries link
/// libjpeg-turbo through `turbojpeg-sys`) may have the linker take the `jpeg_*` functions
/// from it and only mozjpeg's own extensions (`jpeg_c_set_int_param`, ...) from mozjpeg;
/// those must then not be called, and need not be (nothing to turn off).
fn is_mozjpeg(dst: &mut ffi::jpeg_compress_struct) -> bool {
    // SAFETY: `dst` is an idle compressor created by jpeg_create_compress; setting the
    // input colour space first is what jpeg_set_defaults requires; the abort returns it to
    // its idle state. A failure unwinds into catch_unwind.
    catch_unwind(AssertUnwindSafe(|| unsafe {
        dst.in_color_space = ffi::J_COLOR_SPACE::JCS_RGB;
        dst.input_components = 3;
        ffi::jpeg_set_defaults(dst);
        let moz = dst.optimize_coding != 0 && dst.num_scans > 0;
        ffi::jpeg_abort_compress(dst);
        moz
    }))
    .unwrap_or(false)
}

impl Drop for Transcoder {
    fn drop(&mut self) {
        // SAFETY: created in `new` and not used after this.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_destroy_compress(&mut self.dst)
        }));
        // SAFETY: as above.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_destroy_decompress(&mut self.src)
        }));
    }
}

/// # Safety
/// `src` and `dst` must be idle objects created by `jpeg_create_decompress` and
/// `jpeg_create_compress` whose error managers unwind on fatal errors, `dst.dest` a live
/// [`VecDest`]; `src` must have had [`forget_progression`] since its last use.
unsafe fn run_transcode(
    src: &mut ffi::jpeg_decompress_struct,
    dst: &mut ffi::jpeg_compress_struct,
    mozjpeg: bool,
    bytes: &[u8],
    hints: &Hints,
    restart_interval: u16,
) -> Result<(), TranscodeStop> {
    // SAFETY: (whole body) calls follow libjpeg's documented transcoding sequence
    // (jpegtran's: jpeg_save_markers, jpeg_read_header, jpeg_read_coefficients,
    // jpeg_copy_critical_parameters, jpeg_write_coefficients, jpeg_write_marker for each
    // saved marker, jpeg_finish_compress) on valid objects. `comp_info` holds
    // `num_components` entries after jpeg_read_header; `coef_bits`, when not null, points
    // to `num_components` (at least) arrays of 64 ints; `marker_list` is a null-terminated
    // list whose `data` holds `data_length` bytes, all in the source's image memory, which
    // lives until jpeg_abort_decompress (after this returns).
    unsafe {
        ffi::jpeg_mem_src(src, bytes.as_ptr(), bytes.len() as c_ulong);
        ffi::jpeg_save_markers(src, 0xFE, 0xFFFF);
        for m in 0..16 {
            ffi::jpeg_save_markers(src, 0xE0 + m, 0xFFFF);
        }
        ffi::jpeg_read_header(src, 1);
        let arrays = ffi::jpeg_read_coefficients(src);
        if arrays.is_null() {
            return Err(TranscodeStop::Failed(DecodeError::Jpeg(
                "no coefficient arrays".into(),
            )));
        }
        let scans = scans_of(src, hints);
        let mgr = &*(src.common.err as *const ErrorMgr);
        // Damage is the reason first; then block smoothing (a progressive file without
        // its last refinement scans is also warned of, as incomplete); then any warning.
        let warning = verdict(&mgr.seen, &scans, bytes);
        if let Some(w) = warning.as_ref().filter(|w| w.kind == WarningKind::Damaged) {
            return Err(TranscodeStop::Warned(w.clone()));
        }
        let n = usize::try_from(src.num_components).unwrap_or(0);
        let comps = std::slice::from_raw_parts(src.comp_info, n);
        if comps.iter().any(|c| c.quant_table.is_null()) {
            return Err(TranscodeStop::Failed(DecodeError::Jpeg(
                "a component has no quantisation table".into(),
            )));
        }
        if !src.coef_bits.is_null() {
            let bits = std::slice::from_raw_parts(src.coef_bits as *const [c_int; 64], n);
            if let Some(why) = smoothing_needed(comps, bits) {
                return Err(TranscodeStop::Smoothing(why));
            }
        }
        if let Some(w) = warning {
            return Err(TranscodeStop::Warned(w));
        }
        // Plain libjpeg defaults (mozjpeg's own would be progressive, trellis-quantised,
        // with scan optimisation): set before jpeg_copy_critical_parameters, which calls
        // jpeg_set_defaults. Only on mozjpeg's compressor: these functions write fields
        // of its private master struct, which another libjpeg's is too small to hold.
        if mozjpeg {
            ffi::jpeg_c_set_int_param(dst, ffi::JINT_COMPRESS_PROFILE, ffi::JCP_FASTEST as c_int);
        }
        ffi::jpeg_copy_critical_parameters(src, dst);
        if mozjpeg {
            ffi::jpeg_c_set_bool_param(dst, ffi::JBOOLEAN_OPTIMIZE_SCANS, 0);
            ffi::jpeg_c_set_bool_param(dst, ffi::JBOOLEAN_TRELLIS_QUANT, 0);
            ffi::jpeg_c_set_bool_param(dst, ffi::JBOOLEAN_TRELLIS_QUANT_DC, 0);
        }
        dst.num_scans = 0;
        dst.scan_info = std::ptr::null();
        dst.arith_code = 0;
        dst.optimize_coding = 1;
        dst.restart_interval = u32::from(restart_interval);
        dst.restart_in_rows = 0;
        // The source's own JFIF and Adobe markers are copied below, as they were: libjpeg
        // writing its own too would duplicate them (or, for CMYK without one, add an
        // Adobe marker that changes how the inks are read).
        dst.write_JFIF_header = 0;
        dst.write_Adobe_marker = 0;
        ffi::jpeg_write_coefficients(dst, arrays);
        let mut m = src.marker_list;
        while !m.is_null() {
            let marker = &*m;
            if !marker.data.is_null() {
                ffi::jpeg_write_marker(
                    dst,
                    c_int::from(marker.marker),
                    marker.data,
                    marker.data_length,
                );
            }
            m = marker.next;
        }
        ffi::jpeg_finish_compress(dst);
        Ok(())
    }
}

thread_local! {
    static TRANSCODER: RefCell<Option<Transcoder>> = const { RefCell::new(None) };
}

/// Transcodes `bytes` (an 8-bit JPEG of any process libjpeg reads: baseline, extended,
/// progressive, arithmetic-coded) losslessly: its coefficients, quantisation tables,
/// sampling and component ids unchanged, written as one baseline sequential Huffman scan
/// with optimised tables and a restart marker every `restart_interval` MCUs (0: none),
/// with every APPn and COM marker of the input, in order. At most `max_out` bytes.
pub(crate) fn transcode(
    bytes: &[u8],
    hints: &Hints,
    restart_interval: u16,
    max_out: usize,
) -> Result<Vec<u8>, TranscodeStop> {
    if crate::decode::jpeg::markers::borrows_tables(bytes) {
        // A fresh transcoder: the file would borrow the tables an earlier file left.
        let mut fresh = Transcoder::new().ok_or_else(|| {
            TranscodeStop::Failed(DecodeError::Panicked(
                "libjpeg could not create a transcoder".into(),
            ))
        })?;
        return fresh.transcode(bytes, hints, restart_interval, max_out);
    }
    TRANSCODER.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            TranscodeStop::Failed(DecodeError::Panicked("re-entrant JPEG transcode".into()))
        })?;
        if slot.is_none() {
            *slot = Transcoder::new();
        }
        let t = slot.as_mut().ok_or_else(|| {
            TranscodeStop::Failed(DecodeError::Panicked(
                "libjpeg could not create a transcoder".into(),
            ))
        })?;
        t.transcode(bytes, hints, restart_interval, max_out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A progressive file leaves libjpeg's `coef_bits` pointing into memory freed when the
    /// decode ends; neither the next file on the reused decompressor nor the progressive
    /// file's own verdict (read after `jpeg_finish_decompress` before this was fixed) may
    /// read it. (The fuzzer found this as a heap use-after-free under AddressSanitizer:
    /// tests/data/regress/coefficients/.)
    /// `bytes` without its header segments of marker `m` (up to the first scan).
    fn without(bytes: &[u8], m: u8) -> Vec<u8> {
        let mut out = bytes[..2].to_vec();
        let mut i = 2;
        while i + 4 <= bytes.len() && bytes[i] == 0xFF && bytes[i + 1] != 0xDA {
            let end = i + 2 + usize::from(u16::from_be_bytes([bytes[i + 2], bytes[i + 3]]));
            if bytes[i + 1] != m {
                out.extend_from_slice(&bytes[i..end]);
            }
            i = end;
        }
        out.extend_from_slice(&bytes[i..]);
        out
    }

    /// libjpeg keeps tables from one image to the next on a decompressor. A file that
    /// uses a table it never defines must decode as on a fresh decompressor whatever was
    /// decoded before it on the thread: refused without its quantisation tables, decoded
    /// with the standard Huffman tables without its own. (The fuzzer found the device
    /// oracle and the CPU decoder disagreeing on such a file: each borrowed the tables of
    /// the file its thread had decoded last; tests/data/regress/device_oracle/.)
    #[test]
    fn a_file_never_borrows_the_tables_of_the_one_before() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let read = |f: &str| std::fs::read(dir.join(f)).expect("test JPEG");
        let (a, b) = (read("ljt_testorig.jpg"), read("go_video-001_q50_444.jpg"));
        fn run(bytes: &[u8]) -> (Result<Vec<u8>, DecodeError>, Result<usize, DecodeError>) {
            let req = Request {
                scale: 1,
                window: None,
                strict: false,
            };
            let info = crate::decode::jpeg::markers::peek(bytes).expect("headers");
            let mut out = Vec::new();
            let pixels = decode(bytes, &req, &Hints::of(bytes, &info), &mut out).map(|_| out);
            let mut c = Coefficients::default();
            let coeffs = read_coefficients(bytes, false, &mut c).map(|_| c.components.len());
            (pixels, coeffs)
        }
        let no_dqt = without(&b, 0xDB);
        let no_dht = without(&b, 0xC4);
        assert!(crate::decode::jpeg::markers::borrows_tables(&no_dqt));
        assert!(crate::decode::jpeg::markers::borrows_tables(&no_dht));
        assert!(!crate::decode::jpeg::markers::borrows_tables(&a));
        assert!(!crate::decode::jpeg::markers::borrows_tables(&b));
        // On a thread whose decompressor is fresh.
        let fresh = |bytes: Vec<u8>| {
            std::thread::spawn(move || run(&bytes))
                .join()
                .expect("thread")
        };
        let (dqt_fresh, dht_fresh) = (fresh(no_dqt.clone()), fresh(no_dht.clone()));
        let refused = |r: &(Result<Vec<u8>, DecodeError>, Result<usize, DecodeError>)| {
            (r.0.is_err(), r.1.is_err())
        };
        assert_eq!(refused(&dqt_fresh), (true, true), "on a fresh decompressor");
        // After other files on this thread, with their tables left in the decompressor.
        for before in [&a, &b] {
            let _ = run(before);
            let dqt = run(&no_dqt);
            assert_eq!(refused(&dqt), (true, true), "after another file");
            let _ = run(before);
            let dht = run(&no_dht);
            assert!(
                dht.0.as_ref().ok() == dht_fresh.0.as_ref().ok(),
                "pixels without Huffman tables differ from a fresh decode's"
            );
            assert_eq!(dht.1.as_ref().ok(), dht_fresh.1.as_ref().ok());
        }
    }

    #[test]
    fn a_reused_decoder_never_keeps_a_progressive_files_state() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/jpeg");
        let read = |f: &str| std::fs::read(dir.join(f)).expect("test JPEG");
        let (progressive, baseline) =
            (read("jd_moz_jpg-progressive.jpg"), read("ljt_testorig.jpg"));
        let req = Request {
            scale: 1,
            window: None,
            strict: true,
        };
        let mut dec = Decoder::new().expect("decoder");
        let mut out = Vec::new();
        let mut coeffs = Coefficients::default();
        for bytes in [&progressive, &baseline, &progressive, &baseline] {
            let info = crate::decode::jpeg::markers::peek(bytes).expect("headers");
            let hints = Hints::of(bytes, &info);
            dec.decode(bytes, &req, &hints, &mut out).expect("decode");
            let progressive = info.process == Some(crate::decode::JpegProcess::Progressive);
            // Set only by a progressive file's own decode.
            assert!(dec.cinfo.coef_bits.is_null() || progressive);
            let status = dec
                .read_coefficients(bytes, true, &hints, &mut coeffs)
                .expect("coefficients");
            assert!(matches!(status, CoeffStatus::Ready), "{status:?}");
            assert!(dec.cinfo.coef_bits.is_null() || progressive);
        }
    }

    fn scans(progressive: bool, complete: bool) -> Scans {
        Scans {
            arithmetic: false,
            dc_complete: progressive && complete,
            unrefined: None,
            sequential_complete: !progressive && complete,
            progressive,
        }
    }

    #[test]
    fn the_most_severe_fault_wins() {
        // The data ends at a scan boundary (Incomplete) but a scan also stopped 40 bytes
        // short of its data (Damaged): the damage decides.
        let seen = Seen {
            eof: true,
            extraneous: vec![(40, 0xDA, "40 extraneous bytes before marker 0xda".into())],
            ..Seen::default()
        };
        let w = verdict(&seen, &scans(true, true), &[0xFF, 0xD8]);
        assert_eq!(w.map(|w| w.kind), Some(WarningKind::Damaged));
        // Two faults of one severity: the first is kept.
        let eof = Seen {
            eof: true,
            ..Seen::default()
        };
        let unrefined = Scans {
            unrefined: Some("component 0".into()),
            ..scans(true, true)
        };
        let w = verdict(&eof, &unrefined, &[0xFF, 0xD8]).expect("a warning");
        assert_eq!(w.kind, WarningKind::Incomplete);
        assert!(w.message.contains("Premature end"), "{}", w.message);
    }

    #[test]
    fn the_verdict_follows_the_documented_table() {
        let kind = |seen: &Seen, s: &Scans| verdict(seen, s, &[0xFF, 0xD8]).map(|w| w.kind);
        let clean = Seen::default();
        assert_eq!(kind(&clean, &scans(false, true)), None);
        let eof = Seen {
            eof: true,
            ..Seen::default()
        };
        assert_eq!(
            kind(&eof, &scans(false, true)),
            Some(WarningKind::Incomplete)
        );
        assert_eq!(
            kind(&eof, &scans(true, true)),
            Some(WarningKind::Incomplete)
        );
        assert_eq!(kind(&eof, &scans(true, false)), Some(WarningKind::Damaged));
        assert_eq!(kind(&eof, &scans(false, false)), Some(WarningKind::Damaged));
        let arith = Scans {
            arithmetic: true,
            ..scans(false, true)
        };
        assert_eq!(kind(&eof, &arith), Some(WarningKind::Damaged));
        let cut_in_scan = Seen {
            eof: true,
            hit_marker: true,
            damage: Some("Corrupt JPEG data: premature end of data segment".into()),
            ..Seen::default()
        };
        assert_eq!(
            kind(&cut_in_scan, &scans(false, true)),
            Some(WarningKind::Damaged)
        );
        let stray = |n| Seen {
            extraneous: vec![(n, 0xD9, format!("{n} extraneous bytes"))],
            ..Seen::default()
        };
        assert_eq!(
            kind(&stray(TRAILING_PADDING_MAX), &scans(false, true)),
            Some(WarningKind::Extraneous)
        );
        assert_eq!(
            kind(&stray(TRAILING_PADDING_MAX + 1), &scans(false, true)),
            Some(WarningKind::Damaged)
        );
        let unrefined = Scans {
            unrefined: Some("component 0, coefficient 1 known to bit 1".into()),
            ..scans(true, true)
        };
        assert_eq!(kind(&clean, &unrefined), Some(WarningKind::Incomplete));
    }
}
