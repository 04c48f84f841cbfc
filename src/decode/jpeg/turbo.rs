//! libjpeg-turbo's decoder (the build vendored by `mozjpeg-sys`) behind a safe wrapper:
//! the FFI module of the CPU decoder, and so one of the two places `unsafe` lives.
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

use crate::decode::DecodeError;

/// What to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Request {
    /// IDCT scale denominator: 1, 2, 4 or 8.
    pub scale: u32,
    /// `[x0, y0, x1, y1)` in the scaled image; `None` for the whole image.
    pub window: Option<[u32; 4]>,
    /// Treat libjpeg's corrupt-data warnings as errors.
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
    warnings: u32,
    first_warning: Option<String>,
}

/// The unwind payload of a fatal libjpeg error: its message code and text.
struct Fatal {
    code: c_int,
    msg: String,
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
    resume_unwind(Box::new(Fatal { code, msg }));
}

unsafe extern "C-unwind" fn on_message(cinfo: &mut ffi::jpeg_common_struct, level: c_int) {
    if level >= 0 {
        return; // trace messages
    }
    // SAFETY: `cinfo.err` points to the `base` field of our `ErrorMgr`, its first field
    // in a `#[repr(C)]` struct, so the cast recovers the whole struct; no other reference
    // to it is live while libjpeg runs.
    unsafe {
        let err = &mut *(cinfo.err as *mut ErrorMgr);
        // Stray bytes just before the end-of-image marker come after every pixel: the
        // image is whole, so this one warning is not a sign of damage.
        let marker = (*err.base.msg_parm.i())[1];
        if err.base.msg_code == ffi::JWRN_EXTRANEOUS_DATA as c_int && marker == 0xD9 {
            return;
        }
        let msg = message(cinfo);
        let err = &mut *(cinfo.err as *mut ErrorMgr);
        if err.warnings == 0 {
            err.first_warning = Some(msg);
        }
        err.warnings += 1;
    }
}

/// One libjpeg decompressor, reused across images on a thread.
struct Decoder {
    cinfo: Box<ffi::jpeg_decompress_struct>,
    err: Box<ErrorMgr>,
}

impl Decoder {
    fn new() -> Option<Decoder> {
        // SAFETY: both structs are plain C data for which all-zero is the documented
        // starting state before `jpeg_std_error` / `jpeg_create_decompress` fill them.
        let mut err = Box::new(ErrorMgr {
            base: unsafe { std::mem::zeroed() },
            warnings: 0,
            first_warning: None,
        });
        // SAFETY: `err.base` is a valid, boxed (address-stable) error manager.
        unsafe { ffi::jpeg_std_error(&mut err.base) };
        err.base.error_exit = Some(on_error);
        err.base.emit_message = Some(on_message);
        // SAFETY: as above.
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
        out: &mut Vec<u8>,
    ) -> Result<Output, DecodeError> {
        self.err.warnings = 0;
        self.err.first_warning = None;
        let cinfo = &mut *self.cinfo;
        // SAFETY: `cinfo` was created by jpeg_create_decompress and is reset below after
        // every use; `bytes` outlives the call (jpeg_mem_src keeps only a pointer used
        // within it); `out` is sized before libjpeg writes rows into it (see `run`).
        let r = catch_unwind(AssertUnwindSafe(|| unsafe { run(cinfo, bytes, req, out) }));
        // SAFETY: returns the decompressor to its idle state, keeping it reusable.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_abort_decompress(cinfo)
        }));
        match r {
            Ok(Ok(_)) if req.strict && self.err.warnings > 0 => Err(DecodeError::Jpeg(format!(
                "corrupt data: {}",
                self.err.first_warning.take().unwrap_or_default()
            ))),
            Ok(r) => r,
            Err(p) => Err(match p.downcast::<Fatal>() {
                Ok(f) => classify(&f),
                Err(p) => DecodeError::Panicked(crate::error::panic_message(p.as_ref())),
            }),
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
    out: &mut Vec<u8>,
) -> Result<Output, DecodeError> {
    // SAFETY (whole body): calls follow libjpeg's documented decompression sequence on a
    // valid decompressor; row pointers handed to jpeg_read_scanlines point into `out`,
    // which holds `stride * rows` bytes, and each call writes one row of `stride` bytes.
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
        // Every byte is written by jpeg_read_scanlines below: no need to clear.
        crate::augment::reference::set_len(out, stride * rows);
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
            let mut row = [out[r * stride..].as_mut_ptr()];
            if ffi::jpeg_read_scanlines(cinfo, row.as_mut_ptr(), 1) != 1 {
                return Err(DecodeError::Jpeg(
                    "decoder stopped before the last row".into(),
                ));
            }
        }
        if wy1 == fh {
            ffi::jpeg_finish_decompress(cinfo);
        }
        Ok(Output {
            width: w,
            height: rows as u32,
            x0,
            y0,
            full_width: fw,
            full_height: fh,
            channels: channels as u32,
        })
    }
}

thread_local! {
    static DECODER: RefCell<Option<Decoder>> = const { RefCell::new(None) };
}

/// Decodes with this thread's reusable decompressor.
pub(crate) fn decode(
    bytes: &[u8],
    req: &Request,
    out: &mut Vec<u8>,
) -> Result<Output, DecodeError> {
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
        dec.decode(bytes, req, out)
    })
}
