//! Writes the synthetic shapes set the training examples train on (see
//! `examples/common/synth.rs`): `DIR/images/<class>/<stem>.jpg` and `DIR/masks/<stem>.png`,
//! for programs outside Rust that train on the same files (`python/examples/train.py`).
//!
//! ```sh
//! cargo run --release --example synth_shapes -- DIR [--images N] [--size PX] [--seed N]
//! ```

#[path = "common/synth.rs"]
#[allow(dead_code)]
mod synth;

use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut dir: Option<PathBuf> = None;
    let mut spec = synth::SynthSpec {
        count: 1600,
        size: 32,
        seed: 7,
    };
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> u64 {
            match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => v,
                None => {
                    eprintln!("{name} needs a number");
                    std::process::exit(2);
                }
            }
        };
        match a.as_str() {
            "--images" => spec.count = num("--images") as usize,
            "--size" => spec.size = num("--size") as u32,
            "--seed" => spec.seed = num("--seed"),
            "-h" | "--help" => {
                println!(
                    "usage: synth_shapes DIR [--images N] [--size PX] [--seed N] (defaults: 1600, 32, 7)"
                );
                return;
            }
            other if dir.is_none() && !other.starts_with('-') => dir = Some(other.into()),
            other => {
                eprintln!("unknown argument {other:?} (try --help)");
                std::process::exit(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("usage: synth_shapes DIR [--images N] [--size PX] [--seed N]");
        std::process::exit(2);
    };
    if spec.count < synth::CLASSES.len() || spec.size < 16 {
        eprintln!("--images must be at least 4 and --size at least 16");
        std::process::exit(2);
    }
    match synth::ensure(&dir, spec) {
        Ok(set) => println!(
            "{} images in {}, masks in {}",
            spec.count,
            set.images.display(),
            set.masks.display()
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
