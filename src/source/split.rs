//! A fixed train/validation split, made once before anything is shuffled, saved as a
//! JSON manifest, reloadable, extendable to a grown dataset, and checkable.
//!
//! # The rule
//!
//! Each sample's side depends on that sample alone, never on the others:
//!
//! - By fraction: a sample's score is a uniform double in `[0, 1)` from Philox keyed by
//!   `(seed, id)` (stream [`Stream::Split`], epoch 0); it goes to validation iff its score
//!   is below the fraction.
//! - By group: a regex over the relative path names each sample's group (its first capture
//!   group, or the whole match if it has none). The group's score is keyed by
//!   `(seed, FNV-1a-64 of the group name)`, and the whole group goes to validation iff its
//!   score is below the fraction.
//!
//! The split depends on the ids (stable, derived from paths), the seed and the fraction,
//! never on listing order or on which other samples exist. So adding samples to a dataset
//! moves nobody: splitting the grown dataset again with the same seed and fraction gives
//! every old sample its old side, and [`Split::extend`] does the same while keeping the
//! manifest's stored assignments (which also covers manifests of the old format).
//!
//! # How close to the fraction
//!
//! The number of validation samples is Binomial(n, f), so the share is not exactly `f`.
//! For a split by fraction over `n` samples, the validation share `f̂` satisfies
//!
//! ```text
//! |f̂ − f| ≤ 4·sqrt(f(1 − f)/n) + 1/n
//! ```
//!
//! except with probability below 1.1e-3 for any `n` and `f` (exact binomial tails, worst
//! near n = 20, f = 0.01) and about 6e-5 once `n·f(1 − f)` is large. For a split by group,
//! with group sizes `s_g` (`Σ s_g = n`) and largest group `s_max`, the same holds with
//! `4·sqrt(f(1 − f)·Σ s_g²)/n + s_max/n`. For a split exact to the sample, this is the
//! price of stability: a cut-off at `round(n·f)` samples moves whenever `n` does.
//!
//! # Manifests
//!
//! A [`Manifest`] lists both sides explicitly, with the seed, the fraction and the group
//! pattern, and a digest over its content. Its format tag is `stoker-split/2`. Manifests
//! of the previous format, `stoker-split/1` (validation was the `round(n·f)` lowest
//! scores, so a grown dataset moved the cut-off), still load and extend: their
//! assignments are stored, and only samples added later are placed by the rule above.
//!
//! - [`Split::load`] rebuilds a saved split over the dataset as listed now; the dataset
//!   must hold exactly the manifest's samples. Samples the manifest lacks are an error
//!   that names them and points to [`Split::extend`] (`stoker split --extend`).
//! - [`Split::extend`] keeps every assignment of the manifest and places only the new
//!   samples, by the manifest's seed, fraction and group pattern; in a group split a new
//!   sample of a group the manifest knows goes to that group's side, so groups stay whole.
//! - In both, samples the manifest lists but the dataset no longer has are an error that
//!   names them (the first [`NAMED`], then a count).

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
    /// Put about `val_fraction` (in `[0, 1]`) of the samples in the validation set: each
    /// sample (or group) independently, with that probability, keyed by the seed and its
    /// id, so the share is within the bound of the [module docs](self).
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
    /// Format tag: `stoker-split/2`, or `stoker-split/1` for a manifest made by the
    /// previous rule (see the [module docs](self)).
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

/// The format tag of the manifests this version writes.
pub const FORMAT: &str = "stoker-split/2";

/// The format tags [`Manifest::load`] accepts: this one and the previous one.
const FORMATS: [&str; 2] = [FORMAT, "stoker-split/1"];

/// How many paths an error about missing or unlisted samples names (then a count).
pub const NAMED: usize = 10;

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

    /// Writes the manifest as pretty JSON. It is written beside `path` first and then
    /// renamed over it, so overwriting a manifest (as extending one in place does) never
    /// leaves half a file.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Json {
            what: path.display().to_string(),
            source: e,
        })?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, text + "\n").map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(path, e)
        })
    }

    /// Every entry of both sides, with `true` for validation.
    fn entries(&self) -> impl Iterator<Item = (&Entry, bool)> {
        let train = self.train.iter().map(|e| (e, false));
        train.chain(self.val.iter().map(|e| (e, true)))
    }

    /// Reads a manifest (does not check it; see [`Manifest::check`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| Error::Json {
            what: path.display().to_string(),
            source: e,
        })?;
        if !FORMATS.contains(&m.format.as_str()) {
            return Err(Error::split(
                Some(path),
                format!("format {:?}, expected one of {FORMATS:?}", m.format),
            ));
        }
        Ok(m)
    }

    /// Proves the split sound: disjoint, ids matching paths, groups whole (the pattern is
    /// re-applied to every path), digest intact, and, with a dataset, complete.
    ///
    /// It does not re-derive each sample's side from the rule: a manifest of the previous
    /// format, or one extended from it, keeps assignments the current rule would not
    /// make, and keeping them is the point. What must hold whatever made the manifest is
    /// checked.
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

/// The rule: whether the sample or group keyed by `key` goes to validation, by its own
/// uniform score in `[0, 1)` against the fraction (see the [module docs](self)).
fn in_val(seed: u64, key: u64, fraction: f64) -> bool {
    Rng::new(seed, 0, key, Stream::Split).next_f64() < fraction
}

/// The key of a group's score.
fn group_key(name: &str) -> u64 {
    fnv1a64(name.as_bytes())
}

fn check_fraction(f: f64, path: Option<&Path>) -> Result<()> {
    if (0.0..=1.0).contains(&f) {
        Ok(())
    } else {
        Err(Error::split(
            path,
            format!("validation fraction {f} is not in [0, 1]"),
        ))
    }
}

/// `n` paths as `"a", "b" and 3 more`: the first [`NAMED`], then a count.
fn name_some(paths: &[&str]) -> String {
    let mut s = paths
        .iter()
        .take(NAMED)
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > NAMED {
        s.push_str(&format!(" and {} more", paths.len() - NAMED));
    }
    s
}

/// Places samples by the rule, remembering each group's side so that a group stays whole.
struct Placer {
    seed: u64,
    fraction: f64,
    groups: Option<(Regex, String)>,
    sides: HashMap<String, bool>,
    at: Option<std::path::PathBuf>,
}

impl Placer {
    fn new(seed: u64, fraction: f64, group_by: Option<&str>, path: Option<&Path>) -> Result<Self> {
        check_fraction(fraction, path)?;
        let groups = match group_by {
            None => None,
            Some(p) => {
                let re = Regex::new(p)
                    .map_err(|e| Error::split(path, format!("group pattern {p:?}: {e}")))?;
                Some((re, p.to_string()))
            }
        };
        Ok(Placer {
            seed,
            fraction,
            groups,
            sides: HashMap::new(),
            at: path.map(Path::to_path_buf),
        })
    }

    /// Whether `s` goes to validation; sets its group in a group split.
    fn place(&mut self, s: &mut super::Sample) -> Result<bool> {
        let Some((re, pattern)) = &self.groups else {
            return Ok(in_val(self.seed, s.id, self.fraction));
        };
        let g = group_of(re, &s.path).ok_or_else(|| {
            Error::split(
                self.at.as_deref(),
                format!("group pattern {pattern:?} does not match {:?}", s.path),
            )
        })?;
        let (seed, fraction) = (self.seed, self.fraction);
        let side = *self
            .sides
            .entry(g.clone())
            .or_insert_with(|| in_val(seed, group_key(&g), fraction));
        s.group = Some(g);
        Ok(side)
    }
}

/// How many samples a split placed by the rule rather than took from a manifest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Added {
    /// Placed in the training set.
    pub train: usize,
    /// Placed in the validation set.
    pub val: usize,
}

/// A fixed split: the training and validation subsets and the manifest that records them.
#[derive(Debug, Clone)]
pub struct Split {
    train: Subset,
    val: Subset,
    manifest: Manifest,
    added: Added,
}

impl Split {
    pub(crate) fn make(mut data: Dataset, spec: &SplitSpec) -> Result<Split> {
        let mut placer = Placer::new(spec.seed, spec.val_fraction, spec.group_by.as_deref(), None)?;
        let is_val = data
            .samples
            .iter_mut()
            .map(|s| placer.place(s))
            .collect::<Result<Vec<bool>>>()?;
        let kept = vec![None; is_val.len()];
        Ok(Self::build(
            data,
            &is_val,
            &kept,
            spec.seed,
            spec.val_fraction,
            spec.group_by.clone(),
        ))
    }

    /// The split of `data` with sides `is_val`; `kept[i]` is sample `i`'s manifest entry
    /// when it was taken from one (kept as stored), `None` when the rule placed it.
    fn build(
        data: Dataset,
        is_val: &[bool],
        kept: &[Option<&Entry>],
        seed: u64,
        val_fraction: f64,
        group_by: Option<String>,
    ) -> Split {
        let mut added = Added::default();
        let (mut train, mut val) = (Vec::new(), Vec::new());
        for ((s, &v), k) in data.samples.iter().zip(is_val).zip(kept) {
            let e = match k {
                Some(e) => (*e).clone(),
                None => {
                    *(if v { &mut added.val } else { &mut added.train }) += 1;
                    Entry {
                        id: format!("{:016x}", s.id),
                        path: s.path.clone(),
                        group: s.group.clone(),
                    }
                }
            };
            let side = if v { &mut val } else { &mut train };
            side.push(e);
        }
        let mut manifest = Manifest {
            format: FORMAT.to_string(),
            seed,
            val_fraction,
            group_by,
            train,
            val,
            digest: String::new(),
        };
        manifest.digest = manifest.digest_of();
        let is_train: Vec<bool> = is_val.iter().map(|v| !v).collect();
        let val = Subset::new(data.clone(), Role::Validation, Some(is_val));
        let train = Subset::new(data, Role::Train, Some(&is_train));
        Split {
            train,
            val,
            manifest,
            added,
        }
    }

    /// Matches `data` against a sound `manifest`: each sample's stored entry and side, or
    /// `None` for a sample the manifest lacks. Samples the manifest lists but `data` does
    /// not have are an error naming them.
    fn match_manifest<'m>(
        manifest: &'m Manifest,
        data: &mut Dataset,
        path: Option<&Path>,
    ) -> Result<Vec<Option<(&'m Entry, bool)>>> {
        let report = manifest.check(None);
        if !report.ok() {
            return Err(Error::split(
                path,
                format!("the manifest is unsound: {}", report.problems.join("; ")),
            ));
        }
        let stored: HashMap<&str, (&Entry, bool)> = manifest
            .entries()
            .map(|(e, v)| (e.path.as_str(), (e, v)))
            .collect();
        let found: Vec<Option<(&Entry, bool)>> = data
            .samples
            .iter_mut()
            .map(|s| {
                let hit = stored.get(s.path.as_str()).copied();
                if let Some((e, _)) = hit {
                    s.group = e.group.clone();
                }
                hit
            })
            .collect();
        let listed: BTreeSet<&str> = data.samples.iter().map(|s| s.path.as_str()).collect();
        let mut missing: Vec<&str> = manifest
            .entries()
            .map(|(e, _)| e.path.as_str())
            .filter(|p| !listed.contains(p))
            .collect();
        if !missing.is_empty() {
            missing.sort_unstable();
            return Err(Error::split(
                path,
                format!(
                    "{} sample(s) of the manifest are not in the dataset (removed or renamed \
                     since the split was made): {}; restore them, or make a new split",
                    missing.len(),
                    name_some(&missing)
                ),
            ));
        }
        Ok(found)
    }

    /// Rebuilds a saved split over a freshly listed dataset, which must hold exactly the
    /// manifest's samples, and the manifest must pass [`Manifest::check`].
    ///
    /// Samples the manifest lists but the dataset lacks are an error naming them; so are
    /// samples the dataset has but the manifest lacks, and that error says to place them
    /// with [`Split::extend`] (`stoker split --extend`), which keeps every stored
    /// assignment.
    pub fn load(path: impl AsRef<Path>, mut data: Dataset) -> Result<Split> {
        let path = path.as_ref();
        let manifest = Manifest::load(path)?;
        let found = Self::match_manifest(&manifest, &mut data, Some(path))?;
        let new: Vec<&str> = data
            .samples
            .iter()
            .zip(&found)
            .filter(|(_, f)| f.is_none())
            .map(|(s, _)| s.path.as_str())
            .collect();
        if !new.is_empty() {
            return Err(Error::split(
                Some(path),
                format!(
                    "{} sample(s) of the dataset are not in the manifest: {}; to place them \
                     while keeping every existing assignment, use Split::extend \
                     (stoker split --extend MANIFEST DIR)",
                    new.len(),
                    name_some(&new)
                ),
            ));
        }
        Self::from_found(&manifest, data, &found)
    }

    /// The split of a grown dataset: every assignment of the manifest at `path` is kept,
    /// and only the samples it lacks are placed, by the rule of the [module docs](self)
    /// with the manifest's seed, fraction and group pattern. In a group split a new
    /// sample of a group the manifest already has goes to that group's side. The result's
    /// manifest (format `stoker-split/2`) covers the whole dataset; save it with
    /// [`Split::save`] (this does not write). [`Split::added`] says how many samples went
    /// to each side.
    ///
    /// The manifest must pass [`Manifest::check`], and samples it lists that the dataset
    /// no longer has are an error naming them: a split cannot shrink silently.
    pub fn extend(path: impl AsRef<Path>, data: Dataset) -> Result<Split> {
        let path = path.as_ref();
        let manifest = Manifest::load(path)?;
        Self::extend_at(&manifest, data, Some(path))
    }

    /// [`Split::extend`] with a manifest already in memory (from [`Manifest::load`] or
    /// [`Split::manifest`]).
    pub fn extend_from(manifest: &Manifest, data: Dataset) -> Result<Split> {
        Self::extend_at(manifest, data, None)
    }

    fn extend_at(manifest: &Manifest, mut data: Dataset, path: Option<&Path>) -> Result<Split> {
        let found = Self::match_manifest(manifest, &mut data, path)?;
        let mut placer = Placer::new(
            manifest.seed,
            manifest.val_fraction,
            manifest.group_by.as_deref(),
            path,
        )?;
        // The groups the manifest has keep their side (they are whole: checked above).
        for (e, v) in manifest.entries() {
            if let Some(g) = &e.group {
                placer.sides.insert(g.clone(), v);
            }
        }
        let mut is_val = Vec::with_capacity(found.len());
        for (s, f) in data.samples.iter_mut().zip(&found) {
            is_val.push(match f {
                Some((_, v)) => *v,
                None => placer.place(s)?,
            });
        }
        Ok(Self::build_on(manifest, data, &is_val, &found))
    }

    /// [`Split::build`] with the manifest's settings, keeping the entries `found` in it.
    fn build_on(
        manifest: &Manifest,
        data: Dataset,
        is_val: &[bool],
        found: &[Option<(&Entry, bool)>],
    ) -> Split {
        let kept: Vec<Option<&Entry>> = found.iter().map(|f| f.map(|(e, _)| e)).collect();
        Self::build(
            data,
            is_val,
            &kept,
            manifest.seed,
            manifest.val_fraction,
            manifest.group_by.clone(),
        )
    }

    /// A split whose every sample was found in `manifest` (so nothing is added); keeps the
    /// manifest as it is, format and digest included.
    fn from_found(
        manifest: &Manifest,
        data: Dataset,
        found: &[Option<(&Entry, bool)>],
    ) -> Result<Split> {
        let is_val: Vec<bool> = found.iter().map(|f| f.is_some_and(|(_, v)| v)).collect();
        let mut split = Self::build_on(manifest, data, &is_val, found);
        split.manifest = manifest.clone();
        Ok(split)
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

    /// How many samples this split placed by the rule: all of them for a new split, none
    /// for [`Split::load`], the new ones for [`Split::extend`].
    pub fn added(&self) -> Added {
        self.added
    }

    /// Saves the manifest as JSON.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.manifest.save(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::philox4x32_10;
    use crate::source::Sample;

    fn data(paths: &[String]) -> Dataset {
        let samples = paths
            .iter()
            .map(|p| Sample::in_memory(p.clone(), vec![0u8].into(), None))
            .collect();
        Dataset::from_samples(None, samples, vec![]).expect("unique ids")
    }

    /// The rule, written out from Philox itself: counter `[id_lo, id_hi, 0, 3 << 24]`, key
    /// `[seed_lo, seed_hi]`, the first two words as a u64, its top 53 bits as a double.
    fn reference_in_val(seed: u64, key: u64, f: f64) -> bool {
        let out = philox4x32_10(
            [key as u32, (key >> 32) as u32, 0, 3 << 24],
            [seed as u32, (seed >> 32) as u32],
        );
        let bits = u64::from(out[0]) | (u64::from(out[1]) << 32);
        let u = (bits >> 11) as f64 / (1u64 << 53) as f64;
        u < f
    }

    #[test]
    fn each_side_is_the_rule_of_the_sample_or_group_alone() {
        let paths: Vec<String> = (0..400).map(|i| format!("g{}/s{i}.png", i % 37)).collect();
        for seed in [0u64, 1, 0xDEAD_BEEF_0123_4567] {
            for f in [0.0, 0.13, 0.5, 1.0] {
                let s =
                    Split::make(data(&paths), &SplitSpec::fraction(f).seed(seed)).expect("split");
                for x in s.val().samples() {
                    assert!(reference_in_val(seed, x.id, f), "{}", x.path);
                }
                for x in s.train().samples() {
                    assert!(!reference_in_val(seed, x.id, f), "{}", x.path);
                }
                let spec = SplitSpec::fraction(f).seed(seed).group_by(r"^(g\d+)/");
                let s = Split::make(data(&paths), &spec).expect("split");
                for (side, v) in [(s.val(), true), (s.train(), false)] {
                    for x in side.samples() {
                        let g = x.path.split('/').next().unwrap_or_default();
                        assert_eq!(x.group.as_deref(), Some(g));
                        let key = fnv1a64(g.as_bytes());
                        assert_eq!(reference_in_val(seed, key, f), v, "{}", x.path);
                    }
                }
            }
        }
    }

    #[test]
    fn names_are_bounded_then_counted() {
        let paths: Vec<String> = (0..25).map(|i| format!("p{i}")).collect();
        let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
        let s = name_some(&refs);
        assert_eq!(s.matches('"').count(), 2 * NAMED, "{s}");
        assert!(
            s.starts_with("\"p0\", \"p1\"") && s.ends_with("\"p9\" and 15 more"),
            "{s}"
        );
        assert_eq!(name_some(&refs[..2]), "\"p0\", \"p1\"");
    }

    #[test]
    fn manifests_of_unknown_formats_and_bad_fractions_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths: Vec<String> = (0..30).map(|i| format!("s{i}.png")).collect();
        let split = Split::make(data(&paths), &SplitSpec::fraction(0.3)).expect("split");
        let file = dir.path().join("m.json");
        split.save(&file).expect("save");
        // Written whole, nothing left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1);
        assert_eq!(&Manifest::load(&file).expect("load"), split.manifest());

        let mut m = split.manifest().clone();
        m.format = "stoker-split/3".into();
        m.save(&file).expect("save");
        let err = Manifest::load(&file)
            .expect_err("unknown format")
            .to_string();
        assert!(err.contains("stoker-split/3"), "{err}");

        // A fraction out of range, digest and all: extend refuses to place by it.
        let mut m = split.manifest().clone();
        m.val_fraction = f64::NAN;
        m.digest = m.digest_of();
        let mut more = paths.clone();
        more.push("new.png".into());
        let err = Split::extend_from(&m, data(&more)).expect_err("NaN fraction");
        assert!(err.to_string().contains("fraction"), "{err}");
        // Nothing new: the stored sides are kept and nothing is added.
        let same = Split::extend_from(split.manifest(), data(&paths)).expect("extend");
        assert_eq!(same.added(), Added::default());
        assert_eq!(same.manifest(), split.manifest());
    }

    #[test]
    fn a_new_path_the_group_pattern_misses_is_an_error_naming_it() {
        let paths: Vec<String> = (0..20).map(|i| format!("p{}/s{i}.png", i % 4)).collect();
        let spec = SplitSpec::fraction(0.5).seed(3).group_by(r"^(p\d+)/");
        let split = Split::make(data(&paths), &spec).expect("split");
        let mut more = paths.clone();
        more.push("stray.png".into());
        let err = Split::extend_from(split.manifest(), data(&more)).expect_err("stray");
        assert!(err.to_string().contains("\"stray.png\""), "{err}");
    }
}
