//! Every WGSL shader the wgpu backend compiles parses and validates with naga (the
//! compiler wgpu itself uses), with no capability beyond naga's defaults, so a broken
//! shader fails here, on any machine, before a device ever sees it. And the records the
//! host writes for the shaders agree with what the shaders read (the word constants are
//! written from `backend::device::constants`, the WGSL structs by hand): the augment
//! launch's `Params` (WGSL struct and CUDA word indices against the Rust struct), the
//! `SamplePlan` words, flags and jitter op codes the augment shader reads, and the packed
//! JPEG's `ImageDesc` and `ComponentDesc` words, colour kinds and upsampling codes the
//! decode shaders read. Rust offsets come from `offset_of!`, WGSL ones from naga's
//! layouter and constants; a field added, removed or moved on one side fails.
#![cfg(feature = "wgpu")]

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};

use stoker::augment::plan::{self, SamplePlan};
use stoker::backend::device::augment::Params;
use stoker::backend::device::constants;
use stoker::backend::device::launch::PARAM_WORDS;
use stoker::backend::wgpu::shaders;
use stoker::decode::jpeg::coeffs::{self, ComponentDesc, ImageDesc, Upsample};
use stoker::decode::jpeg::huffman::{self, IntervalDesc, ScanDesc};

fn validate(name: &str, source: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source)
        .map_err(|e| format!("{name}: parse error:\n{}", e.emit_to_string(source)))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::default(),
    )
    .validate(&module)
    .map_err(|e| format!("{name}: validation error:\n{}", e.emit_to_string(source)))?;
    Ok(())
}

#[test]
fn every_shader_parses_and_validates() {
    let failures: Vec<String> = shaders::ALL
        .iter()
        .filter_map(|(name, source)| validate(name, source).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A file joined to other shaders: it validates alone and has no entry point; its
/// module-scope variables, by name and binding.
fn joined_file_globals(name: &str, source: &str) -> Vec<(Option<String>, Option<u32>)> {
    validate(name, source).expect("validates");
    let module = parse(source);
    assert!(module.entry_points.is_empty(), "{name}");
    module
        .global_variables
        .iter()
        .map(|(_, g)| (g.name.clone(), g.binding.as_ref().map(|b| b.binding)))
        .collect()
}

/// The shared files joined to other shaders, each with its module-scope variables (by
/// name and binding) and the shaders it is joined to, in front (`true`) or behind:
/// - `idct_common.wgsl` goes in front of three shaders with different bindings, so it
///   declares no binding (its one module-scope variable is the private pass-1 workspace
///   `ws`);
/// - `decode_common.wgsl` ends the three decode shaders and declares the chunk's binding
///   and no other module-scope variable.
///
/// Each validates alone and has no entry point.
#[test]
fn the_shared_files_are_joined_to_their_users_with_only_their_own_globals() {
    let cases = [
        (
            "idct_common.wgsl",
            shaders::IDCT_COMMON.as_str(),
            (Some("ws".to_string()), None),
            true,
            [&shaders::HUFFMAN, &shaders::IDCT, &shaders::SYNC_HUFFMAN],
        ),
        (
            "decode_common.wgsl",
            shaders::DECODE_COMMON.as_str(),
            (Some("blob".to_string()), Some(0)),
            false,
            [&shaders::HUFFMAN, &shaders::IDCT, &shaders::COLOR],
        ),
    ];
    for (name, shared, global, in_front, users) in cases {
        assert_eq!(joined_file_globals(name, shared), [global], "{name}");
        for (i, user) in users.into_iter().enumerate() {
            let joined = if in_front {
                user.as_str().starts_with(shared)
            } else {
                user.as_str().ends_with(shared)
            };
            assert!(joined, "{name} is not joined to user {i}");
        }
    }
}

#[test]
fn the_augment_shader_has_its_entry_points() {
    let module =
        naga::front::wgsl::parse_str(shaders::AUGMENT.as_str()).expect("augment.wgsl parses");
    let names: Vec<&str> = module
        .entry_points
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    for entry in ["horizontal", "vertical_jitter", "write_image", "write_mask"] {
        assert!(
            names.contains(&entry),
            "no entry point {entry} in {names:?}"
        );
    }
}

#[test]
fn a_broken_shader_is_reported() {
    assert!(validate("broken.wgsl", "fn main( {").is_err());
    assert!(validate(
        "typed.wgsl",
        "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }"
    )
    .is_err());
}

// ---------------------------------------------------------------------------------------
// The records the host writes and the shaders read, mirrored by hand on both sides: the
// Rust `#[repr(C)]` structs against the WGSL struct (names, order, offsets, sizes) or the
// WGSL word-index constants, through naga's reflection of the parsed module.

fn size_of_field<T, F>(_: impl Fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// `(field, byte offset, bytes)` of every field of the struct `$ty`, in order (a
/// [`Fields`]). The pattern fails to compile when the struct gains or loses a field, so
/// the list is always all of them.
macro_rules! fields {
    ($ty:ident; $($field:ident),* $(,)?) => {{
        let _every_field = |v: $ty| {
            let $ty { $($field: _),* } = v;
        };
        vec![$((
            stringify!($field),
            offset_of!($ty, $field),
            size_of_field(|v: &$ty| &v.$field),
        )),*]
    }};
}

/// `(name, value)` of Rust constants the shaders define under the same names.
macro_rules! same_names {
    ($module:ident :: { $($name:ident),* $(,)? }) => {
        [$((stringify!($name), $module::$name)),*]
    };
}

/// Every u32 `const` of a WGSL module, by name.
fn u32_constants(module: &naga::Module) -> BTreeMap<String, u32> {
    module
        .constants
        .iter()
        .filter_map(|(_, c)| match module.global_expressions[c.init] {
            naga::Expression::Literal(naga::Literal::U32(v)) => Some((c.name.clone()?, v)),
            _ => None,
        })
        .collect()
}

fn parse(source: &str) -> naga::Module {
    naga::front::wgsl::parse_str(source).expect("parses")
}

/// `(member, byte offset, bytes)` of the WGSL struct `name`, a run of `_pad*` members
/// taken as one `pad`; and the struct's size.
fn wgsl_struct(module: &naga::Module, name: &str) -> (Vec<(String, usize, usize)>, usize) {
    let mut layouter = naga::proc::Layouter::default();
    layouter.update(module.to_ctx()).expect("layout");
    let (members, span) = module
        .types
        .iter()
        .find_map(|(_, t)| match &t.inner {
            naga::TypeInner::Struct { members, span } if t.name.as_deref() == Some(name) => {
                Some((members, *span))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no struct {name}"));
    let mut out: Vec<(String, usize, usize)> = Vec::new();
    for m in members {
        let member = m.name.clone().unwrap_or_default();
        let (offset, size) = (m.offset as usize, layouter[m.ty].size as usize);
        match out.last_mut() {
            Some((last, at, bytes)) if member.starts_with("_pad") && last == "pad" => {
                assert_eq!(*at + *bytes, offset, "{name}.{member} is not contiguous");
                *bytes += size;
            }
            _ if member.starts_with("_pad") => out.push(("pad".into(), offset, size)),
            _ => out.push((member, offset, size)),
        }
    }
    (out, span as usize)
}

/// Checks the word-index constants of `source` named `prefix*` against the Rust record
/// they index: each is in `words` (constant, Rust field) and equals that field's offset
/// in words, so that a constant without a Rust field, or a field moved on either side,
/// fails. `fields` is the Rust struct's [`fields!`] list.
fn check_word_constants(
    shader: &str,
    source: &str,
    prefix: &str,
    words: &[(impl AsRef<str>, &str)],
    fields: &[(&str, usize, usize)],
) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, value) in u32_constants(&parse(source)) {
        if !name.starts_with(prefix) {
            continue;
        }
        let Some((_, field)) = words.iter().find(|(c, _)| c.as_ref() == name) else {
            failures.push(format!(
                "{shader}: {name} indexes no Rust field this test knows"
            ));
            continue;
        };
        let Some(&(_, offset, _)) = fields.iter().find(|(f, _, _)| f == field) else {
            failures.push(format!(
                "{shader}: {name}: the Rust record has no field {field}"
            ));
            continue;
        };
        if value as usize * 4 != offset {
            failures.push(format!(
                "{shader}: {name} = {value}, the Rust field {field} is at word {}",
                offset as f64 / 4.0
            ));
        }
    }
    failures
}

/// The word constants named after the fields of a record: `prefix` and the field's name
/// upper-cased, for each of `fields` but those in `skip`.
fn named_after(
    prefix: &str,
    fields: &[(&'static str, usize, usize)],
    skip: &[&str],
) -> Vec<(String, &'static str)> {
    fields
        .iter()
        .filter(|(f, _, _)| !skip.contains(f))
        .map(|&(f, _, _)| (format!("{prefix}{}", f.to_uppercase()), f))
        .collect()
}

/// Checks that every constant `words` names is in one of `sources` (a mapping that no
/// shader uses any more is stale; and the constant checks are not vacuous).
fn check_mapped(sources: &[&str], words: &[(impl AsRef<str>, &str)]) -> Vec<String> {
    let names: Vec<String> = sources
        .iter()
        .flat_map(|s| u32_constants(&parse(s)).into_keys())
        .collect();
    words
        .iter()
        .filter(|(c, _)| !names.iter().any(|n| n == c.as_ref()))
        .map(|(c, _)| format!("no shader has the constant {}", c.as_ref()))
        .collect()
}

/// Checks that the u32 constants of `source` named in `values` hold those values.
fn check_values(shader: &str, source: &str, values: &[(&str, u32)]) -> Vec<String> {
    let consts = u32_constants(&parse(source));
    values
        .iter()
        .filter(|(name, value)| consts.get(*name) != Some(value))
        .map(|(name, value)| {
            format!(
                "{shader}: {name} is {:?}, the Rust value {value}",
                consts.get(*name)
            )
        })
        .collect()
}

type Fields = Vec<(&'static str, usize, usize)>;

fn params_fields() -> Fields {
    fields!(
        Params;
        s0, s1, item0, items, win_base, data_base, r_base, h_base, byte0, words, phase, contrast,
        pad,
    )
}

/// The `C_*` word constants of `shader` (its `source`) against [`ComponentDesc`].
fn check_component_words(shader: &str, source: &str) -> Vec<String> {
    let component = fields!(
        ComponentDesc;
        coef_offset, quant_offset, bx0, by0, bw, bh, dct_size, plane_offset, plane_stride,
        downsampled_width, downsampled_height, method, eh, ev, group_start, groups,
    );
    check_word_constants(shader, source, "C_", &COMPONENT_WORDS, &component)
}

fn sample_plan_fields() -> Fields {
    fields!(
        SamplePlan;
        id_lo, id_hi, src_width, src_height, crop_x, crop_y, crop_w, crop_h, out_width,
        out_height, flags, jitter_order, brightness, contrast, saturation, hue, mean, layout,
        std, dtype, decode_scale, affine, affine_frac, fill, mask_fill, valid, jitter_order_hi,
        color_params, erase, erase_value, order_ext, op_params, blur_size, _pad,
    )
}

#[test]
fn the_augment_params_struct_matches_the_rust_one() {
    let rust = params_fields();
    let (wgsl, span) = wgsl_struct(&parse(shaders::AUGMENT.as_str()), "Params");
    let rust: Vec<(String, usize, usize)> = rust
        .into_iter()
        .map(|(f, offset, size)| (f.to_string(), offset, size))
        .collect();
    assert_eq!(
        wgsl, rust,
        "augment.wgsl's Params and device::augment::Params"
    );
    assert_eq!(span, size_of::<Params>(), "the size of Params");
    assert_eq!(
        span,
        PARAM_WORDS * 4,
        "Params is one launch's parameter words"
    );
}

/// The augment code's `P_*` word indices of [`SamplePlan`] fields, by field.
const PLAN_WORD_NAMES: [(&str, &str); 19] = [
    ("P_FLAGS", "flags"),
    ("P_ORDER", "jitter_order"),
    ("P_BRIGHTNESS", "brightness"),
    ("P_CONTRAST", "contrast"),
    ("P_SATURATION", "saturation"),
    ("P_HUE", "hue"),
    ("P_MEAN", "mean"),
    ("P_STD", "std"),
    ("P_AFFINE", "affine"),
    ("P_AFFINE_FRAC", "affine_frac"),
    ("P_FILL", "fill"),
    ("P_MASK_FILL", "mask_fill"),
    ("P_VALID", "valid"),
    ("P_ORDER_HI", "jitter_order_hi"),
    ("P_COLOR_PARAMS", "color_params"),
    ("P_ERASE", "erase"),
    ("P_ERASE_VALUE", "erase_value"),
    ("P_ORDER_EXT", "order_ext"),
    ("P_OP_PARAMS", "op_params"),
];

#[test]
fn the_augment_shader_reads_the_sample_plan_where_rust_writes_it() {
    let fields = sample_plan_fields();
    let words = PLAN_WORD_NAMES;
    let src = shaders::AUGMENT.as_str();
    let mut failures = check_word_constants("augment.wgsl", src, "P_", &words, &fields);
    failures.extend(check_mapped(&[src], &words));
    let values = same_names!(plan::{
        FLIP_H, FLIP_V, JITTER, NORMALIZE, AFFINE, ERASE, AFFINE_FRAC_BITS, AFFINE_WEIGHT_BITS,
        OP_BRIGHTNESS, OP_CONTRAST, OP_SATURATION, OP_HUE, OP_GRAYSCALE, OP_POSTERIZE,
        OP_SOLARIZE, OP_AUTOCONTRAST, OP_EQUALIZE, OP_SHARPNESS, OP_BLUR, PARAM_INT
    });
    failures.extend(check_values("augment.wgsl", src, &values));
    let max_ops = [("MAX_OPS", plan::MAX_OPS as u32)];
    failures.extend(check_values("augment.wgsl", src, &max_ops));
    let plan_words = [("PLAN_WORDS", (size_of::<SamplePlan>() / 4) as u32)];
    failures.extend(check_values("augment.wgsl", src, &plan_words));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The ComponentDesc word constants of `decode_common.wgsl` (joined to the three decode
/// shaders) and the Rust fields they index.
const COMPONENT_WORDS: [(&str, &str); 15] = [
    ("C_COEF", "coef_offset"),
    ("C_QUANT", "quant_offset"),
    ("C_BX0", "bx0"),
    ("C_BY0", "by0"),
    ("C_BW", "bw"),
    ("C_BH", "bh"),
    ("C_DCT", "dct_size"),
    ("C_PLANE", "plane_offset"),
    ("C_STRIDE", "plane_stride"),
    ("C_DW", "downsampled_width"),
    ("C_DH", "downsampled_height"),
    ("C_METHOD", "method"),
    ("C_EH", "eh"),
    ("C_EV", "ev"),
    ("C_GROUP_START", "group_start"),
];

#[test]
fn the_decode_shaders_read_the_packed_records_where_rust_writes_them() {
    let image = fields!(
        ImageDesc;
        kind, flags, num_components, first_component, out_offset, x0, y0, width, height,
        full_width, full_height, scale, pixel_start, src_offset, reserved,
    );
    // The shaders step through the tables 16 words a record.
    assert_eq!(size_of::<ImageDesc>(), 64);
    assert_eq!(size_of::<ComponentDesc>(), 64);
    let image_words = [
        ("I_KIND", "kind"),
        ("I_FLAGS", "flags"),
        ("I_COMPONENTS", "num_components"),
        ("I_FIRST_COMPONENT", "first_component"),
        ("I_OUT", "out_offset"),
        ("I_X0", "x0"),
        ("I_Y0", "y0"),
        ("I_WIDTH", "width"),
        ("I_PIXEL_START", "pixel_start"),
        ("I_SRC", "src_offset"),
    ];
    let component_words = COMPONENT_WORDS;
    let mut failures = Vec::new();
    for (shader, src) in [
        ("idct.wgsl", shaders::IDCT.as_str()),
        ("color.wgsl", shaders::COLOR.as_str()),
    ] {
        failures.extend(check_word_constants(
            shader,
            src,
            "I_",
            &image_words,
            &image,
        ));
        failures.extend(check_component_words(shader, src));
    }
    let decode = [shaders::IDCT.as_str(), shaders::COLOR.as_str()];
    failures.extend(check_mapped(&decode, &image_words));
    failures.extend(check_mapped(&decode, &component_words));
    let kinds = same_names!(coeffs::{
        KIND_GRAY, KIND_YCBCR, KIND_RGB, KIND_CMYK, KIND_YCCK, KIND_PASSTHROUGH
    });
    failures.extend(check_values("color.wgsl", shaders::COLOR.as_str(), &kinds));
    let methods = [
        ("UP_FULL", Upsample::Full),
        ("UP_BOX", Upsample::Box),
        ("UP_H2V1", Upsample::H2V1Fancy),
        ("UP_H1V2", Upsample::H1V2Fancy),
        ("UP_H2V2", Upsample::H2V2Fancy),
    ]
    .map(|(name, m)| (name, m.code()));
    failures.extend(check_values(
        "color.wgsl",
        shaders::COLOR.as_str(),
        &methods,
    ));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_huffman_shader_reads_the_entropy_records_where_rust_writes_them() {
    let scan = fields!(
        ScanDesc;
        components, mcus_per_row, first_component, flags, comp, dc_table, ac_table,
    );
    let interval = fields!(
        IntervalDesc;
        scan, first_mcu, mcus, start, end, status, reserved,
    );
    assert_eq!(size_of::<ScanDesc>(), 64);
    assert_eq!(size_of::<IntervalDesc>(), 32);
    // The shader names these words after the fields (`S_` and `V_`, upper-cased).
    let scan_words = named_after("S_", &scan, &[]);
    let interval_words = named_after("V_", &interval, &["reserved"]);
    let (name, src) = ("huffman.wgsl", shaders::HUFFMAN.as_str());
    let mut failures = check_word_constants(name, src, "S_", &scan_words, &scan);
    failures.extend(check_word_constants(
        name,
        src,
        "V_",
        &interval_words,
        &interval,
    ));
    failures.extend(check_component_words(name, src));
    failures.extend(check_mapped(&[src], &scan_words));
    failures.extend(check_mapped(&[src], &interval_words));
    failures.extend(check_mapped(&[src], &COMPONENT_WORDS));
    let status = same_names!(huffman::{
        STATUS_OUT_OF_DATA, STATUS_BAD_CODE, STATUS_LEFTOVER, STATUS_OVERFLOW, STATUS_SIMD_RANGE
    });
    failures.extend(check_values(name, src, &status));
    let table = [
        ("T_MAXCODE", huffman::MAXCODE as u32),
        ("T_VALOFFSET", huffman::VALOFFSET as u32),
        ("T_HUFFVAL", huffman::HUFFVAL as u32),
    ];
    failures.extend(check_values(name, src, &table));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A check of the checks: a WGSL struct or constant that moves fails them.
#[test]
fn a_moved_field_fails_the_layout_checks() {
    let moved =
        shaders::AUGMENT
            .as_str()
            .replacen("    s1: u32,\n", "    s1: u32,\n    extra: u32,\n", 1);
    let (wgsl, _) = wgsl_struct(&parse(&moved), "Params");
    assert_eq!(wgsl[2], ("extra".to_string(), 8, 4));
    assert_eq!(
        wgsl[3],
        ("item0".to_string(), 12, 4),
        "the members after it move"
    );
    let plan = sample_plan_fields();
    let moved = shaders::AUGMENT.as_str().replacen(
        "const P_FLAGS: u32 = 10u;",
        "const P_FLAGS: u32 = 9u;",
        1,
    );
    assert_ne!(moved, shaders::AUGMENT.as_str());
    let f = check_word_constants("moved", &moved, "P_", &[("P_FLAGS", "flags")], &plan);
    assert!(f.iter().any(|m| m.contains("P_FLAGS = 9")), "{f:?}");
    assert!(f.iter().any(|m| m.contains("P_ORDER")), "{f:?}");
}

/// The enumerators of a CUDA `enum : u32 { NAME = Vu, ... };`, by name.
fn cuda_enumerators(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter_map(|l| {
            let (name, value) = l.trim().trim_end_matches(',').split_once(" = ")?;
            Some((name.to_string(), value.strip_suffix('u')?.parse().ok()?))
        })
        .collect()
}

/// `kernels/augment.cu` reads the same parameter words by index (`S0` .. `WORDS`, in the
/// constants the host prepends to it): each field of [`Params`] but the padding,
/// upper-cased, at its word.
#[test]
fn the_cuda_augment_kernel_reads_the_params_where_rust_writes_them() {
    let cuda = cuda_enumerators(&constants::cuda("augment"));
    let rust: Vec<(String, usize)> = params_fields()
        .into_iter()
        .filter(|(f, _, _)| *f != "pad")
        .map(|(f, offset, _)| (f.to_uppercase(), offset / 4))
        .collect();
    for (name, word) in &rust {
        assert_eq!(
            cuda.get(name).map(|&v| v as usize),
            Some(*word),
            "kernels/augment.cu's {name} and device::augment::Params"
        );
    }
}

/// `kernels/augment.cu` reads the [`SamplePlan`] words where Rust writes them: its
/// `PLAN_WORDS` and each `P_*` enumerator of the constants the host prepends to it.
#[test]
fn the_cuda_augment_kernel_reads_the_sample_plan_where_rust_writes_it() {
    let cuda = cuda_enumerators(&constants::cuda("augment"));
    let fields = sample_plan_fields();
    assert_eq!(
        cuda.get("PLAN_WORDS").map(|&v| v as usize * 4),
        Some(size_of::<SamplePlan>()),
        "PLAN_WORDS"
    );
    let mut seen = 0;
    for (name, &value) in cuda.iter().filter(|(n, _)| n.starts_with("P_")) {
        let field = PLAN_WORD_NAMES
            .iter()
            .find(|(c, _)| *c == name)
            .unwrap_or_else(|| panic!("{name} indexes no field this test knows"))
            .1;
        let offset = fields
            .iter()
            .find(|(f, _, _)| *f == field)
            .expect("field")
            .1;
        assert_eq!(value as usize * 4, offset, "{name}: the Rust field {field}");
        seen += 1;
    }
    assert_eq!(
        seen,
        PLAN_WORD_NAMES.len(),
        "every plan word is named in the kernel"
    );
}

/// Every constant a shader reads is one the CUDA version of the same file reads too, with
/// the same value: the two are written from one table.
#[test]
fn the_cuda_and_wgsl_versions_read_the_same_constants() {
    for stem in [
        "decode_common",
        "idct_common",
        "huffman",
        "color",
        "augment",
    ] {
        let mut cuda = cuda_enumerators(&constants::cuda(stem));
        if stem == "huffman" {
            // The entropy constants both CUDA Huffman kernels read are
            // kernels/huffman_common.cuh's, prepended to each.
            cuda.extend(cuda_enumerators(&constants::cuda("huffman_common")));
        }
        let module = parse(&constants::wgsl(stem));
        assert!(!module.constants.is_empty(), "{stem}");
        for (_, c) in module.constants.iter() {
            let name = c.name.clone().expect("named");
            let value = match module.global_expressions[c.init] {
                naga::Expression::Literal(naga::Literal::U32(v)) => v,
                naga::Expression::Literal(naga::Literal::I32(v)) => v as u32,
                ref e => panic!("{stem}: {name} is {e:?}"),
            };
            assert_eq!(cuda.get(&name), Some(&value), "{stem}: {name}");
        }
    }
}
