//! stoker's log messages in a program of your own: stoker logs through the `log` facade,
//! so whatever logger the program installs shows them. Here `env_logger`, at info level
//! for stoker unless `RUST_LOG` says otherwise:
//!
//! `cargo run --example logging [IMAGE_FOLDER]`, or `RUST_LOG=stoker=debug cargo run ...`
//!
//! The backend choice is logged at info level under the target `stoker::backend`
//! (`backend: auto: chose cpu (cuda: ...; wgpu: ...)`); without a logger it goes nowhere.

use stoker::{Augment, BackendKind, Dataset, OnError, Pipeline};

fn main() -> stoker::Result<()> {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("stoker=info"))
        .init();
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/samples").to_string());
    let data = Dataset::image_folder(&root)?;
    // `Auto` tries CUDA, then a hardware wgpu adapter, then the CPU, and logs why.
    let pipe = Pipeline::builder(data.all())
        .backend(BackendKind::Auto)
        .augment(Augment::validation(64))
        .batch_size(4)
        .on_error(OnError::Skip)
        .build()?;
    let mut delivered = 0;
    for batch in pipe.epoch(0)? {
        let batch = batch?;
        delivered += batch.len();
        // A sample that could not be read or decoded: its id, path and why.
        for e in batch.errors() {
            log::warn!("skipped {}: {}", e.path, e.reason);
        }
    }
    println!(
        "{delivered} samples on {} in {} batches ({})",
        pipe.backend().device(),
        pipe.num_batches(),
        pipe.backend_reason()
    );
    Ok(())
}
