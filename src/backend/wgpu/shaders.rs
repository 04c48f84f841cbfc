//! The WGSL sources, compiled into the binary and turned into pipelines at run time.

/// Dequantisation and IDCT of JPEG blocks (8x8, 4x4, 2x2 or 1x1 outputs).
pub const IDCT: &str = include_str!("../../../shaders/idct.wgsl");
/// Chroma upsampling and colour conversion to RGB.
pub const COLOR: &str = include_str!("../../../shaders/color.wgsl");
/// The fused per-plane pass: crop, resize, flip, jitter, normalise, layout, dtype.
pub const AUGMENT: &str = include_str!("../../../shaders/augment.wgsl");

/// Every shader, by file name.
pub const ALL: [(&str, &str); 3] = [
    ("idct.wgsl", IDCT),
    ("color.wgsl", COLOR),
    ("augment.wgsl", AUGMENT),
];

/// A compute pipeline from `source` with its layout derived from the shader.
pub fn pipeline(
    device: &wgpu::Device,
    name: &str,
    source: &str,
    entry: &str,
) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(name),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(entry),
        layout: None,
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    })
}
