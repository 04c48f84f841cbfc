//! A fixed train/validation split, made once before anything is shuffled, saved as a
//! JSON manifest, reloadable and checkable.
//!
//! By fraction: each sample gets a score from Philox keyed by `(seed, id)`; the
//! `round(n * fraction)` lowest scores form the validation set. The result depends on the
//! ids (stable, derived from paths) and the seed, never on listing order.
//!
//! By group: a regex over the relative path names each sample's group (its first capture
//! group, or the whole match if it has none). Groups are ordered by a score keyed by
//! `(seed, hash of the group name)` and moved into validation, whole, until it holds at
//! least `round(n * fraction)` samples.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::{Dataset, Role, Subset};
use crate::error::{Error, Result};
use crate::rng::{fnv1a64, Rng, Stream};

/// How to split: fraction for validation, seed, and an optional group pattern.
#[derive(Debug, Clone)]
pub struct SplitSpec {
    val_fraction: f64,
    seed: u64,
    group_by: Option<String>,
}

impl SplitSpec {
    /// Put `val_fraction` (in `[0, 1]`) of the samples in the validation set.
    pub fn fraction(val_fraction: f64) -> Self {
        SplitSpec {
            val_fraction,
            seed: 0,
            group_by: None,
        }
    }

    /// The seed of the split (independent of the training seed).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Keep groups whole: `pattern` is a regex over the relative path whose first capture
    /// group (or whole match) names the group. A path it does not match is an error.
    pub fn group_by(mut self, pattern: impl Into<String>) -> Self {
        self.group_by = Some(pattern.into());
        self
    }
}

/// One entry of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Stable sample id, as 16 hex digits.
    pub id: String,
    /// Path relative to the dataset root.
    pub path: String,
    /// Group key, for group splits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// The saved form of a split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format tag, `stoker-split/1`.
    pub format: String,
    /// Seed the split was made with.
    pub seed: u64,
    /// Requested validation fraction.
    pub val_fraction: f64,
    /// Group pattern, if the split is by group.
    #[serde(default)]
    pub group_by: Option<String>,
    /// Training entries, sorted by path.
    pub train: Vec<Entry>,
    /// Validation entries, sorted by path.
    pub val: Vec<Entry>,
    /// FNV-1a-64 over the canonical content above, as 16 hex digits.
    pub digest: String,
}

/// What [`Manifest::check`] found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    /// No sample is in both parts, and no sample appears twice.
    pub disjoint: bool,
    /// Every sample of the dataset is in exactly one part (only when a dataset was given).
    pub complete: Option<bool>,
    /// No group has samples in both parts.
    pub groups_whole: bool,
    /// Each id is the stable id of its path.
    pub ids_match_paths: bool,
    /// The stored digest matches the content.
    pub digest_ok: bool,
    /// What is wrong, one line each (at most 20 listed).
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.disjoint
            && self.complete.unwrap_or(true)
            && self.groups_whole
            && self.ids_match_paths
            && self.digest_ok
    }
}

const FORMAT: &str = "stoker-split/1";

impl Manifest {
    fn digest_of(&self) -> String {
        let mut text = format!(
            "{}\n{}\n{}\n{:?}\n",
            self.format,
            self.seed,
            self.val_fraction.to_bits(),
            self.group_by
        );
        for (part, entries) in [("train", &self.train), ("val", &self.val)] {
            for e in entries {
                text.push_str(&format!("{part}\t{}\t{}\t{:?}\n", e.id, e.path, e.group));
            }
        }
        format!("{:016x}", fnv1a64(text.as_bytes()))
    }

    /// Writes the manifest as pretty JSON.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Json {
            what: path.display().to_string(),
            source: e,
        })?;
        std::fs::write(path, text + "\n").map_err(|e| Error::io(path, e))
    }

    /// Reads a manifest (does not check it; see [`Manifest::check`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| Error::Json {
            what: path.display().to_string(),
            source: e,
        })?;
        if m.format != FORMAT {
            return Err(Error::split(
                Some(path),
                format!("format {:?}, expected {FORMAT:?}", m.format),
            ));
        }
        Ok(m)
    }

    /// Proves the split sound: disjoint, ids matching paths, groups whole (the pattern is
    /// re-applied to every path), digest intact, and, with a dataset, complete.
    pub fn check(&self, dataset: Option<&Dataset>) -> CheckReport {
        let mut r = CheckReport {
            disjoint: true,
            groups_whole: true,
            ids_match_paths: true,
            ..CheckReport::default()
        };
        let note = |r: &mut CheckReport, msg: String| {
            if r.problems.len() < 20 {
                r.problems.push(msg);
            }
        };
        r.digest_ok = self.digest_of() == self.digest;
        if !r.digest_ok {
            note(
                &mut r,
                "digest does not match the content (edited by hand?)".into(),
            );
        }
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for (part, entries) in [("train", &self.train), ("val", &self.val)] {
            for e in entries {
                if let Some(prev) = seen.insert(e.path.as_str(), part) {
                    r.disjoint = false;
                    note(&mut r, format!("{} is in {prev} and in {part}", e.path));
                }
                if format!("{:016x}", super::sample_id(&e.path)) != e.id {
                    r.ids_match_paths = false;
                    note(
                        &mut r,
                        format!("{}: id {} is not its stable id", e.path, e.id),
                    );
                }
            }
        }
        let pattern = self.group_by.as_deref().map(Regex::new);
        let mut group_parts: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        match pattern {
            Some(Err(e)) => {
                r.groups_whole = false;
                note(&mut r, format!("group pattern does not compile: {e}"));
            }
            Some(Ok(re)) => {
                for (part, entries) in [("train", &self.train), ("val", &self.val)] {
                    for e in entries {
                        match group_of(&re, &e.path) {
                            Some(g) => {
                                if e.group.as_deref() != Some(g.as_str()) {
                                    r.groups_whole = false;
                                    note(&mut r, format!("{}: stored group differs", e.path));
                                }
                                group_parts.entry(g).or_default().insert(part);
                            }
                            None => {
                                r.groups_whole = false;
                                note(&mut r, format!("{}: pattern does not match", e.path));
                            }
                        }
                    }
                }
                for (g, parts) in &group_parts {
                    if parts.len() > 1 {
                        r.groups_whole = false;
                        note(&mut r, format!("group {g:?} straddles train and val"));
                    }
                }
            }
            None => {}
        }
        if let Some(data) = dataset {
            let listed: BTreeSet<&str> = data.samples.iter().map(|s| s.path.as_str()).collect();
            let mut complete = true;
            for p in &listed {
                if !seen.contains_key(p) {
                    complete = false;
                    note(&mut r, format!("{p} is in the dataset but in neither part"));
                }
            }
            for p in seen.keys() {
                if !listed.contains(p) {
                    complete = false;
                    note(
                        &mut r,
                        format!("{p} is in the manifest but not in the dataset"),
                    );
                }
            }
            r.complete = Some(complete);
        }
        r
    }
}

fn group_of(re: &Regex, path: &str) -> Option<String> {
    let caps = re.captures(path)?;
    let m = caps.get(1).or_else(|| caps.get(0))?;
    Some(m.as_str().to_string())
}

fn score(seed: u64, key: u64) -> u64 {
    Rng::new(seed, 0, key, Stream::Split).next_u64()
}

/// A fixed split: the training and validation subsets and the manifest that records them.
#[derive(Debug, Clone)]
pub struct Split {
    train: Subset,
    val: Subset,
    manifest: Manifest,
}

impl Split {
    pub(crate) fn make(mut data: Dataset, spec: &SplitSpec) -> Result<Split> {
        if !(0.0..=1.0).contains(&spec.val_fraction) || spec.val_fraction.is_nan() {
            return Err(Error::split(
                None,
                format!("validation fraction {} is not in [0, 1]", spec.val_fraction),
            ));
        }
        let n = data.samples.len();
        let target = (n as f64 * spec.val_fraction).round() as usize;
        let mut is_val = vec![false; n];
        match &spec.group_by {
            None => {
                let mut order: Vec<(u64, u64, usize)> = data
                    .samples
                    .iter()
                    .enumerate()
                    .map(|(i, s)| (score(spec.seed, s.id), s.id, i))
                    .collect();
                order.sort_unstable();
                for &(_, _, i) in order.iter().take(target) {
                    is_val[i] = true;
                }
            }
            Some(pattern) => {
                let re = Regex::new(pattern)
                    .map_err(|e| Error::split(None, format!("group pattern {pattern:?}: {e}")))?;
                let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
                for (i, s) in data.samples.iter_mut().enumerate() {
                    let g = group_of(&re, &s.path).ok_or_else(|| {
                        Error::split(
                            None,
                            format!("group pattern {pattern:?} does not match {:?}", s.path),
                        )
                    })?;
                    s.group = Some(g.clone());
                    groups.entry(g).or_default().push(i);
                }
                let mut order: Vec<(u64, &String)> = groups
                    .keys()
                    .map(|g| (score(spec.seed, fnv1a64(g.as_bytes())), g))
                    .collect();
                order.sort_unstable();
                let mut count = 0;
                for (_, g) in order {
                    if count >= target {
                        break;
                    }
                    for &i in &groups[g] {
                        is_val[i] = true;
                    }
                    count += groups[g].len();
                }
            }
        }
        let entry = |s: &super::Sample| Entry {
            id: format!("{:016x}", s.id),
            path: s.path.clone(),
            group: s.group.clone(),
        };
        let mut manifest = Manifest {
            format: FORMAT.to_string(),
            seed: spec.seed,
            val_fraction: spec.val_fraction,
            group_by: spec.group_by.clone(),
            train: data
                .samples
                .iter()
                .zip(&is_val)
                .filter(|(_, v)| !**v)
                .map(|(s, _)| entry(s))
                .collect(),
            val: data
                .samples
                .iter()
                .zip(&is_val)
                .filter(|(_, v)| **v)
                .map(|(s, _)| entry(s))
                .collect(),
            digest: String::new(),
        };
        manifest.digest = manifest.digest_of();
        Ok(Self::from_flags(data, &is_val, manifest))
    }

    fn from_flags(data: Dataset, is_val: &[bool], manifest: Manifest) -> Split {
        let is_train: Vec<bool> = is_val.iter().map(|v| !v).collect();
        let val = Subset::new(data.clone(), Role::Validation, Some(is_val));
        let train = Subset::new(data, Role::Train, Some(&is_train));
        Split {
            train,
            val,
            manifest,
        }
    }

    /// Rebuilds a saved split over a freshly listed dataset. The manifest must pass
    /// [`Manifest::check`] against the dataset: a split that does not match the data on
    /// disk (files added, removed, renamed, or a manifest edited) is refused.
    pub fn load(path: impl AsRef<Path>, mut data: Dataset) -> Result<Split> {
        let manifest = Manifest::load(path.as_ref())?;
        let report = manifest.check(Some(&data));
        if !report.ok() {
            return Err(Error::split(
                Some(path.as_ref()),
                format!("does not match the dataset: {}", report.problems.join("; ")),
            ));
        }
        let val_paths: BTreeSet<&str> = manifest.val.iter().map(|e| e.path.as_str()).collect();
        let groups: HashMap<&str, &Option<String>> = manifest
            .train
            .iter()
            .chain(&manifest.val)
            .map(|e| (e.path.as_str(), &e.group))
            .collect();
        for s in &mut data.samples {
            if let Some(g) = groups.get(s.path.as_str()) {
                s.group = (*g).clone();
            }
        }
        let is_val: Vec<bool> = data
            .samples
            .iter()
            .map(|s| val_paths.contains(s.path.as_str()))
            .collect();
        drop(val_paths);
        drop(groups);
        Ok(Self::from_flags(data, &is_val, manifest))
    }

    /// The training subset (shuffled per epoch by the pipeline).
    pub fn train(&self) -> Subset {
        self.train.clone()
    }

    /// The validation subset (fixed order).
    pub fn val(&self) -> Subset {
        self.val.clone()
    }

    /// The manifest recording this split.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Saves the manifest as JSON.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.manifest.save(path)
    }
}
