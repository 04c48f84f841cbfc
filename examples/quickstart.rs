//! A fixed split, a training pipeline and a validation pipeline over the bundled sample
//! images: `cargo run --release --example quickstart [IMAGE_FOLDER]`.

use stoker::{Augment, DType, Dataset, OnError, Pipeline, SplitSpec};

fn main() -> stoker::Result<()> {
    let root = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/samples").to_string());
    // One sub-folder per class; the split is made once, before anything is shuffled.
    let split = Dataset::image_folder(&root)?.split(SplitSpec::fraction(0.34).seed(7))?;
    println!(
        "{} training and {} validation samples in classes {:?}",
        split.train().len(),
        split.val().len(),
        split.train().classes()
    );

    let train = Pipeline::builder(split.train())
        .augment(
            Augment::new()
                .random_resized_crop(224, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
                .flip_horizontal(0.5)
                .color_jitter(0.4, 0.4, 0.4)
                .normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
                .dtype(DType::F32),
        )
        .batch_size(2)
        .seed(42)
        .on_error(OnError::Skip)
        .build()?;
    let val = Pipeline::builder(split.val())
        .augment(Augment::validation(224).normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]))
        .batch_size(2)
        .build()?;
    println!("backend: {}", train.backend_reason());

    for epoch in 0..2 {
        let mut seen = 0;
        for batch in train.epoch(epoch)? {
            let batch = batch?;
            let images = batch.images::<f32>()?;
            let mean = images.iter().sum::<f32>() / images.len().max(1) as f32;
            println!(
                "epoch {epoch} batch {}: shape {:?}, labels {:?}, mean {mean:+.3}",
                batch.index(),
                batch.shape(),
                batch.labels()
            );
            seen += batch.len();
            for e in batch.errors() {
                eprintln!("skipped {}: {}", e.path, e.reason);
            }
        }
        let val_samples: usize = val
            .epoch(epoch)?
            .map(|b| b.map(|b| b.len()).unwrap_or(0))
            .sum();
        println!("epoch {epoch}: {seen} training samples, {val_samples} validation samples");
    }
    Ok(())
}
