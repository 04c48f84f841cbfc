//! The verdict on an epoch (`stoker::Stats::report`) for Python: `Epoch.report()`.

use pyo3::prelude::*;
use stoker::pipeline::{InputBound, Stage};

/// Whether the training waited for input, each stage's load, the bottleneck and what to
/// try next; `str(report)` says it in words.
#[pyclass(module = "stoker", frozen)]
pub struct Report {
    /// The caller's share of the wall time spent waiting for a batch.
    #[pyo3(get)]
    input_wait_fraction: f64,
    /// `"no"` (under 5 % waiting), `"moderately"` (5 % to 20 %) or `"highly"`.
    #[pyo3(get)]
    input_bound: &'static str,
    /// Each stage that worked, busiest first: `(stage, busy_seconds, threads,
    /// utilisation)`, the stage one of `"read"`, `"decode"`, `"augment"`,
    /// `"device_submit"`.
    #[pyo3(get)]
    stages: Vec<(&'static str, f64, usize, f64)>,
    /// When input-bound: the stage with the least slack.
    #[pyo3(get)]
    bottleneck: Option<&'static str>,
    /// What to try next, most promising first.
    #[pyo3(get)]
    advice: Vec<String>,
    /// `str(report)`: the verdict in words.
    text: String,
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Read => "read",
        Stage::Decode => "decode",
        Stage::Augment => "augment",
        _ => "device_submit",
    }
}

impl From<stoker::pipeline::Report> for Report {
    fn from(r: stoker::pipeline::Report) -> Self {
        Report {
            input_wait_fraction: r.input_wait_fraction,
            input_bound: match r.input_bound {
                InputBound::No => "no",
                InputBound::Moderately => "moderately",
                _ => "highly",
            },
            stages: r
                .stages
                .iter()
                .map(|s| {
                    (
                        stage_name(s.stage),
                        s.busy_seconds,
                        s.threads,
                        s.utilisation,
                    )
                })
                .collect(),
            bottleneck: r.bottleneck.map(stage_name),
            text: r.to_string(),
            advice: r.advice,
        }
    }
}

#[pymethods]
impl Report {
    fn __str__(&self) -> String {
        self.text.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "stoker.Report(input_bound={:?}, input_wait_fraction={:.3}, bottleneck={:?})",
            self.input_bound, self.input_wait_fraction, self.bottleneck
        )
    }
}
