//! A small segmentation network trained with candle on images and masks from one stoker
//! pipeline: on CUDA where there is a GPU (feature `candle-cuda`), on the CPU otherwise or
//! with `--backend cpu`.
//!
//! `cargo run --release --features candle --example train_candle -- [--epochs N] [--json]
//! [--backend cuda|cpu]`
//!
//! The data is the synthetic shapes set of `examples/common/synth.rs` (written as JPEG
//! files with PNG masks on first run, then read through stoker like any dataset): each
//! pixel is background or the class of the shape it lies in. The training pipeline crops,
//! flips and jitters the images; the masks get the same geometry, nearest-neighbour, and
//! no colour change. Each epoch prints the loss, the mean IoU on the validation split
//! (and what predicting background everywhere scores), images per second and the fraction
//! of the time the step waited for input; `--json` prints the same as JSON lines.

#[path = "common/synth.rs"]
#[allow(dead_code)]
mod synth;
#[path = "common/train.rs"]
#[allow(dead_code)]
mod train;

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{conv2d, Conv2d, Conv2dConfig, Optimizer, ParamsAdamW, VarBuilder, VarMap};
use stoker::Pipeline;
use train::{Clock, EpochReport, Options};

/// A strided encoder with dilated convolutions (a receptive field wider than the largest
/// shape), upsampled and joined with the full-resolution features, then a per-pixel head.
struct Net {
    c1: Conv2d,
    c2: Conv2d,
    c3: Conv2d,
    c4: Conv2d,
    c5: Conv2d,
    head: Conv2d,
}

fn conv_cfg(padding: usize, stride: usize, dilation: usize) -> Conv2dConfig {
    Conv2dConfig {
        padding,
        stride,
        dilation,
        ..Default::default()
    }
}

impl Net {
    fn new(classes: usize, vb: VarBuilder) -> candle_core::Result<Net> {
        Ok(Net {
            c1: conv2d(3, 16, 3, conv_cfg(1, 1, 1), vb.pp("c1"))?,
            c2: conv2d(16, 32, 3, conv_cfg(1, 2, 1), vb.pp("c2"))?,
            c3: conv2d(32, 32, 3, conv_cfg(2, 1, 2), vb.pp("c3"))?,
            c4: conv2d(32, 32, 3, conv_cfg(4, 1, 4), vb.pp("c4"))?,
            c5: conv2d(48, 16, 3, conv_cfg(1, 1, 1), vb.pp("c5"))?,
            head: conv2d(16, classes, 1, conv_cfg(0, 1, 1), vb.pp("head"))?,
        })
    }

    /// `[N, 3, H, W]` to per-pixel logits `[N, classes, H, W]`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let (_, _, h, w) = x.dims4()?;
        let f1 = self.c1.forward(x)?.relu()?;
        let f = self.c2.forward(&f1)?.relu()?;
        let f = self.c3.forward(&f)?.relu()?;
        let f = self.c4.forward(&f)?.relu()?;
        let up = f.upsample_nearest2d(h, w)?;
        let f = self.c5.forward(&Tensor::cat(&[&up, &f1], 1)?)?.relu()?;
        self.head.forward(&f)
    }
}

/// Per-pixel cross entropy of `[N, K, H, W]` logits against `[N, H, W]` u32 class ids.
fn pixel_loss(logits: &Tensor, masks: &Tensor) -> candle_core::Result<Tensor> {
    let k = logits.dim(1)?;
    let flat = logits.permute((0, 2, 3, 1))?.reshape(((), k))?;
    candle_nn::loss::cross_entropy(&flat, &masks.flatten_all()?)
}

/// The device `--backend` names.
fn device(o: &Options) -> Result<Device, Box<dyn std::error::Error>> {
    Ok(match o.backend.as_deref() {
        Some("cpu") => Device::Cpu,
        Some("cuda") => Device::new_cuda(0)?,
        None => Device::cuda_if_available(0)?,
        Some(other) => return Err(format!("unknown --backend {other:?} (cuda or cpu)").into()),
    })
}

/// Trains as `o` says and returns each epoch's report.
pub fn run(o: &Options) -> Result<Vec<EpochReport>, Box<dyn std::error::Error>> {
    let device = device(o)?;
    let name = format!("candle {:?}", device.location());
    let split = train::dataset(o, true)?;
    // Background and one class per shape.
    let classes = split.train().classes().len() + 1;
    let train_pipe = train::common(Pipeline::builder(split.train()), o)
        .candle_device(&device)
        .augment(train::train_augment(o))
        .build()?;
    let val_pipe = train::common(Pipeline::builder(split.val()), o)
        .candle_device(&device)
        .augment(train::val_augment(o))
        .build()?;
    let varmap = VarMap::new();
    let net = Net::new(
        classes,
        VarBuilder::from_varmap(&varmap, DType::F32, &device),
    )?;
    let mut opt = candle_nn::AdamW::new(
        varmap.all_vars(),
        ParamsAdamW {
            lr: o.lr,
            weight_decay: 0.0,
            ..Default::default()
        },
    )?;
    let mut reports = Vec::new();
    for epoch in 0..o.epochs {
        let mut clock = Clock::start();
        let mut batches = train_pipe.epoch(epoch)?;
        let (mut loss_sum, mut steps) = (0.0, 0usize);
        while let Some(batch) = clock.wait(|| batches.next()) {
            let batch = batch?;
            let t = batch.to_candle(&device)?;
            let masks = t.masks.ok_or("a batch without masks")?;
            let loss = pixel_loss(&net.forward(&t.images)?, &masks)?;
            opt.backward_step(&loss)?;
            loss_sum += f64::from(loss.to_scalar::<f32>()?);
            steps += 1;
            clock.samples += batch.len();
        }
        let (images_per_s, input_wait_fraction) = clock.rates();
        // Validation: intersection and union per class over the whole split.
        let (mut inter, mut union) = (vec![0u64; classes], vec![0u64; classes]);
        let mut truth_count = vec![0u64; classes];
        for batch in val_pipe.epoch(0)? {
            let batch = batch?;
            let t = batch.to_candle(&device)?;
            let masks = t.masks.ok_or("a batch without masks")?;
            let guess = net.forward(&t.images)?.argmax(D::Minus(3))?;
            let guess = guess.flatten_all()?.to_vec1::<u32>()?;
            let truth = masks.flatten_all()?.to_vec1::<u32>()?;
            for (&g, &t) in guess.iter().zip(&truth) {
                let (g, t) = (g as usize, t as usize);
                if t >= classes || g >= classes {
                    continue;
                }
                truth_count[t] += 1;
                if g == t {
                    inter[t] += 1;
                    union[t] += 1;
                } else {
                    union[t] += 1;
                    union[g] += 1;
                }
            }
        }
        let miou = mean_iou(&inter, &union);
        // Predicting background everywhere: IoU of the background share, 0 elsewhere.
        let total: u64 = truth_count.iter().sum();
        let present = truth_count.iter().filter(|&&c| c > 0).count().max(1);
        let chance = truth_count[0] as f64 / total.max(1) as f64 / present as f64;
        let report = EpochReport {
            epoch,
            loss: loss_sum / steps.max(1) as f64,
            val_accuracy: None,
            val_miou: Some(miou),
            classes,
            chance,
            images_per_s,
            input_wait_fraction,
            device: name.clone(),
        };
        report.print(o.json);
        reports.push(report);
    }
    Ok(reports)
}

/// The mean over the classes that occur (a non-empty union) of intersection over union.
fn mean_iou(inter: &[u64], union: &[u64]) -> f64 {
    let ious: Vec<f64> = inter
        .iter()
        .zip(union)
        .filter(|(_, &u)| u > 0)
        .map(|(&i, &u)| i as f64 / u as f64)
        .collect();
    ious.iter().sum::<f64>() / ious.len().max(1) as f64
}

fn main() {
    let o = match Options::parse("train_candle", std::env::args().skip(1)) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_iou_counts_only_present_classes() {
        assert_eq!(mean_iou(&[5, 0, 1], &[10, 0, 4]), (0.5 + 0.25) / 2.0);
    }
}
