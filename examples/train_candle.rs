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
use candle_nn::{
    batch_norm, conv2d, BatchNorm, Conv2d, Conv2dConfig, ModuleT, Optimizer, ParamsAdamW,
    VarBuilder, VarMap,
};
use train::{EpochReport, Options, Score};

/// Four full-resolution convolutions of growing dilation (a receptive field wider than the
/// largest shape) with batch normalisation, and a per-pixel head.
struct Net {
    convs: Vec<(Conv2d, BatchNorm)>,
    head: Conv2d,
}

impl Net {
    fn new(classes: usize, vb: VarBuilder) -> candle_core::Result<Net> {
        let mut convs = Vec::new();
        for (i, (cin, cout, dilation)) in [(3, 16, 1), (16, 32, 2), (32, 32, 4), (32, 32, 8)]
            .into_iter()
            .enumerate()
        {
            let cfg = Conv2dConfig {
                padding: dilation,
                dilation,
                ..Default::default()
            };
            convs.push((
                conv2d(cin, cout, 3, cfg, vb.pp(format!("c{i}")))?,
                batch_norm(cout, 1e-5, vb.pp(format!("n{i}")))?,
            ));
        }
        let head = conv2d(32, classes, 1, Conv2dConfig::default(), vb.pp("head"))?;
        Ok(Net { convs, head })
    }

    /// `[N, 3, H, W]` to per-pixel logits `[N, classes, H, W]`; `train` selects batch
    /// statistics (training) or the running ones (validation, whose batches may hold
    /// one class only).
    fn forward(&self, x: &Tensor, train: bool) -> candle_core::Result<Tensor> {
        let mut f = x.clone();
        for (conv, norm) in &self.convs {
            f = norm.forward_t(&conv.forward(&f)?, train)?.relu()?;
        }
        self.head.forward(&f)
    }
}

/// Per-pixel cross entropy of `[N, K, H, W]` logits against `[N, H, W]` u32 class ids.
fn pixel_loss(logits: &Tensor, masks: &Tensor) -> candle_core::Result<Tensor> {
    let k = logits.dim(1)?;
    let flat = logits.permute((0, 2, 3, 1))?.reshape(((), k))?;
    candle_nn::loss::cross_entropy(&flat, &masks.flatten_all()?)
}

/// The device `--backend` names; by default CUDA where candle can open it (feature
/// `candle-cuda`), the CPU otherwise. CUDA runs on a stream of its own
/// (`new_cuda_with_stream`): stoker and candle order their work on it.
fn device(o: &Options) -> Result<Device, Box<dyn std::error::Error>> {
    Ok(match o.backend.as_deref() {
        Some("cpu") => Device::Cpu,
        Some("cuda") => Device::new_cuda_with_stream(0)?,
        None => Device::new_cuda_with_stream(0).unwrap_or(Device::Cpu),
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
    let pipes = train::pipelines(o, &split, |b| b.candle_device(&device))?;
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
    train::train(
        o,
        &name,
        classes,
        &pipes,
        &net,
        |net, batch| {
            let t = batch.to_candle(&device)?;
            let masks = t.masks.ok_or("a batch without masks")?;
            let loss = pixel_loss(&net.forward(&t.images, true)?, &masks)?;
            opt.backward_step(&loss)?;
            Ok((net, f64::from(loss.to_scalar::<f32>()?)))
        },
        // Validation: intersection and union per class over the whole split.
        |net, val_pipe| {
            let (mut inter, mut union) = (vec![0u64; classes], vec![0u64; classes]);
            let mut truth_count = vec![0u64; classes];
            for batch in val_pipe.epoch(0)? {
                let batch = batch?;
                let t = batch.to_candle(&device)?;
                let masks = t.masks.ok_or("a batch without masks")?;
                let guess = net.forward(&t.images, false)?.argmax(D::Minus(3))?;
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
            // Predicting background everywhere: IoU of the background share, 0 elsewhere.
            let total: u64 = truth_count.iter().sum();
            let present = truth_count.iter().filter(|&&c| c > 0).count().max(1);
            Ok(Score {
                accuracy: None,
                miou: Some(mean_iou(&inter, &union)),
                chance: truth_count[0] as f64 / total.max(1) as f64 / present as f64,
            })
        },
    )
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
    train::main("train_candle", run);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short run on the CPU: the validation mean IoU must end well above what
    /// predicting background everywhere scores, which it cannot if the masks were not
    /// those of their images or did not get the images' geometry.
    #[test]
    fn segments_well_above_chance() {
        let mut o = Options::defaults("train_candle_test");
        o.backend = Some("cpu".into());
        o.images = 800;
        o.size = 24;
        o.lr = 0.01;
        o.json = true;
        let reports = run(&o).expect("training runs");
        let last = reports.last().expect("an epoch");
        let miou = last.val_miou.expect("mean IoU");
        assert!(
            miou > 1.8 * last.chance && miou > last.chance + 0.1,
            "validation mean IoU {miou:.3} is not well above chance {:.3}: {reports:?}",
            last.chance
        );
        assert!(
            last.loss < reports[0].loss,
            "the loss did not fall: {reports:?}"
        );
    }

    #[test]
    fn mean_iou_counts_only_present_classes() {
        assert_eq!(mean_iou(&[5, 0, 1], &[10, 0, 4]), (0.5 + 0.25) / 2.0);
    }
}
