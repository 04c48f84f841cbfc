//! `stoker`: the command-line tool. Benchmarks, decoding, dataset inspection, fixed
//! splits and contact sheets of augmented samples.
//!
//! Every subcommand prints a readable table on stdout, or with `--json` exactly one JSON
//! object. Progress bars and logs go to stderr (`STOKER_LOG=info` for more). Errors print
//! `error: ...` and exit with 1; usage errors exit with 2.

mod bench;
mod common;
mod convert;
mod files;
mod render;
mod split;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use common::{Ctx, Report, Res};

#[derive(Debug, Parser)]
#[command(
    name = "stoker",
    version,
    about = "Keeps accelerators fed: benchmark, inspect, split and preview image datasets",
    after_help = "With no --images, commands use the sample images bundled with the source tree.\n\
                  Logging: STOKER_LOG=error|warn|info|debug|trace (default warn), on stderr."
)]
struct Cli {
    /// Print exactly one JSON object on stdout instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// No progress bars, fewer log lines.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks; with no sub-command: decode, pipeline and overlap with defaults.
    Bench(BenchArgs),
    /// Decode files on one backend and write them as RGB PNGs.
    Decode(files::DecodeArgs),
    /// What is in a dataset: samples, labels, JPEG kinds, sizes, unreadable files.
    Inspect(files::InspectArgs),
    /// Make a fixed train/validation split, or check a saved one.
    Split(split::SplitArgs),
    /// A contact sheet PNG of original and augmented samples, masks overlaid.
    Render(render::RenderArgs),
    /// Export a folder dataset to TFRecord or WebDataset tar shards with their indexes.
    Convert(convert::ConvertArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[command(subcommand)]
    cmd: Option<BenchCmd>,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Decode throughput per backend on the same files (all read into memory first).
    Decode(bench::decode::DecodeBenchArgs),
    /// The full pipeline with a simulated training step.
    Pipeline(bench::pipeline::PipelineBenchArgs),
    /// The classic overlap experiment: fake load, fake step, naive vs pipelined.
    Overlap(bench::overlap::OverlapArgs),
}

/// The default values of an argument group, as if given no arguments.
pub fn defaults<T: Args + clap::FromArgMatches>() -> Res<T> {
    let cmd = T::augment_args(clap::Command::new("defaults"));
    let m = cmd.try_get_matches_from(["defaults"])?;
    Ok(T::from_arg_matches(&m)?)
}

fn run(cli: &Cli) -> Res<Report> {
    let ctx = Ctx {
        json: cli.json,
        quiet: cli.quiet,
    };
    match &cli.cmd {
        Command::Bench(b) => match &b.cmd {
            Some(BenchCmd::Decode(a)) => bench::decode::run(ctx, a),
            Some(BenchCmd::Pipeline(a)) => bench::pipeline::run(ctx, a),
            Some(BenchCmd::Overlap(a)) => bench::overlap::run(ctx, a),
            None => bench::all(ctx),
        },
        Command::Decode(a) => files::decode(ctx, a),
        Command::Inspect(a) => files::inspect(ctx, a),
        Command::Split(a) => split::split(ctx, a),
        Command::Render(a) => render::render(ctx, a),
        Command::Convert(a) => convert::run(ctx, a),
    }
}

fn print_stdout(s: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    out.flush()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    common::init_logger(cli.quiet);
    match run(&cli) {
        Ok(report) => {
            let text = if cli.json {
                match serde_json::to_string(&report.json) {
                    Ok(s) => s + "\n",
                    Err(e) => {
                        eprintln!("error: cannot write the JSON report: {e}");
                        return ExitCode::from(1);
                    }
                }
            } else {
                report.text
            };
            match print_stdout(&text) {
                Ok(()) => {}
                // The reader went away (`| head`): not our error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => {
                    eprintln!("error: writing to stdout: {e}");
                    return ExitCode::from(1);
                }
            }
            ExitCode::from(report.code)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// `--out` style argument helper: a path whose parent folder must exist or be creatable.
pub fn ensure_parent(p: &std::path::Path) -> Res<()> {
    if let Some(parent) = p.parent() {
        if !parent.as_os_str().is_empty() && !parent.is_dir() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create folder {}: {e}", parent.display()))?;
        }
    }
    Ok(())
}
