//! The FFI session's error handling: the error manager whose callbacks collect libjpeg's
//! warnings ([`Seen`]) and unwind on its fatal errors ([`Fatal`], [`Stopped`]), and the
//! decompressor state read or cleared around a decode.

use super::*;

/// Our error manager: libjpeg's, followed by what we collect. `base` must stay first: the
/// callbacks receive a pointer to it and cast it back to the whole struct.
#[repr(C)]
pub(super) struct ErrorMgr {
    pub(super) base: ffi::jpeg_error_mgr,
    pub(super) seen: Seen,
    /// Set per decode: stop at the first sign of damage (strict decoding).
    pub(super) stop_on_damage: bool,
    /// Set per decode: the file is arithmetic-coded (its end inside a scan is damage).
    pub(super) arithmetic: bool,
}

impl ErrorMgr {
    /// A boxed (address-stable) error manager with our callbacks installed.
    pub(super) fn new_boxed() -> Box<ErrorMgr> {
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
    pub(super) fn reset(&mut self, strict: bool, hints: &Hints) {
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
pub(super) struct Stopped(pub(super) DecodeWarning);

/// The unwind payload of a fatal libjpeg error: its message code and text.
pub(super) struct Fatal {
    pub(super) code: c_int,
    pub(super) msg: String,
    /// Raised by a compressor (writing), not a decompressor (reading).
    pub(super) writing: bool,
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

/// A fatal libjpeg error as a [`DecodeError`]: by message code, the features this build
/// does not decode are `Unsupported`; everything else is damaged data.
pub(super) fn classify(f: &Fatal) -> DecodeError {
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

/// Clears `cinfo.coef_bits` before a decode. libjpeg sets it only when it meets a
/// progressive file, allocates it from the image's memory pool (freed by
/// `jpeg_finish_decompress` and `jpeg_abort_decompress`) and never clears it, so on a
/// reused decompressor it would still point at a freed array when the next file is not
/// progressive.
pub(super) fn forget_progression(cinfo: &mut ffi::jpeg_decompress_struct) {
    cinfo.coef_bits = std::ptr::null_mut();
}

/// Reads what [`Scans`] needs from a decompressor that has read its input.
///
/// # Safety
/// `cinfo` must have read its headers (`jpeg_read_header`) in this decode, after
/// [`forget_progression`], and the image's memory must not have been freed since (no
/// `jpeg_finish_decompress`, `jpeg_abort_decompress` or reset): `coef_bits` lives there.
pub(super) unsafe fn scans_of(cinfo: &ffi::jpeg_decompress_struct, hints: &Hints) -> Scans {
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
