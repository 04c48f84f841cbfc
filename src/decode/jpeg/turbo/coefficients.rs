//! Raw DCT coefficients for the device paths (`jpeg_read_coefficients`), judged as the
//! CPU decoder's pixels are.

use super::*;

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
/// the first block no 8-bit encoder writes (see [`crate::decode::jpeg::idct::agrees_with_simd`]), whose
/// samples libjpeg's C code (which the shaders port) and its SIMD code compute differently.
fn beyond_simd_range(c: &Coefficients) -> Option<String> {
    c.components.iter().enumerate().find_map(|(ci, comp)| {
        let at = comp
            .blocks
            .iter()
            .position(|b| !crate::decode::jpeg::idct::agrees_with_simd(b, &comp.quant))?;
        let w = comp.width_in_blocks.max(1) as usize;
        Some(format!(
            "coefficients beyond what an 8-bit encoder writes (component {ci}, block {} of row \
             {}): only the CPU decoder reproduces their pixels",
            at % w,
            at / w
        ))
    })
}

impl Decoder {
    pub(super) fn read_coefficients(
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

/// # Safety
/// As for [`run`](super::decoder::run).
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
pub(super) fn smoothing_needed(
    comps: &[ffi::jpeg_component_info],
    bits: &[[c_int; 64]],
) -> Option<String> {
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
