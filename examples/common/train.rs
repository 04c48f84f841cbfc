//! What the two training examples share: their command line, the synthetic set's split
//! and pipelines, the epoch loop with the clock that splits each step into waiting for
//! input and training, and the per-epoch report (a line of text, or a JSON line with
//! `--json`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use stoker::{Augment, Batch, DType, Dataset, Pipeline, PipelineBuilder, Split, SplitSpec};

use super::synth::{self, SynthSpec};

/// The examples' options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Epochs to train (`--epochs N`).
    pub epochs: u64,
    /// JSON lines instead of text (`--json`).
    pub json: bool,
    /// `--backend wgpu|cpu` (burn) or `--backend cuda|cpu` (candle); `None`: the best
    /// there is.
    pub backend: Option<String>,
    /// Images in the synthetic set (`--images N`).
    pub images: usize,
    /// Side of the written images and of the network's input (`--size PX`).
    pub size: u32,
    /// Samples per batch (`--batch N`).
    pub batch: usize,
    /// Where the set is written (`--data DIR`).
    pub data: PathBuf,
    /// Learning rate (`--lr X`).
    pub lr: f64,
    /// Seed of the set, the split, the pipeline and the weights (`--seed N`).
    pub seed: u64,
}

impl Options {
    /// The defaults of `example` (`"train_burn"`, `"train_candle"`): a set written under
    /// the target folder.
    pub fn defaults(example: &str) -> Options {
        Options {
            epochs: 8,
            json: false,
            backend: None,
            images: 1600,
            size: 32,
            batch: 16,
            data: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("target")
                .join("synthetic-shapes")
                .join(example),
            lr: 3e-3,
            seed: 7,
        }
    }

    /// The options of `args` (the command line without the program), over the defaults.
    pub fn parse(example: &str, args: impl IntoIterator<Item = String>) -> Result<Options, String> {
        let mut o = Options::defaults(example);
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
            match a.as_str() {
                "--json" => o.json = true,
                "--epochs" => o.epochs = num(&value("--epochs")?)?,
                "--images" => o.images = num(&value("--images")?)?,
                "--size" => o.size = num(&value("--size")?)?,
                "--batch" => o.batch = num(&value("--batch")?)?,
                "--seed" => o.seed = num(&value("--seed")?)?,
                "--lr" => o.lr = num(&value("--lr")?)?,
                "--backend" => o.backend = Some(value("--backend")?),
                "--data" => o.data = PathBuf::from(value("--data")?),
                "-h" | "--help" => {
                    return Err(format!(
                        "usage: cargo run --release --example {example} --features {} -- \
                         [--epochs N] [--json] [--backend NAME] [--images N] [--size PX] \
                         [--batch N] [--lr X] [--seed N] [--data DIR]",
                        example.trim_start_matches("train_")
                    ))
                }
                other => return Err(format!("unknown argument {other:?} (try --help)")),
            }
        }
        if o.images < 20 || o.size < 16 || o.batch == 0 || o.epochs == 0 {
            return Err("--images must be at least 20, --size 16, --batch and --epochs 1".into());
        }
        Ok(o)
    }
}

/// The examples' `main`: parses the command line (exit status 2 on a bad one), runs
/// `run` (exit status 1 on an error).
pub fn main<T>(example: &str, run: fn(&Options) -> Result<T, Box<dyn std::error::Error>>) {
    let o = match Options::parse(example, std::env::args().skip(1)) {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("not a number: {s:?}"))
}

/// The set on disk, split once (by a fixed seed, before any shuffle) into training and
/// validation, with masks when `masks` is set.
pub fn dataset(o: &Options, masks: bool) -> Result<Split, Box<dyn std::error::Error>> {
    let set = synth::ensure(
        &o.data,
        SynthSpec {
            count: o.images,
            size: o.size,
            seed: o.seed,
        },
    )?;
    let mut data = Dataset::image_folder(&set.images)?;
    if masks {
        data = data.with_masks(&set.masks)?;
    }
    Ok(data.split(SplitSpec::fraction(0.2).seed(o.seed))?)
}

/// The training augmentation: a random resized crop of most of the image (the shape
/// stays mostly in view), flips, a colour jitter, normalised `f32` in `[N, 3, H, W]`.
/// Masks follow the geometry, nearest-neighbour.
pub fn train_augment(o: &Options) -> Augment {
    Augment::new()
        .random_resized_crop(o.size, (0.8, 1.0), (3.0 / 4.0, 4.0 / 3.0))
        .flip_horizontal(0.5)
        .color_jitter(0.2, 0.2, 0.2)
        .normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])
        .dtype(DType::F32)
}

/// The validation transform: the whole image, normalised as in training.
pub fn val_augment(o: &Options) -> Augment {
    Augment::new()
        .resize(o.size, o.size)
        .normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25])
        .dtype(DType::F32)
}

/// The training and the validation pipeline of `split`, on the device `on` sets, with the
/// batch size and seed of `o`.
pub fn pipelines(
    o: &Options,
    split: &Split,
    on: impl Fn(PipelineBuilder) -> PipelineBuilder,
) -> stoker::Result<(Pipeline, Pipeline)> {
    let build = |subset, augment| {
        on(Pipeline::builder(subset))
            .augment(augment)
            .batch_size(o.batch)
            .seed(o.seed)
            .prefetch(3)
            .build()
    };
    Ok((
        build(split.train(), train_augment(o))?,
        build(split.val(), val_augment(o))?,
    ))
}

/// What the examples' fallible steps return.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The validation split's score: classification accuracy or segmentation mean IoU, and
/// what the best constant prediction scores.
#[derive(Debug, Clone, Copy)]
pub struct Score {
    /// Validation accuracy (classification).
    pub accuracy: Option<f64>,
    /// Validation mean IoU over the classes (segmentation).
    pub miou: Option<f64>,
    /// What the best constant prediction scores.
    pub chance: f64,
}

/// Trains for `o.epochs` epochs on the first of `pipes` and scores each on the second:
/// `step` takes the model through one optimiser step on a batch and returns it with the
/// batch's loss, `validate` scores it. Each epoch's report (of `classes` classes, on
/// `device`) is printed as `o` says; returns them all.
pub fn train<M>(
    o: &Options,
    device: &str,
    classes: usize,
    pipes: &(Pipeline, Pipeline),
    mut model: M,
    mut step: impl FnMut(M, &Batch) -> Res<(M, f64)>,
    mut validate: impl FnMut(&M, &Pipeline) -> Res<Score>,
) -> Res<Vec<EpochReport>> {
    let (train_pipe, val_pipe) = pipes;
    let mut reports = Vec::new();
    for epoch in 0..o.epochs {
        let mut clock = Clock::start();
        let mut batches = train_pipe.epoch(epoch)?;
        let (mut loss_sum, mut steps) = (0.0, 0usize);
        while let Some(batch) = clock.wait(|| batches.next()) {
            let batch = batch?;
            let (stepped, loss) = step(model, &batch)?;
            model = stepped;
            loss_sum += loss;
            steps += 1;
            clock.samples += batch.len();
        }
        let (images_per_s, input_wait_fraction) = clock.rates();
        let score = validate(&model, val_pipe)?;
        let report = EpochReport {
            epoch,
            loss: loss_sum / steps.max(1) as f64,
            val_accuracy: score.accuracy,
            val_miou: score.miou,
            classes,
            chance: score.chance,
            images_per_s,
            input_wait_fraction,
            device: device.to_string(),
        };
        report.print(o.json);
        reports.push(report);
    }
    Ok(reports)
}

/// Splits an epoch's time into waiting for the next batch and the rest (the step).
#[derive(Debug)]
pub struct Clock {
    start: Instant,
    waiting: Duration,
    /// Samples trained on.
    pub samples: usize,
}

impl Clock {
    /// Starts an epoch.
    pub fn start() -> Clock {
        Clock {
            start: Instant::now(),
            waiting: Duration::ZERO,
            samples: 0,
        }
    }

    /// Runs `next` (the pipeline's `next()`), counting its time as waiting for input.
    pub fn wait<T>(&mut self, next: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = next();
        self.waiting += t.elapsed();
        out
    }

    /// Images per second and the fraction of the time spent waiting for input.
    pub fn rates(&self) -> (f64, f64) {
        let total = self.start.elapsed().as_secs_f64().max(1e-9);
        (
            self.samples as f64 / total,
            self.waiting.as_secs_f64() / total,
        )
    }
}

/// One epoch's figures.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EpochReport {
    /// The epoch.
    pub epoch: u64,
    /// Mean training loss.
    pub loss: f64,
    /// Validation accuracy (classification).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub val_accuracy: Option<f64>,
    /// Validation mean IoU over the classes (segmentation).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub val_miou: Option<f64>,
    /// Classes (segmentation: with the background).
    pub classes: usize,
    /// What the best constant prediction scores on the validation split (accuracy or
    /// mean IoU): the line "well above chance" is drawn against.
    pub chance: f64,
    /// Training images per second over the epoch.
    pub images_per_s: f64,
    /// Fraction of the training epoch's time spent waiting for the next batch.
    pub input_wait_fraction: f64,
    /// Where the tensors lived.
    pub device: String,
}

impl EpochReport {
    /// Prints the report as text or as a JSON line.
    pub fn print(&self, json: bool) {
        if json {
            println!("{}", serde_json::to_string(self).unwrap_or_default());
            return;
        }
        let metric = match (self.val_accuracy, self.val_miou) {
            (Some(a), _) => format!("val accuracy {:.3}", a),
            (_, Some(m)) => format!("val mIoU {:.3}", m),
            _ => String::new(),
        };
        println!(
            "epoch {}: loss {:.4}, {metric} (chance {:.3}), {:.0} images/s, waiting for input {:.1} % ({})",
            self.epoch,
            self.loss,
            self.chance,
            self.images_per_s,
            100.0 * self.input_wait_fraction,
            self.device
        );
    }
}
