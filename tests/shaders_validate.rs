//! Every WGSL shader the wgpu backend compiles parses and validates with naga (the
//! compiler wgpu itself uses), with no capability beyond naga's defaults, so a broken
//! shader fails here, on any machine, before a device ever sees it.
#![cfg(feature = "wgpu")]

use stoker::backend::wgpu::shaders;

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

#[test]
fn the_augment_shader_has_its_entry_points() {
    let module = naga::front::wgsl::parse_str(shaders::AUGMENT).expect("augment.wgsl parses");
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
