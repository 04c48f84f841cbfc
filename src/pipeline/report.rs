//! The verdict of an epoch's [`Stats`]: whether the consumer waited for input, how busy
//! each stage of the pipeline was, which one held the others back, and what to try next.
//!
//! The rule of input pipelines is to prove a training input-bound before optimising its
//! input (the TensorFlow profiler's overview page does the same): the share of the
//! consumer's wall time spent waiting for a batch says whether; the stages' busy time
//! against the time they had says which. A stage's *utilisation* is its busy time over the
//! epoch's wall time times the threads that do its work: a stage near 1 has no slack left,
//! so when the consumer waits, the busiest stage is the bottleneck.
//!
//! The thresholds are the TensorFlow profiler's: under 5 % of the time waiting is not
//! input-bound, from 5 % to 20 % moderately, above 20 % highly.

use std::fmt;

use serde::Serialize;

use super::Stats;

/// Below this share of the wall time spent waiting, the input is not the bottleneck.
pub const INPUT_BOUND_MODERATE: f64 = 0.05;
/// Above this share, the training is highly input-bound.
pub const INPUT_BOUND_HIGH: f64 = 0.20;

/// How much the consumer waited for input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputBound {
    /// Under [`INPUT_BOUND_MODERATE`] of the time waiting: the consumer's own work (the
    /// training step) sets the pace.
    No,
    /// Between [`INPUT_BOUND_MODERATE`] and [`INPUT_BOUND_HIGH`].
    Moderately,
    /// Above [`INPUT_BOUND_HIGH`].
    Highly,
}

/// A stage of the pipeline whose busy time [`Stats`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The reader threads, reading compressed bytes (waiting on storage included).
    Read,
    /// The workers, decoding (on a GPU backend: the host's share of the decode, headers
    /// and whatever entropy decoding stays on the host).
    Decode,
    /// The workers, running the samples' plans (resize, crop, colour, normalise) on the
    /// host; on a GPU backend the device does this.
    Augment,
    /// The collector thread of a GPU backend: packing, uploading and submitting batches.
    DeviceSubmit,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Read => "reading",
            Stage::Decode => "decoding",
            Stage::Augment => "augmenting",
            Stage::DeviceSubmit => "device batch submission",
        })
    }
}

/// One stage's load over an epoch.
#[derive(Debug, Clone, Serialize)]
pub struct StageLoad {
    /// The stage.
    pub stage: Stage,
    /// Seconds its threads spent in it, summed over the threads.
    pub busy_seconds: f64,
    /// The threads that do its work (the workers are counted up to the cores).
    pub threads: usize,
    /// `busy_seconds / (wall_seconds * threads)`: 1 means no slack.
    pub utilisation: f64,
}

/// The verdict on an epoch: [`Stats::report`]. Its `Display` says it in words.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The consumer's share of the wall time spent waiting for a batch.
    pub input_wait_fraction: f64,
    /// What that share means.
    pub input_bound: InputBound,
    /// Every stage that did work, busiest first.
    pub stages: Vec<StageLoad>,
    /// When the training is input-bound: the busiest stage.
    pub bottleneck: Option<Stage>,
    /// What to try next, most promising first.
    pub advice: Vec<String>,
    /// Under autotune ([`Stats::autotuned`]): what it chose, in words (readers, workers
    /// and prefetch, from their initial values where they changed); `None` without it.
    pub autotuned: Option<String>,
}

impl Stats {
    /// The verdict on these statistics: input-bound or not, each stage's utilisation,
    /// the bottleneck and what to try (see [`Report`]). Meaningful for a finished epoch
    /// or one well under way; [`Report`]'s `Display` gives it in words.
    pub fn report(&self) -> Report {
        let wall = self.wall_seconds.max(f64::MIN_POSITIVE);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let host_threads = self.workers.clamp(1, cores);
        let mut stages: Vec<StageLoad> = [
            (Stage::Read, self.read_seconds, self.readers.max(1)),
            (Stage::Decode, self.decode_seconds, host_threads),
            (Stage::Augment, self.augment_seconds, host_threads),
            (Stage::DeviceSubmit, self.device_submit_seconds, 1),
        ]
        .into_iter()
        .filter(|&(_, busy, _)| busy > 0.0)
        .map(|(stage, busy_seconds, threads)| StageLoad {
            stage,
            busy_seconds,
            threads,
            utilisation: busy_seconds / (wall * threads as f64),
        })
        .collect();
        // Decode and augment share the workers: each one's utilisation is its share of
        // their time, and the pair's sum is what the workers had left.
        stages.sort_by(|a, b| b.utilisation.total_cmp(&a.utilisation));
        let f = self.input_wait_fraction;
        let input_bound = if f >= INPUT_BOUND_HIGH {
            InputBound::Highly
        } else if f >= INPUT_BOUND_MODERATE {
            InputBound::Moderately
        } else {
            InputBound::No
        };
        let bottleneck = match input_bound {
            InputBound::No => None,
            _ => self.busiest(&stages),
        };
        let advice = self.advice(input_bound, bottleneck, &stages);
        Report {
            input_wait_fraction: f,
            input_bound,
            stages,
            bottleneck,
            advice,
            autotuned: self.autotune_words(),
        }
    }

    /// What autotune chose, in words: each setting with `initial -> final` where it
    /// moved, and whether autotune or the caller set it.
    fn autotune_words(&self) -> Option<String> {
        if self.autotuned.is_empty() {
            return None;
        }
        let one = |name: &str, initial: usize, now: usize| {
            let value = match initial == now {
                true => now.to_string(),
                false => format!("{initial} -> {now}"),
            };
            let whose = match self.autotuned.iter().any(|a| a == name) {
                true => "",
                false => " (set)",
            };
            format!("{name} {value}{whose}")
        };
        Some(format!(
            "autotuned: {}, {}, {}",
            one("readers", self.initial_readers, self.readers),
            one("workers", self.initial_workers, self.workers),
            one("prefetch", self.initial_prefetch, self.prefetch),
        ))
    }

    /// The stage with the least slack: the workers' two stages count together, since
    /// they share the same threads.
    fn busiest(&self, stages: &[StageLoad]) -> Option<Stage> {
        let load = |s: Stage| {
            stages
                .iter()
                .find(|l| l.stage == s)
                .map_or(0.0, |l| l.utilisation)
        };
        let workers = load(Stage::Decode) + load(Stage::Augment);
        let worker_stage = if load(Stage::Decode) >= load(Stage::Augment) {
            Stage::Decode
        } else {
            Stage::Augment
        };
        [
            (Stage::Read, load(Stage::Read)),
            (worker_stage, workers),
            (Stage::DeviceSubmit, load(Stage::DeviceSubmit)),
        ]
        .into_iter()
        .filter(|&(_, u)| u > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(s, _)| s)
    }

    fn advice(
        &self,
        input_bound: InputBound,
        bottleneck: Option<Stage>,
        stages: &[StageLoad],
    ) -> Vec<String> {
        let mut out = Vec::new();
        let Some(stage) = bottleneck else {
            if input_bound == InputBound::No {
                out.push(
                    "the training step sets the pace: faster input would not speed it up"
                        .to_string(),
                );
            }
            return out;
        };
        let top = stages.iter().map(|s| s.utilisation).fold(0.0, f64::max);
        let samples = (self.samples_delivered + self.samples_reported).max(1) as f64;
        match stage {
            Stage::Read => {
                out.push(format!(
                    "reads take {:.1} ms a sample on {} reader threads: raise `readers` \
                     (remote storage wants many requests in flight), or read from faster \
                     storage",
                    1e3 * self.read_seconds / samples,
                    self.readers
                ));
            }
            Stage::Decode if self.on_device => {
                if self.host_entropy > 0 {
                    out.push(format!(
                        "{} of {} JPEGs were entropy-decoded on the host: `stoker convert` \
                         (restart markers) lets the device decode them whole",
                        self.host_entropy, self.gpu_decoded
                    ));
                }
                if self.cpu_fallbacks > 0 {
                    out.push(format!(
                        "{} samples were decoded on the CPU instead (formats or JPEG \
                         features the device path does not take)",
                        self.cpu_fallbacks
                    ));
                }
                out.push(self.more_workers());
            }
            Stage::Decode => {
                out.push(format!(
                    "decoding takes {:.1} ms a sample on the CPU: a GPU backend (wgpu or \
                     CUDA) decodes on the device",
                    1e3 * self.decode_seconds / samples
                ));
                out.push(self.more_workers());
            }
            Stage::Augment => {
                out.push(format!(
                    "the host's resize and augmentation take {:.1} ms a sample: a GPU \
                     backend runs them on the device, a smaller decode scale (crop-aware \
                     decoding) gives them fewer pixels",
                    1e3 * self.augment_seconds / samples
                ));
                out.push(self.more_workers());
            }
            Stage::DeviceSubmit => out.push(
                "the collector thread that packs and submits device batches is the busiest: \
                 larger batches amortise its fixed cost"
                    .to_string(),
            ),
        }
        if top < 0.5 {
            out.push(format!(
                "no stage is near its capacity ({:.0} % at most): input comes in bursts; a \
                 deeper `prefetch` (now {}) absorbs them",
                100.0 * top,
                self.prefetch
            ));
        }
        out
    }

    fn more_workers(&self) -> String {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if self.workers < cores {
            format!("{} workers on {cores} cores: raise `workers`", self.workers)
        } else {
            format!("{} workers already use the {cores} cores", self.workers)
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = 100.0 * self.input_wait_fraction;
        match self.input_bound {
            InputBound::No => writeln!(
                f,
                "not input-bound: waited for input {pct:.1} % of the time"
            )?,
            InputBound::Moderately => writeln!(
                f,
                "moderately input-bound: waited for input {pct:.1} % of the time"
            )?,
            InputBound::Highly => writeln!(
                f,
                "highly input-bound: waited for input {pct:.1} % of the time"
            )?,
        }
        for s in &self.stages {
            writeln!(
                f,
                "  {:<24} {:>8.2} s busy on {:>2} thread(s), {:>5.1} % utilised",
                s.stage.to_string(),
                s.busy_seconds,
                s.threads,
                100.0 * s.utilisation
            )?;
        }
        if let Some(b) = self.bottleneck {
            writeln!(f, "bottleneck: {b}")?;
        }
        if let Some(a) = &self.autotuned {
            writeln!(f, "{a}")?;
        }
        for a in &self.advice {
            writeln!(f, "- {a}")?;
        }
        Ok(())
    }
}
