//! Lossless transcoding (`crate::decode::jpeg::transcode`): coefficients in, coefficients
//! out, as jpegtran does, with restart markers, one baseline scan and optimised tables;
//! the output written into a growing `Vec` by a destination manager of our own.

use super::*;

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
        layout: (u16, bool),
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
            run_transcode(src, dst, self.mozjpeg, bytes, hints, layout)
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
/// [`VecDest`]; `src` must have had [`forget_progression`] since its last use. `layout`
/// is the restart interval and whether the Huffman tables are optimised.
unsafe fn run_transcode(
    src: &mut ffi::jpeg_decompress_struct,
    dst: &mut ffi::jpeg_compress_struct,
    mozjpeg: bool,
    bytes: &[u8],
    hints: &Hints,
    (restart_interval, optimize): (u16, bool),
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
        dst.optimize_coding = c_int::from(optimize);
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
/// with a restart marker every `layout.0` MCUs (0: none), with optimised Huffman tables
/// when `layout.1` (the standard ones otherwise), with every APPn and COM marker of the
/// input, in order. At most `max_out` bytes.
pub(crate) fn transcode(
    bytes: &[u8],
    hints: &Hints,
    layout: (u16, bool),
    max_out: usize,
) -> Result<Vec<u8>, TranscodeStop> {
    if crate::decode::jpeg::markers::borrows_tables(bytes) {
        // A fresh transcoder: the file would borrow the tables an earlier file left.
        let mut fresh = Transcoder::new().ok_or_else(|| {
            TranscodeStop::Failed(DecodeError::Panicked(
                "libjpeg could not create a transcoder".into(),
            ))
        })?;
        return fresh.transcode(bytes, hints, layout, max_out);
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
        t.transcode(bytes, hints, layout, max_out)
    })
}
