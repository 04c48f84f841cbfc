//! Datasets, splits and subsets.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::errors::{config_err, to_py, IntoPy};
use crate::recipe::{kwargs, reduce, replay, Recipe};

/// A dataset: every sample found, sorted by path, each with a stable id, before any split
/// or shuffle. Make one with a constructor (`Dataset.image_folder(...)`, ...).
///
/// It pickles (for `spawn`ed workers): the pickle carries how it was made, not its
/// samples, and `pickle.loads` lists the source again, refusing (`SourceError`) a listing
/// that differs from the pickled one (files added, removed or relabelled since).
#[pyclass(module = "stoker", frozen)]
pub struct Dataset {
    pub(crate) inner: stoker::Dataset,
    /// The calls that made it, for pickling.
    recipe: Recipe,
}

/// What makes a listing the same: its classes, and every sample's id, path and label, in
/// order (the same in every process running this build).
fn fingerprint(d: &stoker::Dataset) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    d.classes().hash(&mut h);
    for s in d.samples() {
        (s.id, &s.path, s.label).hash(&mut h);
    }
    h.finish()
}

/// The `#[pymethods]` of a class over a list of samples (`Dataset`, `Subset`, whose
/// `inner` has `samples()`, `classes()` and `len()`): the getters both have; the static
/// methods `name(arg)` listing a dataset from one path with `list` (`Dataset`'s, through
/// `Dataset::at`), and those listing shards with `list` whose fields (`image`, `label`,
/// `mask` of `names`) can be named (`Dataset::shards`); then the class's own methods.
macro_rules! listing_pymethods {
    (
        $ty:ident,
        $paths_doc:literal,
        $(one_path { $($(#[$m:meta])* $name:ident($arg:ident) => $list:path;)* },)?
        $(named_fields { $($(#[$fm:meta])* $fname:ident => $names:ty, $flist:path;)* },)?
        { $($own:tt)* }
    ) => {
        #[pymethods]
        impl $ty {
            $($(
                $(#[$m])*
                #[staticmethod]
                fn $name(py: Python<'_>, $arg: PathBuf) -> PyResult<Self> {
                    Self::at(py, (stringify!($name), stringify!($arg), $arg), $list)
                }
            )*)?

            $($(
                $(#[$fm])*
                #[staticmethod]
                #[pyo3(signature = (paths_or_path, *, image=None, label=None, mask=None))]
                fn $fname(
                    py: Python<'_>,
                    paths_or_path: &Bound<'_, PyAny>,
                    image: Option<String>,
                    label: Option<String>,
                    mask: Option<String>,
                ) -> PyResult<Self> {
                    Self::shards(
                        py,
                        (stringify!($fname), paths_or_path),
                        [image, label, mask],
                        <$names>::default(),
                        |n| [&mut n.image, &mut n.label, &mut n.mask],
                        $flist,
                    )
                }
            )*)?

            /// Class names, indexed by class id.
            #[getter]
            fn classes(&self) -> Vec<String> {
                self.inner.classes().to_vec()
            }

            #[doc = $paths_doc]
            #[getter]
            fn paths(&self) -> Vec<String> {
                self.inner.samples().iter().map(|s| s.path.clone()).collect()
            }

            /// Sample ids, in the order of `paths`.
            #[getter]
            fn ids(&self) -> Vec<u64> {
                self.inner.samples().iter().map(|s| s.id).collect()
            }

            /// Labels (class ids, or None), in the order of `paths`.
            #[getter]
            fn labels(&self) -> Vec<Option<u32>> {
                self.inner.samples().iter().map(|s| s.label).collect()
            }

            fn __len__(&self) -> usize {
                self.inner.len()
            }

            $($own)*
        }
    };
}

/// The paths given as one path or a list of paths.
fn paths(arg: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    if let Ok(p) = arg.extract::<PathBuf>() {
        return Ok(vec![p]);
    }
    arg.extract::<Vec<PathBuf>>()
}

/// Parquet's columns and listing, or in a build without Parquet support stand-ins that
/// refuse it.
mod parquet {
    use std::path::PathBuf;

    #[cfg(feature = "parquet")]
    pub(crate) use stoker::source::parquet::ParquetColumns;

    /// Lists Parquet files.
    #[cfg(feature = "parquet")]
    pub(crate) fn list(p: &[PathBuf], c: &ParquetColumns) -> stoker::Result<stoker::Dataset> {
        stoker::Dataset::parquet_with_columns(p, c)
    }

    /// The columns a Parquet source reads.
    #[cfg(not(feature = "parquet"))]
    #[derive(Default)]
    pub(crate) struct ParquetColumns {
        pub(crate) image: String,
        pub(crate) label: String,
        pub(crate) mask: String,
    }

    /// Refuses: this build has no Parquet support.
    #[cfg(not(feature = "parquet"))]
    pub(crate) fn list(_: &[PathBuf], _: &ParquetColumns) -> stoker::Result<stoker::Dataset> {
        Err(stoker::Error::config(
            "parquet",
            "this build of stoker has no Parquet support",
        ))
    }
}

impl Dataset {
    /// Runs a listing without the GIL (folders and object stores can be slow to list);
    /// `recipe` is how to make it again.
    fn open(
        py: Python<'_>,
        recipe: Recipe,
        f: impl FnOnce() -> stoker::Result<stoker::Dataset> + Send,
    ) -> PyResult<Self> {
        let inner = py.detach(f).py_err()?;
        Ok(Dataset { inner, recipe })
    }

    /// A dataset listed by `list` from one path, `path`: the argument `arg` of the class's
    /// `method`.
    fn at(
        py: Python<'_>,
        (method, arg, path): (&'static str, &str, PathBuf),
        list: fn(PathBuf) -> stoker::Result<stoker::Dataset>,
    ) -> PyResult<Self> {
        let kw = PyDict::new(py);
        kw.set_item(arg, &path)?;
        Self::open(py, Recipe::start(method, kw), move || list(path))
    }

    /// A dataset of shards whose fields can be named (TFRecord keys, Parquet columns):
    /// `method` of the class, given `paths_or_path` and the names `given` (image, label,
    /// mask), each replacing its default in `names` (whose `fields` they are) where given;
    /// `list` lists the shards.
    fn shards<N: Send>(
        py: Python<'_>,
        (method, paths_or_path): (&'static str, &Bound<'_, PyAny>),
        given: [Option<String>; 3],
        mut names: N,
        fields: fn(&mut N) -> [&mut String; 3],
        list: fn(&[PathBuf], &N) -> stoker::Result<stoker::Dataset>,
    ) -> PyResult<Self> {
        let p = paths(paths_or_path)?;
        let [image, label, mask] = &given;
        let kw = kwargs!(
            py,
            paths_or_path = &p,
            image = image,
            label = label,
            mask = mask
        );
        let r = Recipe::start(method, kw);
        for (field, name) in fields(&mut names).into_iter().zip(given) {
            if let Some(name) = name {
                *field = name;
            }
        }
        Self::open(py, r, move || list(&p, &names))
    }
}

listing_pymethods!(
    Dataset,
    "Sample paths (relative to the dataset root), sorted.",
    one_path {
        /// A folder with one subfolder per class (`root/<class>/<image>`), as torchvision's
        /// `ImageFolder`; a local path or an object-store URL (`s3://bucket/train`).
        image_folder(root) => stoker::Dataset::image_folder;
        /// Every image under `root`, unlabelled.
        flat(root) => stoker::Dataset::flat;
        /// A text file listing one image per line (`path` or `path<TAB>label`).
        files(list) => stoker::Dataset::files;
        /// A manifest (CSV or JSON Lines) of images with labels, masks and targets.
        manifest(path) => stoker::Dataset::from_manifest;
    },
    named_fields {
        /// TFRecord shards of `tf.train.Example` records (files, or folders of
        /// `*.tfrecord`), with the default keys or those given.
        tfrecord => stoker::source::shards::ExampleKeys, stoker::Dataset::tfrecord_with_keys;
        /// Parquet files (files, or folders of `*.parquet`): a row per sample, the image
        /// bytes in column `image`, the class in `label`, a mask in `mask` (names as given).
        parquet => parquet::ParquetColumns, parquet::list;
    },
    {
        /// A COCO annotation file over the images in `images`: boxes and keypoints.
        #[staticmethod]
        fn coco(py: Python<'_>, annotations: PathBuf, images: PathBuf) -> PyResult<Self> {
            let r = Recipe::start(
                "coco",
                kwargs!(py, annotations = &annotations, images = &images),
            );
            Self::open(py, r, move || stoker::Dataset::coco(annotations, images))
        }

        /// WebDataset tar shards (files, or folders of `*.tar`): `key.jpg`, `key.cls`,
        /// `key.png` for a mask.
        #[staticmethod]
        fn tar(py: Python<'_>, paths_or_path: &Bound<'_, PyAny>) -> PyResult<Self> {
            let p = paths(paths_or_path)?;
            let r = Recipe::start("tar", kwargs!(py, paths_or_path = &p));
            Self::open(py, r, move || stoker::Dataset::tar(&p))
        }

        /// This dataset with each image paired with the label mask of the same stem in
        /// `mask_dir`.
        fn with_masks(&self, py: Python<'_>, mask_dir: PathBuf) -> PyResult<Self> {
            let r = self
                .recipe
                .then("with_masks", kwargs!(py, mask_dir = &mask_dir));
            let d = self.inner.clone();
            Self::open(py, r, move || d.with_masks(mask_dir))
        }

        /// This dataset with a simulated read latency per sample (benchmarks, tests).
        fn with_read_latency(&self, py: Python<'_>, seconds: f64) -> PyResult<Self> {
            let d = std::time::Duration::try_from_secs_f64(seconds)
                .map_err(|e| config_err("read_latency", e.to_string()))?;
            Ok(Dataset {
                inner: self.inner.clone().with_read_latency(d),
                recipe: self
                    .recipe
                    .then("with_read_latency", kwargs!(py, seconds = seconds)),
            })
        }

        /// Splits the dataset once, before any shuffle: a fraction `val_fraction` goes to
        /// validation by a hash of each sample's path (or of its group, the part of the path
        /// `group_by`, a regular expression, matches) keyed by `seed`. Save the split and load
        /// it in later runs; a grown dataset keeps every earlier sample's side (`Split.extend`).
        #[pyo3(signature = (val_fraction, *, seed=0, group_by=None))]
        fn split(
            slf: &Bound<'_, Self>,
            val_fraction: f64,
            seed: u64,
            group_by: Option<String>,
        ) -> PyResult<Split> {
            let mut spec = stoker::SplitSpec::fraction(val_fraction).seed(seed);
            if let Some(g) = group_by {
                spec = spec.group_by(g);
            }
            let inner = slf.get().inner.clone().split(spec).py_err()?;
            Ok(Split::new(inner, slf))
        }

        /// Every sample, as one subset with the training role (no split).
        fn all(&self) -> Subset {
            Subset {
                inner: self.inner.clone().all(),
            }
        }

        /// What listing left out: `(path, reason)` pairs.
        #[getter]
        fn skipped(&self) -> Vec<(String, String)> {
            self.inner
                .skipped()
                .iter()
                .map(|s| (s.path.clone(), s.reason.to_string()))
                .collect()
        }

        /// Pickling: how the dataset was made and a fingerprint of its listing.
        fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
            let d = slf.get();
            let steps = d.recipe.steps(slf.py())?;
            reduce(slf.as_any(), (steps, fingerprint(&d.inner)))
        }

        /// Unpickling (`pickle.loads` calls it): the dataset made again by `steps`, refused if
        /// its listing differs from the pickled one's `fingerprint`.
        #[classmethod]
        fn _restore(
            cls: &Bound<'_, PyType>,
            steps: &Bound<'_, PyAny>,
            fingerprint: u64,
        ) -> PyResult<Py<Self>> {
            let d = replay(cls, steps)?.cast_into::<Self>()?;
            if self::fingerprint(&d.get().inner) != fingerprint {
                return Err(to_py(stoker::Error::dataset(format!(
                    "the unpickled dataset, listed again, differs from the pickled one \
                 ({} samples now): files were added, removed or relabelled since it \
                 was pickled",
                    d.get().inner.len()
                ))));
            }
            Ok(d.unbind())
        }

        fn __repr__(&self) -> String {
            format!(
                "Dataset({} samples, {} classes)",
                self.inner.len(),
                self.inner.classes().len()
            )
        }
    }
);

/// A fixed split: the training and validation subsets and the manifest recording them.
///
/// It pickles: the pickle carries its dataset (see `Dataset`) and its manifest.
#[pyclass(module = "stoker", frozen)]
pub struct Split {
    inner: stoker::Split,
    /// The dataset split, for pickling.
    dataset: Py<Dataset>,
    /// Samples placed by the rule when it was made: `(train, val)`.
    added: (usize, usize),
}

impl Split {
    fn new(inner: stoker::Split, dataset: &Bound<'_, Dataset>) -> Self {
        let a = inner.added();
        Split {
            inner,
            dataset: dataset.clone().unbind(),
            added: (a.train, a.val),
        }
    }
}

#[pymethods]
impl Split {
    /// The split a saved manifest records, over `dataset` (which must hold the same
    /// samples: a sample missing or added is an error; see `Split.extend`).
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf, dataset: &Bound<'_, Dataset>) -> PyResult<Self> {
        let d = dataset.get().inner.clone();
        let inner = py.detach(move || stoker::Split::load(path, d)).py_err()?;
        Ok(Split::new(inner, dataset))
    }

    /// The saved split extended to a grown `dataset`: every sample of the manifest keeps
    /// its side, new samples are placed by the manifest's own rule. Save it again.
    #[staticmethod]
    fn extend(py: Python<'_>, path: PathBuf, dataset: &Bound<'_, Dataset>) -> PyResult<Self> {
        let d = dataset.get().inner.clone();
        let inner = py.detach(move || stoker::Split::extend(path, d)).py_err()?;
        Ok(Split::new(inner, dataset))
    }

    /// Writes the manifest (JSON) to `path`.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(path)).py_err()
    }

    /// The training subset (shuffled each epoch).
    #[getter]
    fn train(&self) -> Subset {
        Subset {
            inner: self.inner.train(),
        }
    }

    /// The validation subset (fixed order).
    #[getter]
    fn val(&self) -> Subset {
        Subset {
            inner: self.inner.val(),
        }
    }

    /// Samples `extend` placed anew: `(train, val)`.
    #[getter]
    fn added(&self) -> (usize, usize) {
        self.added
    }

    /// Pickling: the dataset, the manifest (JSON) and `added`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let s = slf.get();
        let manifest = serde_json::to_string(s.inner.manifest())
            .map_err(|e| config_err("pickle", format!("the split's manifest: {e}")))?;
        let dataset = s.dataset.clone_ref(slf.py());
        reduce(slf.as_any(), (dataset, manifest, s.added))
    }

    /// Unpickling (`pickle.loads` calls it): the split `manifest` records over `dataset`,
    /// which must hold exactly its samples.
    #[classmethod]
    fn _restore(
        _cls: &Bound<'_, PyType>,
        dataset: &Bound<'_, Dataset>,
        manifest: &str,
        added: (usize, usize),
    ) -> PyResult<Self> {
        let m: stoker::source::split::Manifest = serde_json::from_str(manifest)
            .map_err(|e| config_err("pickle", format!("the split's manifest: {e}")))?;
        let inner = stoker::Split::extend_from(&m, dataset.get().inner.clone()).py_err()?;
        let now = inner.added();
        if now.train + now.val > 0 {
            return Err(to_py(stoker::Error::dataset(format!(
                "the unpickled split's dataset has {} sample(s) its manifest lacks",
                now.train + now.val
            ))));
        }
        let mut split = Split::new(inner, dataset);
        split.added = added;
        Ok(split)
    }

    fn __repr__(&self) -> String {
        format!(
            "Split(train={}, val={})",
            self.inner.train().len(),
            self.inner.val().len()
        )
    }
}

/// One side of a split (or every sample): what a pipeline reads.
#[pyclass(module = "stoker", frozen)]
pub struct Subset {
    pub(crate) inner: stoker::Subset,
}

listing_pymethods!(Subset, "Sample paths, sorted.", {
    /// `"train"` (shuffled each epoch) or `"val"` (fixed order).
    #[getter]
    fn role(&self) -> &'static str {
        match self.inner.role() {
            stoker::source::Role::Train => "train",
            _ => "val",
        }
    }

    fn __repr__(&self) -> String {
        format!("Subset({}, {} samples)", self.role(), self.inner.len())
    }
});
