//! The wgpu context opens on this machine's adapter (lavapipe in CI) and round-trips a
//! buffer. With `STOKER_REQUIRE_WGPU=1` a missing adapter fails instead of skipping.
#![cfg(feature = "wgpu")]

use crate::common;

#[test]
fn context_opens_and_reads_back() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    let buf = ctx.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 1000,
        usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    ctx.queue().write_buffer(&buf, 0, &data);
    assert_eq!(ctx.read_buffer(&buf, 0, 1000).unwrap(), data);
    assert_eq!(ctx.read_buffer(&buf, 8, 13).unwrap(), data[8..21]);
}

#[test]
fn the_opened_adapter_is_among_those_listed() {
    let Some(ctx) = common::wgpu_context() else {
        return;
    };
    let adapters = stoker::backend::wgpu::adapters();
    for a in &adapters {
        println!("adapter: {a}");
    }
    assert!(
        adapters.iter().any(|a| a == ctx.name()),
        "{} not in {adapters:?}",
        ctx.name()
    );
}
