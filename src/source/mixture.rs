//! Several datasets read as one, each drawn by its weight: [`Mixture`].
//!
//! A mixture is made of [`Subset`]s of any kind (image folders, file lists, shards,
//! Parquet files, object storage: samples of any [`Location`](super::Location)) and
//! becomes one [`Subset`] ([`Mixture::subset`]) that a pipeline reads like any other. Its
//! epoch order is a pure function of `(seed, epoch)` (see
//! [`sampler::Exhausted`](super::sampler::Exhausted) and the sampler's `mixing` module),
//! so global batches, sharding over ranks and resuming work on it as on one dataset.
//!
//! In the combined subset, source `k`'s samples come after those of sources `0..k`, in
//! their own order; each sample's path is `"{k}/{path}"` (its path in its source behind
//! the source's index) and its id is that path's [`sample_id`], so that
//! two sources may hold the same relative paths (two image folders of the same classes).
//!
//! # Labels
//!
//! The mixture's classes are the union of the sources' class names, in source order
//! (source 0's classes, then source 1's that source 0 does not have, and so on); each
//! source's labels (and the class ids of its targets: several class ids, box classes) are
//! remapped to the same name's id in the union. A label beyond its source's class list
//! (or unnamed in it, as a COCO file's unused category ids are) is named by its number
//! (`"7"`). So two image folders of the same classes keep their
//! labels, and two of different classes get disjoint ids. Label masks cannot be remapped
//! (their pixels are class ids): sources with masks must have the same class list, or
//! the first source's list the others' begin with.

use std::collections::HashMap;
use std::sync::Arc;

use super::sampler::{Exhausted, Mixing};
use super::{sample_id, Role, Sample, Subset, SubsetInner, MAX_LABEL};
use crate::error::{Error, Result};

/// Several subsets drawn by their weights, as one subset (see the [module docs](self)).
///
/// ```
/// # fn main() -> stoker::Result<()> {
/// use std::sync::Arc;
/// use stoker::source::sampler::Exhausted;
/// use stoker::{Dataset, Mixture, Sample};
///
/// let data = |n: usize, tag: &str| {
///     let samples = (0..n)
///         .map(|i| Sample::in_memory(format!("{tag}{i}.png"), Arc::from(vec![]), Some(0)))
///         .collect();
///     Dataset::from_samples(None, samples, vec!["cat".into()])
/// };
/// let subset = Mixture::new(vec![(data(70, "a")?.all(), 0.7), (data(10, "b")?.all(), 0.3)])
///     .epoch_size(100)
///     .when_exhausted(Exhausted::Restart)
///     .subset()?;
/// assert_eq!((subset.len(), subset.sources()), (80, 2));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Mixture {
    sources: Vec<(Subset, f64)>,
    epoch_size: Option<usize>,
    exhausted: Exhausted,
}

impl Mixture {
    /// The sources with their weights (finite, not negative, not all 0; relative: they
    /// are normalised to sum to 1). A source of weight 0 is never drawn from.
    pub fn new(sources: Vec<(Subset, f64)>) -> Mixture {
        Mixture {
            sources,
            epoch_size: None,
            exhausted: Exhausted::default(),
        }
    }

    setters! {
        /// Positions an epoch has (at least 1); by default the sum of the sources' lengths
        /// (those of weight 0 left out), so that sources weighted in proportion to their
        /// lengths give each of their samples once an epoch. Under [`Exhausted::Stop`] an
        /// epoch may end sooner.
        pub fn epoch_size(n: usize) => self.epoch_size = Some(n);

        /// What a source that has given all its samples does ([`Exhausted::Restart`] by
        /// default).
        pub fn when_exhausted(policy: Exhausted) => self.exhausted = policy;
    }

    /// The mixture as one subset for [`Pipeline::builder`](crate::Pipeline::builder):
    /// its samples (each source's, in source order, renamed and relabelled as the
    /// [module docs](self) say) and its order. An [`Error::Config`] of setting `mixture`
    /// for bad weights, an epoch size of 0, a source of positive weight without samples,
    /// or masks whose class lists differ.
    pub fn subset(self) -> Result<Subset> {
        let lens: Vec<usize> = self.sources.iter().map(|(s, _)| s.len()).collect();
        let weights: Vec<f64> = self.sources.iter().map(|(_, w)| *w).collect();
        let shuffle: Vec<bool> = self
            .sources
            .iter()
            .map(|(s, _)| s.role() == Role::Train)
            .collect();
        let size = self.epoch_size.unwrap_or_else(|| {
            lens.iter()
                .zip(&weights)
                .filter(|(_, w)| **w > 0.0)
                .map(|(n, _)| *n)
                .sum()
        });
        let mixing = Mixing::new(&lens, &weights, &shuffle, size, self.exhausted)?;
        let (classes, maps) = union_classes(&self.sources)?;
        let mut samples = Vec::with_capacity(lens.iter().sum());
        for (k, ((source, _), map)) in self.sources.iter().zip(&maps).enumerate() {
            for s in source.samples() {
                samples.push(relabelled(k, s, map));
            }
        }
        let read_latency = self
            .sources
            .iter()
            .filter_map(|(s, _)| s.inner.read_latency)
            .max();
        Ok(Subset {
            inner: Arc::new(SubsetInner {
                samples,
                classes,
                role: Role::Train,
                root: None,
                read_latency,
                mixing: Some(mixing),
            }),
        })
    }
}

/// The union of the sources' class names in source order, and for each source its
/// labels' ids in the union (`None`: the identity).
type Maps = Vec<Option<Vec<u32>>>;

fn union_classes(sources: &[(Subset, f64)]) -> Result<(Vec<String>, Maps)> {
    let mut names: Vec<String> = Vec::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut maps = Vec::with_capacity(sources.len());
    let mut masks = false;
    for (k, (source, _)) in sources.iter().enumerate() {
        let mut top = source.classes().len();
        for s in source.samples() {
            let targets = s.targets.iter().flat_map(|t| {
                let boxes = t.boxes.iter().map(|b| b.class);
                t.classes.iter().copied().chain(boxes)
            });
            for l in s.label.into_iter().chain(targets) {
                top = top.max(l as usize + 1);
            }
            masks |= s.mask.is_some();
        }
        let mut map = Vec::with_capacity(top);
        for l in 0..top {
            let name = source
                .classes()
                .get(l)
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or_else(|| l.to_string());
            let id = match ids.get(&name) {
                Some(&id) => id,
                None => {
                    let id = names.len() as u32;
                    if id > MAX_LABEL {
                        return Err(Error::config(
                            "mixture",
                            format!(
                                "the sources' classes together are more than {} (stoker::MAX_LABEL + 1); source {k} adds {name:?}",
                                MAX_LABEL as u64 + 1
                            ),
                        ));
                    }
                    ids.insert(name.clone(), id);
                    names.push(name);
                    id
                }
            };
            map.push(id);
        }
        let identity = map.iter().enumerate().all(|(l, &id)| l as u32 == id);
        if masks && !identity {
            return Err(Error::config(
                "mixture",
                format!(
                    "source {k}'s classes are not numbered as in the sources before it, and label \
                     masks (whose pixels are class ids) cannot be renumbered: give the sources \
                     with masks the same class list"
                ),
            ));
        }
        maps.push((!identity).then_some(map));
    }
    Ok((names, maps))
}

/// Sample `s` of source `k` as the mixture holds it: renamed, labels mapped by `map`.
fn relabelled(k: usize, s: &Sample, map: &Option<Vec<u32>>) -> Sample {
    let path = format!("{k}/{}", s.path);
    let mut out = s.clone();
    out.id = sample_id(&path);
    out.path = path;
    out.source = k;
    if let Some(map) = map {
        let m = |l: u32| map.get(l as usize).copied().unwrap_or(l);
        out.label = s.label.map(m);
        if let Some(t) = &s.targets {
            let mut t = (**t).clone();
            t.classes.iter_mut().for_each(|c| *c = m(*c));
            t.boxes.iter_mut().for_each(|b| b.class = m(b.class));
            out.targets = Some(Arc::new(t));
        }
    }
    out
}

impl Subset {
    /// How many sources the subset mixes: those of its [`Mixture`], or 1.
    pub fn sources(&self) -> usize {
        self.inner.mixing.as_ref().map_or(1, Mixing::sources)
    }

    /// The source (its index in the [`Mixture`]) of sample `index` of the subset; 0
    /// for a subset that is not a mixture.
    pub fn source_of(&self, index: usize) -> usize {
        self.inner.mixing.as_ref().map_or(0, |m| m.source_of(index))
    }

    /// The mixture's order, when the subset is a [`Mixture`]'s.
    pub(crate) fn mixing(&self) -> Option<&Mixing> {
        self.inner.mixing.as_ref()
    }
}
