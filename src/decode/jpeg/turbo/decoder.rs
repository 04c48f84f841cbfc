//! The CPU decoder's entry point: one libjpeg decompressor per thread, reused, and the
//! decompression sequence (scaled, cropped, skipping the rows above a window).

use super::*;

/// One libjpeg decompressor, reused across images on a thread.
pub(super) struct Decoder {
    pub(super) cinfo: Box<ffi::jpeg_decompress_struct>,
    pub(super) err: Box<ErrorMgr>,
}

impl Decoder {
    pub(super) fn new() -> Option<Decoder> {
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

    pub(super) fn decode(
        &mut self,
        bytes: &[u8],
        req: &Request,
        hints: &Hints,
        out: &mut Vec<u8>,
        rows: Rows<'_>,
    ) -> Result<(Output, Option<DecodeWarning>), DecodeError> {
        self.reset(req.strict, hints);
        let cinfo = &mut *self.cinfo;
        forget_progression(cinfo);
        let mut hook = Hook::new(bytes);
        // SAFETY: `cinfo` was created by jpeg_create_decompress and is reset below after
        // every use; `bytes` outlives the call (jpeg_mem_src keeps only a pointer used
        // within it); `out` is sized before libjpeg writes rows into it (see `run`),
        // which also reads the progression state before finishing frees it; `hook` stays
        // where it is until the decompressor is idle again, below.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe {
            run(cinfo, bytes, req, hints, out, (rows, &mut hook))
        }));
        // SAFETY: returns the decompressor to its idle state, keeping it reusable; that
        // frees the Huffman decoder the hook was installed in.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ffi::jpeg_abort_decompress(cinfo)
        }));
        cinfo.common.client_data = std::ptr::null_mut();
        self.judge(r, req.strict, bytes)
    }

    /// Forgets the last decode's warnings and sets how this one stops.
    pub(super) fn reset(&mut self, strict: bool, hints: &Hints) {
        self.err.reset(strict, hints);
    }

    /// The result of a decode that may have warned: a damaged file is an error when
    /// `strict`; otherwise the value, with the warning [`verdict`] gives.
    pub(super) fn judge<T>(
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

/// # Safety
/// `cinfo` must be an idle decompressor created by `jpeg_create_decompress` whose error
/// manager unwinds on fatal errors; `hook` is for `bytes` and must not move until the
/// decompressor is idle again.
unsafe fn run<'a>(
    cinfo: &mut ffi::jpeg_decompress_struct,
    bytes: &'a [u8],
    req: &Request,
    hints: &Hints,
    out: &mut Vec<u8>,
    (jump, hook): (Rows<'a>, &mut Hook<'a>),
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
        hook.install(cinfo, &jump);
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
        if req.to_end && wy1 < fh {
            read_to_end(cinfo, stride)?;
        }
        if let Rows::Record(slot) = jump {
            if let Some(index) = hook.recorded(cinfo) {
                *slot = Some(index);
            }
        }
        // Before finishing, which frees the progression state `scans_of` reads.
        let scans = scans_of(cinfo, hints);
        if cinfo.output_scanline == fh {
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

/// Reads the rows below a window, down to the image's last: all but the last skipped
/// (for a single-scan file, `jpeg_skip_scanlines` entropy-decodes the iMCU rows it skips
/// and drops their coefficients, and decodes the rows of a part row; a multi-scan file's
/// data was all read by `jpeg_start_decompress`), the last one decoded into a row of its
/// own and dropped. Skipping straight to the end would not do: libjpeg then stops
/// without reading the data that is left.
///
/// # Safety
/// `cinfo` must be a decompressor started by `jpeg_start_decompress`, with rows left to
/// read, whose error manager unwinds on fatal errors; each output row is `stride` bytes.
unsafe fn read_to_end(
    cinfo: &mut ffi::jpeg_decompress_struct,
    stride: usize,
) -> Result<(), DecodeError> {
    let last = cinfo.output_height - 1;
    // One row, once a file: the window's buffer is not grown (nor copied) for it.
    let mut row = vec![0u8; stride];
    // SAFETY: the decompressor is started with rows left (the caller's contract); the
    // row pointer handed to jpeg_read_scanlines points to `row`'s `stride` bytes, and it
    // writes that one row.
    unsafe {
        if cinfo.output_scanline < last {
            let n = last - cinfo.output_scanline;
            if ffi::jpeg_skip_scanlines(cinfo, n) != n {
                return Err(DecodeError::Jpeg("could not skip to the last row".into()));
            }
        }
        let mut rows = [row.as_mut_ptr()];
        if ffi::jpeg_read_scanlines(cinfo, rows.as_mut_ptr(), 1) != 1 {
            return Err(DecodeError::Jpeg(
                "decoder stopped before the last row".into(),
            ));
        }
    }
    Ok(())
}

thread_local! {
    static DECODER: RefCell<Option<Decoder>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's reusable decompressor, or with a fresh one for a file that
/// would otherwise borrow the tables an earlier file left in it
/// ([`crate::decode::jpeg::markers::borrows_tables`]). Clearing the decompressor's table
/// pointers instead would leak: libjpeg allocates a table from its permanent pool whenever
/// the pointer is null, and frees that pool only when the decompressor is destroyed.
pub(super) fn with_decoder<R>(
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
    decode_rows(bytes, req, hints, out, Rows::Plain)
}

/// [`decode`], recording the file's [`RowIndex`] or resuming from it (`rows`).
pub(crate) fn decode_rows(
    bytes: &[u8],
    req: &Request,
    hints: &Hints,
    out: &mut Vec<u8>,
    rows: Rows<'_>,
) -> Result<(Output, Option<DecodeWarning>), DecodeError> {
    with_decoder(bytes, |dec| dec.decode(bytes, req, hints, out, rows))
}
