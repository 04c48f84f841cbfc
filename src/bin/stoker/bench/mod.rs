//! `stoker bench`: decode throughput, the full pipeline, and the overlap experiment, one
//! module each; with no sub-command, all three with their defaults on the CPU.
//!
//! Each module builds a typed report (its JSON object) and renders the table from it.

pub mod decode;
pub mod overlap;
pub mod pipeline;
pub mod plot;

use std::path::Path;

use serde::Serialize;
use stoker::BackendKind;

use crate::args::ArgError;
use crate::common::{Ctx, Report, Res, Table};

/// At least 1 (a value parser for counts and sizes).
pub fn positive(s: &str) -> Result<usize, ArgError> {
    match s.trim().parse::<usize>()? {
        0 => Err(ArgError::Zero),
        n => Ok(n),
    }
}

/// The longest simulated step or load, in milliseconds (an hour): a longer one is a typo,
/// and a run that sleeps for ages looks like a hang.
pub const MAX_MS: u64 = 3_600_000;

/// Milliseconds from 0 to [`MAX_MS`] (a value parser for simulated times).
pub fn millis(s: &str) -> Result<u64, ArgError> {
    match s.trim().parse::<u64>()? {
        n if n <= MAX_MS => Ok(n),
        ms => Err(ArgError::TooManyMillis { ms, max: MAX_MS }),
    }
}

/// One backend's entry of a report's `results`: its measured run `R`, or `U`, what the
/// report says of a backend this build or machine lacks.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum BenchResult<R, U> {
    Ran(R),
    Unavailable(U),
}

/// A backend this build or machine lacks, in a report's `results`.
trait Unavailable {
    /// The backend's name.
    fn backend(&self) -> &str;
    /// Why it did not run.
    fn error(&self) -> &str;
}

/// A report's table: `header`, then a row per entry of `results` in order, by `ran` for
/// a measured run (which may also add notes) and `unavailable` with a note of the reason
/// for a backend that did not run. Returns the table and its notes.
fn results_table<R, U: Unavailable>(
    header: &[&str],
    results: &[BenchResult<R, U>],
    mut ran: impl FnMut(&R, &mut Table, &mut String),
) -> (Table, String) {
    let mut t = Table::new(header);
    let mut notes = String::new();
    for r in results {
        match r {
            BenchResult::Ran(r) => ran(r, &mut t, &mut notes),
            BenchResult::Unavailable(u) => {
                t.row(vec![u.backend().to_string(), "unavailable".into()]);
                notes.push_str(&format!("{}: {}\n", u.backend(), u.error()));
            }
        }
    }
    (t, notes)
}

/// The table, then the notes (if any) after a blank line.
fn with_notes(t: &Table, notes: &str) -> String {
    let gap = if notes.is_empty() { "" } else { "\n" };
    format!("{}{gap}{notes}", t.render())
}

/// A benchmark's typed report: its JSON object (serde), its table and its chart.
trait BenchReport: Serialize {
    /// Draws the `--plot` chart to `path`.
    fn plot(&self, path: &Path) -> Res<()>;
    /// The table (with its notes).
    fn text(&self) -> String;
}

/// The [`Report`] of `r`: its JSON object and its table, the chart first written to
/// `plot` when one was asked for.
fn plotted(r: &impl BenchReport, plot: Option<&Path>) -> Res<Report> {
    if let Some(path) = plot {
        plot::save(path, |p| r.plot(p))?;
    }
    Report::new(r, r.text())
}

/// The JSON object of `bench` with no sub-command.
#[derive(Debug, Serialize)]
struct AllReport {
    decode: decode::DecodeReport,
    pipeline: pipeline::PipelineReport,
    overlap: overlap::OverlapReport,
}

/// `bench` with no sub-command: the three benchmarks with their defaults, on the CPU.
pub fn all(ctx: Ctx) -> Res<Report> {
    let mut d: decode::DecodeBenchArgs = crate::defaults()?;
    d.backend = vec![BackendKind::Cpu];
    let mut p: pipeline::PipelineBenchArgs = crate::defaults()?;
    p.backend = vec![BackendKind::Cpu];
    let o: overlap::OverlapArgs = crate::defaults()?;
    let r = AllReport {
        decode: decode::measure(ctx, &d)?,
        pipeline: pipeline::measure(ctx, &p)?,
        overlap: overlap::measure(ctx, &o)?,
    };
    let text = format!(
        "{}\n{}\n{}",
        r.decode.text(),
        r.pipeline.text(),
        r.overlap.text()
    );
    Report::new(&r, text)
}
