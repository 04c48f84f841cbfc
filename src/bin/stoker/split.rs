//! `stoker split`: make a fixed train/validation split and save its manifest, or check a
//! saved manifest (exit 1 when the check fails).

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::Args;
use serde::Serialize;
use stoker::source::{CheckReport, Manifest};
use stoker::SplitSpec;

use crate::common::{self, kv, Ctx, Report, Res};

#[derive(Debug, Args)]
pub struct SplitArgs {
    /// Image folder to split (class sub-folders or flat).
    #[arg(required_unless_present = "check", conflicts_with = "check")]
    dir: Option<PathBuf>,
    /// Fraction of the samples for validation, in [0, 1].
    #[arg(long, required_unless_present = "check", conflicts_with = "check")]
    val: Option<f64>,
    /// Keep groups whole: a regex over the relative path whose first capture group (or
    /// whole match) names the group.
    #[arg(long, conflicts_with = "check")]
    group_by: Option<String>,
    /// Seed of the split.
    #[arg(long, default_value = "0")]
    seed: u64,
    /// Where to save the manifest (JSON).
    #[arg(long, required_unless_present = "check", conflicts_with = "check")]
    out: Option<PathBuf>,
    /// Check a saved manifest instead of making one.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// With --check: the dataset folder, to also check the split is complete.
    #[arg(long, requires = "check")]
    images: Option<PathBuf>,
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
    /// The manifest written (a new split).
    #[serde(skip_serializing_if = "Option::is_none")]
    out: Option<String>,
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
        }
    }

    /// The report: exit code 1 when a check failed.
    fn report(&self, head: &str) -> Res<Report> {
        Ok(Report::new(self, self.text(head))?.with_code(u8::from(!self.ok)))
    }

    fn text(&self, head: &str) -> String {
        let r = self.check;
        let mut s = format!("{head}\n\n");
        s.push_str(&kv(&[
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
        ]));
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
        let report = SplitReport {
            manifest: Some(file.display().to_string()),
            ..SplitReport::new(&m, &r)
        };
        return report.report(&format!("check of {}", file.display()));
    }
    // clap requires these without --check; say so rather than panic if that changes.
    let (Some(dir), Some(val), Some(out)) = (&a.dir, a.val, &a.out) else {
        return Err("give DIR, --val and --out (or --check FILE)".into());
    };
    let data = common::open_dataset(dir)?;
    if data.is_empty() {
        return Err(format!("no images in {}", dir.display()).into());
    }
    let listed = data.clone();
    let mut spec = SplitSpec::fraction(val).seed(a.seed);
    if let Some(p) = &a.group_by {
        spec = spec.group_by(p.clone());
    }
    let split = data.split(spec)?;
    crate::ensure_parent(out)?;
    split.save(out)?;
    let m = split.manifest();
    let r = m.check(Some(&listed));
    let report = SplitReport {
        out: Some(out.display().to_string()),
        ..SplitReport::new(m, &r)
    };
    report.report(&format!(
        "split of {} saved to {}",
        dir.display(),
        out.display()
    ))
}
