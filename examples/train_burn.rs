//! A small convolutional classifier trained with burn on batches stoker makes on burn's own
//! device: the wgpu backend (a GPU, or Mesa's lavapipe where there is none) by default, or
//! burn's CPU backend with `--backend cpu`.
//!
//! `cargo run --release --features burn --example train_burn -- [--epochs N] [--json]
//! [--backend wgpu|cpu]`
//!
//! The data is a synthetic set of four shape classes the example writes as JPEG files on
//! first run (`examples/common/synth.rs`) and reads back through stoker like any image
//! folder: split once into training and validation, augmented on the device for training.
//! Each epoch prints the loss, the validation accuracy (and what the best constant guess
//! scores), images per second and the fraction of the time the step waited for input;
//! `--json` prints the same as JSON lines.

#[path = "common/synth.rs"]
#[allow(dead_code)]
mod synth;
#[path = "common/train.rs"]
#[allow(dead_code)]
mod train;

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{
    conv::Conv2d, conv::Conv2dConfig, BatchNorm, BatchNormConfig, Linear, LinearConfig,
    PaddingConfig2d, Relu,
};
use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Int, Tensor};
use stoker::Batch;
use train::{EpochReport, Options, Score};

/// Four strided convolutions with batch normalisation (a receptive field as wide as the
/// input), a global average and a linear layer.
#[derive(Module, Debug)]
struct Net {
    c1: Conv2d,
    c2: Conv2d,
    c3: Conv2d,
    c4: Conv2d,
    n1: BatchNorm,
    n2: BatchNorm,
    n3: BatchNorm,
    n4: BatchNorm,
    pool: AdaptiveAvgPool2d,
    head: Linear,
    act: Relu,
}

impl Net {
    fn new(classes: usize, device: &Device) -> Net {
        let conv = |i, o| {
            Conv2dConfig::new([i, o], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device)
        };
        Net {
            c1: conv(3, 16),
            c2: conv(16, 32),
            c3: conv(32, 64),
            c4: conv(64, 64),
            n1: BatchNormConfig::new(16).init(device),
            n2: BatchNormConfig::new(32).init(device),
            n3: BatchNormConfig::new(64).init(device),
            n4: BatchNormConfig::new(64).init(device),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: LinearConfig::new(128, classes).init(device),
            act: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let x = self.act.forward(self.n1.forward(self.c1.forward(x)));
        let x = self.act.forward(self.n2.forward(self.c2.forward(x)));
        let x = self.act.forward(self.n3.forward(self.c3.forward(x)));
        let x = self.act.forward(self.n4.forward(self.c4.forward(x)));
        let [n, c, h, w] = x.dims();
        // The strongest response of each feature anywhere (a corner, an edge, a curve)
        // with its mean.
        let max = x.clone().reshape([n, c, h * w]).max_dim(2).reshape([n, c]);
        let mean = self.pool.forward(x).reshape([n, c]);
        self.head.forward(Tensor::cat(vec![max, mean], 1))
    }
}

fn ints(t: Tensor<1, Int>) -> Vec<i64> {
    t.into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .unwrap_or_default()
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .ok()
        .and_then(|v| v.first().copied())
        .map_or(f64::NAN, f64::from)
}

/// The batch's images and labels as tensors on `device`.
fn inputs(batch: &Batch, device: &Device) -> Result<(Tensor<4>, Tensor<1, Int>), String> {
    let t = batch.to_burn(device).map_err(|e| e.to_string())?;
    let labels = t.labels.ok_or("a batch without labels")?;
    Ok((t.images, labels))
}

/// Trains as `o` says and returns each epoch's report.
pub fn run(o: &Options) -> Result<Vec<EpochReport>, Box<dyn std::error::Error>> {
    let device = match o.backend.as_deref() {
        None | Some("wgpu") => stoker::frameworks::burn::wgpu_device()?,
        // NdArray: burn 0.22 marks it deprecated in favour of Flex, which would be one
        // more backend to build; it is the CPU backend stoker's `burn` feature builds.
        #[allow(deprecated)]
        Some("cpu") => Device::ndarray(),
        Some(other) => return Err(format!("unknown --backend {other:?} (wgpu or cpu)").into()),
    };
    let name = format!("burn {device:?}");
    let split = train::dataset(o, false)?;
    let classes = split.train().classes().len();
    let pipes = train::pipelines(o, &split, |b| b.burn_device(&device))?;
    let train_dev = device.clone().autodiff();
    train_dev.seed(o.seed);
    let model = Net::new(classes, &train_dev);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&train_dev);
    let step = |model: Net, batch: &Batch| -> train::Res<(Net, f64)> {
        let (x, y) = inputs(batch, &train_dev)?;
        let loss = loss_fn.forward(model.forward(x), y);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        Ok((optim.step(o.lr, model, grads), scalar(loss)))
    };
    // Validation: the whole split, in order (so a batch may hold one class only: the
    // model runs in inference mode, its normalisation on the running statistics).
    let validate = |model: &Net, val_pipe: &stoker::Pipeline| -> train::Res<Score> {
        let eval = model.valid();
        let (mut right, mut seen) = (0usize, 0usize);
        let mut per_class = vec![0usize; classes];
        for batch in val_pipe.epoch(0)? {
            let batch = batch?;
            let (x, y) = inputs(&batch, &device)?;
            let guess = ints(eval.forward(x).argmax(1).reshape([batch.len()]));
            let truth = ints(y);
            for (g, t) in guess.iter().zip(&truth) {
                right += usize::from(g == t);
                if let Some(c) = per_class.get_mut(*t as usize) {
                    *c += 1;
                }
            }
            seen += truth.len();
        }
        Ok(Score {
            accuracy: Some(right as f64 / seen.max(1) as f64),
            miou: None,
            chance: *per_class.iter().max().unwrap_or(&0) as f64 / seen.max(1) as f64,
        })
    };
    train::train(o, &name, classes, &pipes, model, step, validate)
}

fn main() {
    train::main("train_burn", run);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run on burn's wgpu backend (lavapipe in CI): the validation accuracy must
    /// end well above what the best constant guess scores, which it cannot if the labels
    /// were not those of their images.
    #[test]
    fn learns_well_above_chance_on_wgpu() {
        if let Err(e) = stoker::frameworks::burn::wgpu_device() {
            assert!(
                std::env::var("STOKER_REQUIRE_WGPU").as_deref() != Ok("1"),
                "no wgpu device for burn: {e}"
            );
            eprintln!("skipped: no wgpu device for burn ({e})");
            return;
        }
        let mut o = Options::defaults("train_burn_test");
        o.backend = Some("wgpu".into());
        o.json = true;
        let reports = run(&o).expect("training runs");
        let last = reports.last().expect("an epoch");
        let acc = last.val_accuracy.expect("accuracy");
        assert!(
            acc > last.chance + 0.2,
            "validation accuracy {acc:.3} is not well above chance {:.3}: {reports:?}",
            last.chance
        );
        assert!(
            last.loss < reports[0].loss,
            "the loss did not fall: {reports:?}"
        );
    }
}
