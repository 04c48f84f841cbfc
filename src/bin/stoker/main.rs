//! `stoker`: the command-line tool. Benchmarks, decoding, dataset inspection, fixed
//! splits and contact sheets of augmented samples.
//!
//! Every subcommand prints a readable table on stdout, or with `--json` exactly one JSON
//! object. Progress bars and logs go to stderr (`STOKER_LOG=info` for more).
//!
//! # Exit status
//!
//! A command that did not do all that was asked exits non-zero, with one code per cause
//! ([`common::Cause`]), prints `error: ...` on stderr and, with `--json`, an error object
//! on stdout: `{"error": {"kind": "no_input", "message": "...", "code": 3}}`, within the
//! command's report when there is one (`stoker decode` that decoded 1 of 2 files still
//! lists the one). Files that listing leaves out (a FIFO, an unreadable folder) are not
//! samples: reports list them in `skipped`, and they change no exit status.
//!
//! | code | kind | when |
//! | --- | --- | --- |
//! | 0 | | everything asked was done |
//! | 1 | `partial` | some inputs could not be read or decoded (the report lists them: `decode`, `inspect`, `convert`, `bench pipeline`, `render`), or a check found problems (`split --check`) |
//! | 2 | `usage` | bad arguments or settings (`RANK`/`WORLD_SIZE` included; a batch too large for host memory or the device, on every backend) |
//! | 3 | `no_input` | nothing could be read: a missing or empty input, or every input failed |
//! | 4 | `backend_unavailable` | a backend asked for is not in this build or not on this machine (a benchmark still reports the others) |
//! | 5 | `output` | a result could not be written (a missing output folder, a write error) |
//! | 6 | `failed` | the work failed while running (a device or pipeline error) |

mod args;
mod bench;
mod common;
mod convert;
mod files;
mod render;
mod split;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::Value;

use common::{fail, Cause, Ctx, ErrorObject, Report, Res};

/// What `--help` and `-h` end with.
const NOTES: &str =
    "With no --images, commands use the sample images bundled with the source tree.\n\
                     Logging: STOKER_LOG=error|warn|info|debug|trace (default warn), on stderr.";
/// The end of `-h`; `--help` has the exit-status table instead of its last line.
const AFTER_HELP: &str = "With no --images, commands use the sample images bundled with the source tree.\n\
                          Logging: STOKER_LOG=error|warn|info|debug|trace (default warn), on stderr.\n\
                          Exit status: 0 when everything asked was done; the codes by cause in --help.";

#[derive(Debug, Parser)]
#[command(
    name = "stoker",
    version,
    about = "Keeps accelerators fed: benchmark, inspect, split and preview image datasets",
    after_help = AFTER_HELP
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
    /// Export a folder dataset to TFRecord or WebDataset tar shards with their indexes, or to
    /// a folder, JPEGs transcoded losslessly with restart markers (--restarts off: byte for
    /// byte).
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
            Some(BenchCmd::Decode(a)) => bench::decode::run(ctx, a).map(unavailable_backends),
            Some(BenchCmd::Pipeline(a)) => bench::pipeline::run(ctx, a).map(unavailable_backends),
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

/// A benchmark report whose `results` list a backend that did not run (an entry with an
/// `error`): failed as `BackendUnavailable`, the report kept whole.
fn unavailable_backends(report: Report) -> Report {
    let missing: Vec<String> = report
        .json
        .get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let why = r.get("error")?.as_str()?;
            let backend = r.get("backend").and_then(Value::as_str).unwrap_or("?");
            Some(format!("{backend}: {why}"))
        })
        .collect();
    if missing.is_empty() || report.code != 0 {
        return report;
    }
    report.failed(Cause::BackendUnavailable, missing.join("; "))
}

fn print_stdout(s: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    out.flush()
}

/// Prints `text` on stdout; a failed write is an `Output` error (a reader that went
/// away, `| head`, is not).
fn emit(text: &str) -> Result<(), ErrorObject> {
    match print_stdout(text) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(ErrorObject::new(
            Cause::Output,
            format!("writing to stdout: {e}"),
        )),
    }
}

/// The one-line JSON of `{"error": e}`.
fn error_json(e: &ErrorObject) -> String {
    let v = serde_json::json!({ "error": e });
    v.to_string() + "\n"
}

/// Says `e` on stderr and, with `json`, as a JSON error object on stdout; returns its
/// exit status.
fn exit_with(e: &ErrorObject, json: bool) -> ExitCode {
    eprintln!("error: {}", e.message);
    if json {
        // Nothing better to do when stdout fails too: the status says it.
        let _ = emit(&error_json(e));
    }
    ExitCode::from(e.code)
}

fn main() -> ExitCode {
    let json_asked = std::env::args_os().any(|a| a == "--json");
    let cmd = Cli::command().after_long_help(format!("{NOTES}\n\n{}", Cause::table()));
    let cli = match cmd
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) || !json_asked
            {
                e.exit();
            }
            // A usage error with --json: the message as an error object too.
            let _ = e.print();
            let text = e.to_string();
            let text = text.trim_end();
            let obj = ErrorObject::new(Cause::Usage, text.strip_prefix("error: ").unwrap_or(text));
            let _ = emit(&error_json(&obj));
            return ExitCode::from(obj.code);
        }
    };
    common::init_logger(cli.quiet);
    match run(&cli) {
        Ok(mut report) => {
            if report.code != 0 && report.error.is_none() {
                let cause = Cause::from_code(report.code).unwrap_or(Cause::Failed);
                report.error = Some(ErrorObject {
                    kind: cause,
                    message: cause.meaning().to_string(),
                    code: report.code,
                });
            }
            if let (Some(e), Value::Object(o)) = (&report.error, &mut report.json) {
                match serde_json::to_value(e) {
                    Ok(v) => {
                        o.insert("error".into(), v);
                    }
                    Err(err) => log::warn!("cannot add the error object to the report: {err}"),
                }
            }
            let text = if cli.json {
                match serde_json::to_string(&report.json) {
                    Ok(s) => s + "\n",
                    Err(e) => {
                        let e = ErrorObject::new(
                            Cause::Failed,
                            format!("cannot write the JSON report: {e}"),
                        );
                        return exit_with(&e, cli.json);
                    }
                }
            } else {
                report.text
            };
            if let Err(e) = emit(&text) {
                eprintln!("error: {}", e.message);
                return ExitCode::from(e.code);
            }
            if let Some(e) = &report.error {
                eprintln!("error: {}", e.message);
            }
            ExitCode::from(report.code)
        }
        Err(e) => {
            let obj = ErrorObject::new(Cause::of(e.as_ref()), e.to_string());
            exit_with(&obj, cli.json)
        }
    }
}

/// `--out FILE` helper: the folder `FILE` goes in must exist. It is not created: a
/// mistyped path is an error naming the missing folder, not a new tree of folders.
pub fn ensure_parent(p: &std::path::Path) -> Res<()> {
    if let Some(parent) = p.parent() {
        if !parent.as_os_str().is_empty() && !parent.is_dir() {
            let what = if parent.exists() {
                "is not a folder"
            } else {
                "does not exist"
            };
            return Err(fail(
                Cause::Output,
                format!(
                    "cannot write {}: the folder {} {what}",
                    p.display(),
                    parent.display()
                ),
            ));
        }
    }
    Ok(())
}
