//! `stoker bench`: decode throughput, the full pipeline, and the overlap experiment, one
//! module each; with no sub-command, all three with their defaults on the CPU.
//!
//! Each module builds a typed report (its JSON object) and renders the table from it.

pub mod decode;
pub mod overlap;
pub mod pipeline;

use serde::Serialize;
use stoker::BackendKind;

use crate::common::{Ctx, Report, Res, Table};

/// At least 1 (a value parser for counts and sizes).
pub fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// For a backend this build or machine lacks: its table row, and a note with the reason.
fn unavailable_row(backend: &str, error: &str, t: &mut Table, notes: &mut String) {
    t.row(vec![backend.to_string(), "unavailable".into()]);
    notes.push_str(&format!("{backend}: {error}\n"));
}

/// The table, then the notes (if any) after a blank line.
fn with_notes(t: &Table, notes: &str) -> String {
    let gap = if notes.is_empty() { "" } else { "\n" };
    format!("{}{gap}{notes}", t.render())
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
