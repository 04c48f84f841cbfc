//! `stoker split`: make a fixed train/validation split and save its manifest, extend a
//! saved manifest to a grown dataset (every existing assignment kept, only the new samples
//! placed), or check a saved manifest (exit 1 when the check fails).

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use stoker::source::split::Added;
use stoker::source::{CheckReport, Manifest};
use stoker::{Split, SplitSpec};

use crate::args::ArgError;
use crate::common::{self, fail, kv, Cause, Ctx, Failure, Report, Res};

#[derive(Debug, Args)]
pub struct SplitArgs {
    /// Image folder to split (class sub-folders or flat); with --extend, the grown dataset.
    #[arg(required_unless_present = "check", conflicts_with = "check")]
    dir: Option<PathBuf>,
    /// Fraction of the samples for validation, in [0, 1].
    #[arg(
        long,
        required_unless_present_any = ["check", "extend"],
        conflicts_with_all = ["check", "extend"],
        value_parser = fraction
    )]
    val: Option<f64>,
    /// Keep groups whole: a regex over the relative path whose first capture group (or
    /// whole match) names the group.
    #[arg(long, conflicts_with_all = ["check", "extend"], value_parser = pattern)]
    group_by: Option<String>,
    /// Seed of the split [default: 0].
    #[arg(long, conflicts_with = "extend")]
    seed: Option<u64>,
    /// Where to save the manifest (JSON); with --extend, the extended manifest
    /// [default: the --extend FILE itself].
    #[arg(
        long,
        required_unless_present_any = ["check", "extend"],
        conflicts_with = "check"
    )]
    out: Option<PathBuf>,
    /// Extend the saved manifest FILE to the grown dataset DIR: every assignment it holds
    /// is kept and only the samples it lacks are placed, by its seed, fraction and group
    /// pattern. Samples it lists that DIR no longer has are an error.
    #[arg(long, value_name = "FILE", conflicts_with = "check")]
    extend: Option<PathBuf>,
    /// Check a saved manifest instead of making one.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// With --check: the dataset folder, to also check the split is complete.
    #[arg(long, requires = "check")]
    images: Option<PathBuf>,
}

/// `--val`: a number in `[0, 1]`.
fn fraction(s: &str) -> Result<f64, ArgError> {
    let f: f64 = s.trim().parse()?;
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(ArgError::NotAFraction(f))
    }
}

/// `--group-by`: a regular expression that compiles.
fn pattern(s: &str) -> Result<String, ArgError> {
    regex::Regex::new(s)
        .map(|_| s.to_string())
        .map_err(|source| ArgError::Pattern { source })
}

/// Saves `split` to `out`; a failed write is an `Output` error.
fn save(split: &Split, out: &std::path::Path) -> Res<()> {
    split
        .save(out)
        .map_err(|e| fail(Cause::Output, e.to_string()))
}

fn groups_of(m: &Manifest) -> usize {
    m.train
        .iter()
        .chain(&m.val)
        .filter_map(|e| e.group.as_deref())
        .collect::<BTreeSet<_>>()
        .len()
}

/// The JSON object of `stoker split`: the manifest's figures and what its check found.
#[derive(Debug, Serialize)]
struct SplitReport<'a> {
    train: usize,
    val: usize,
    groups: usize,
    /// Whether every check passed.
    ok: bool,
    /// disjoint, complete, groups_whole, ids_match_paths, digest_ok, problems.
    #[serde(flatten)]
    check: &'a CheckReport,
    seed: u64,
    val_fraction: f64,
    group_by: &'a Option<String>,
    digest: &'a str,
    /// The manifest checked (`--check`).
    #[serde(skip_serializing_if = "Option::is_none")]
    manifest: Option<String>,
    /// The manifest written (a new or extended split).
    #[serde(skip_serializing_if = "Option::is_none")]
    out: Option<String>,
    /// The manifest extended (`--extend`).
    #[serde(skip_serializing_if = "Option::is_none")]
    extended: Option<String>,
    /// With `--extend`: how many new samples went to each side (`train`, `val`).
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<Added>,
    /// Files that listing the dataset left out (not samples), each with the reason: a
    /// folder that could not be read, a FIFO, ...
    skipped: Vec<Failure>,
}

impl<'a> SplitReport<'a> {
    fn new(m: &'a Manifest, check: &'a CheckReport) -> Self {
        SplitReport {
            train: m.train.len(),
            val: m.val.len(),
            groups: groups_of(m),
            ok: check.ok(),
            check,
            seed: m.seed,
            val_fraction: m.val_fraction,
            group_by: &m.group_by,
            digest: &m.digest,
            manifest: None,
            out: None,
            extended: None,
            added: None,
            skipped: Vec::new(),
        }
    }

    /// The same report, with what listing `data` left out.
    fn skipped(self, data: &stoker::Dataset) -> Self {
        SplitReport {
            skipped: Failure::skipped_at_listing(data),
            ..self
        }
    }

    /// The report: exit code 1 when a check failed.
    fn report(&self, head: &str) -> Res<Report> {
        Ok(Report::new(self, self.text(head))?.with_code(u8::from(!self.ok)))
    }

    fn text(&self, head: &str) -> String {
        let r = self.check;
        let mut s = format!("{head}\n\n");
        let mut rows = vec![
            ("train", self.train.to_string()),
            ("val", self.val.to_string()),
            ("groups", self.groups.to_string()),
            ("seed", self.seed.to_string()),
            ("val fraction", self.val_fraction.to_string()),
            (
                "group by",
                self.group_by.clone().unwrap_or_else(|| "-".into()),
            ),
            ("disjoint", yes(r.disjoint)),
            (
                "complete",
                r.complete.map_or("not checked (no --images)".into(), yes),
            ),
            ("groups whole", yes(r.groups_whole)),
            ("ids match paths", yes(r.ids_match_paths)),
            ("digest ok", yes(r.digest_ok)),
            ("result", if self.ok { "ok" } else { "FAILED" }.into()),
        ];
        if let Some(a) = self.added {
            rows.insert(
                3,
                (
                    "new samples",
                    format!(
                        "{} ({} to train, {} to val)",
                        a.train + a.val,
                        a.train,
                        a.val
                    ),
                ),
            );
        }
        s.push_str(&kv(&rows));
        if !r.problems.is_empty() {
            s.push_str("\nproblems:\n");
            for p in &r.problems {
                s.push_str(&format!("  {p}\n"));
            }
        }
        s
    }
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "NO" }.to_string()
}

pub fn split(_ctx: Ctx, a: &SplitArgs) -> Res<Report> {
    if let Some(file) = &a.check {
        let m = Manifest::load(file)?;
        let data = match &a.images {
            Some(dir) => Some(common::open_dataset(dir)?),
            None => None,
        };
        let r = m.check(data.as_ref());
        let mut report = SplitReport {
            manifest: Some(file.display().to_string()),
            ..SplitReport::new(&m, &r)
        };
        if let Some(d) = &data {
            report = report.skipped(d);
        }
        return report.report(&format!("check of {}", file.display()));
    }
    if let Some(file) = &a.extend {
        return extend(a, file);
    }
    // clap requires these without --check; say so rather than panic if that changes.
    let (Some(dir), Some(val), Some(out)) = (&a.dir, a.val, &a.out) else {
        return Err("give DIR, --val and --out (or --check FILE)".into());
    };
    let data = common::open_dataset(dir)?;
    if data.is_empty() {
        return Err(crate::common::fail(
            crate::common::Cause::NoInput,
            format!("no images in {}", dir.display()),
        ));
    }
    let listed = data.clone();
    let mut spec = SplitSpec::fraction(val).seed(a.seed.unwrap_or(0));
    if let Some(p) = &a.group_by {
        spec = spec.group_by(p.clone());
    }
    let split = data.split(spec)?;
    crate::ensure_parent(out)?;
    save(&split, out)?;
    let m = split.manifest();
    let r = m.check(Some(&listed));
    let report = SplitReport {
        out: Some(out.display().to_string()),
        ..SplitReport::new(m, &r)
    }
    .skipped(&listed);
    report.report(&format!(
        "split of {} saved to {}",
        dir.display(),
        out.display()
    ))
}

/// `--extend FILE DIR [--out OUT]`: the split of the grown dataset, keeping FILE's
/// assignments, saved to OUT (FILE itself by default).
fn extend(a: &SplitArgs, file: &std::path::Path) -> Res<Report> {
    let Some(dir) = &a.dir else {
        return Err("give the grown dataset DIR with --extend FILE".into());
    };
    let out = a.out.as_deref().unwrap_or(file);
    let data = common::open_dataset(dir)?;
    let listed = data.clone();
    let split = Split::extend(file, data)?;
    crate::ensure_parent(out)?;
    save(&split, out)?;
    let m = split.manifest();
    let r = m.check(Some(&listed));
    let added = split.added();
    let report = SplitReport {
        out: Some(out.display().to_string()),
        extended: Some(file.display().to_string()),
        added: Some(added),
        ..SplitReport::new(m, &r)
    }
    .skipped(&listed);
    report.report(&format!(
        "split {} extended to {}: {} new samples, {} to train and {} to val; saved to {}",
        file.display(),
        dir.display(),
        added.train + added.val,
        added.train,
        added.val,
        out.display()
    ))
}
