//! Datasets, splits and subsets.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::{config_err, IntoPy};

/// A dataset: every sample found, sorted by path, each with a stable id, before any split
/// or shuffle. Make one with a constructor (`Dataset.image_folder(...)`, ...).
#[pyclass(module = "stoker", frozen)]
pub struct Dataset {
    pub(crate) inner: stoker::Dataset,
}

/// The samples' paths.
fn paths_of(samples: &[stoker::Sample]) -> Vec<String> {
    samples.iter().map(|s| s.path.clone()).collect()
}

/// The samples' ids.
fn ids_of(samples: &[stoker::Sample]) -> Vec<u64> {
    samples.iter().map(|s| s.id).collect()
}

/// The paths given as one path or a list of paths.
fn paths(arg: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    if let Ok(p) = arg.extract::<PathBuf>() {
        return Ok(vec![p]);
    }
    arg.extract::<Vec<PathBuf>>()
}

impl Dataset {
    /// Runs a listing without the GIL (folders and object stores can be slow to list).
    fn open(
        py: Python<'_>,
        f: impl FnOnce() -> stoker::Result<stoker::Dataset> + Send,
    ) -> PyResult<Self> {
        let inner = py.detach(f).py_err()?;
        Ok(Dataset { inner })
    }
}

#[pymethods]
impl Dataset {
    /// A folder with one subfolder per class (`root/<class>/<image>`), as torchvision's
    /// `ImageFolder`; a local path or an object-store URL (`s3://bucket/train`).
    #[staticmethod]
    fn image_folder(py: Python<'_>, root: PathBuf) -> PyResult<Self> {
        Self::open(py, move || stoker::Dataset::image_folder(root))
    }

    /// Every image under `root`, unlabelled.
    #[staticmethod]
    fn flat(py: Python<'_>, root: PathBuf) -> PyResult<Self> {
        Self::open(py, move || stoker::Dataset::flat(root))
    }

    /// A text file listing one image per line (`path` or `path<TAB>label`).
    #[staticmethod]
    fn files(py: Python<'_>, list: PathBuf) -> PyResult<Self> {
        Self::open(py, move || stoker::Dataset::files(list))
    }

    /// A manifest (CSV or JSON Lines) of images with labels, masks and targets.
    #[staticmethod]
    fn manifest(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        Self::open(py, move || stoker::Dataset::from_manifest(path))
    }

    /// A COCO annotation file over the images in `images`: boxes and keypoints.
    #[staticmethod]
    fn coco(py: Python<'_>, annotations: PathBuf, images: PathBuf) -> PyResult<Self> {
        Self::open(py, move || stoker::Dataset::coco(annotations, images))
    }

    /// TFRecord shards of `tf.train.Example` records (files, or folders of
    /// `*.tfrecord`), with the default keys or those given.
    #[staticmethod]
    #[pyo3(signature = (paths_or_path, *, image=None, label=None, mask=None))]
    fn tfrecord(
        py: Python<'_>,
        paths_or_path: &Bound<'_, PyAny>,
        image: Option<String>,
        label: Option<String>,
        mask: Option<String>,
    ) -> PyResult<Self> {
        let p = paths(paths_or_path)?;
        let mut keys = stoker::source::shards::ExampleKeys::default();
        if let Some(k) = image {
            keys.image = k;
        }
        if let Some(k) = label {
            keys.label = k;
        }
        if let Some(k) = mask {
            keys.mask = k;
        }
        Self::open(py, move || stoker::Dataset::tfrecord_with_keys(&p, &keys))
    }

    /// WebDataset tar shards (files, or folders of `*.tar`): `key.jpg`, `key.cls`,
    /// `key.png` for a mask.
    #[staticmethod]
    fn tar(py: Python<'_>, paths_or_path: &Bound<'_, PyAny>) -> PyResult<Self> {
        let p = paths(paths_or_path)?;
        Self::open(py, move || stoker::Dataset::tar(&p))
    }

    /// Parquet files (files, or folders of `*.parquet`): a row per sample, the image
    /// bytes in column `image`, the class in `label`, a mask in `mask` (names as given).
    #[staticmethod]
    #[pyo3(signature = (paths_or_path, *, image=None, label=None, mask=None))]
    fn parquet(
        py: Python<'_>,
        paths_or_path: &Bound<'_, PyAny>,
        image: Option<String>,
        label: Option<String>,
        mask: Option<String>,
    ) -> PyResult<Self> {
        #[cfg(feature = "parquet")]
        {
            let p = paths(paths_or_path)?;
            let mut cols = stoker::source::parquet::ParquetColumns::default();
            if let Some(c) = image {
                cols.image = c;
            }
            if let Some(c) = label {
                cols.label = c;
            }
            if let Some(c) = mask {
                cols.mask = c;
            }
            Self::open(py, move || stoker::Dataset::parquet_with_columns(&p, &cols))
        }
        #[cfg(not(feature = "parquet"))]
        {
            let _ = (py, paths_or_path, image, label, mask);
            Err(config_err(
                "parquet",
                "this build of stoker has no Parquet support",
            ))
        }
    }

    /// This dataset with each image paired with the label mask of the same stem in
    /// `mask_dir`.
    fn with_masks(&self, py: Python<'_>, mask_dir: PathBuf) -> PyResult<Self> {
        let d = self.inner.clone();
        Self::open(py, move || d.with_masks(mask_dir))
    }

    /// This dataset with a simulated read latency per sample (benchmarks, tests).
    fn with_read_latency(&self, seconds: f64) -> PyResult<Self> {
        let d = std::time::Duration::try_from_secs_f64(seconds)
            .map_err(|e| config_err("read_latency", e.to_string()))?;
        Ok(Dataset {
            inner: self.inner.clone().with_read_latency(d),
        })
    }

    /// Splits the dataset once, before any shuffle: a fraction `val_fraction` goes to
    /// validation by a hash of each sample's path (or of its group, the part of the path
    /// `group_by`, a regular expression, matches) keyed by `seed`. Save the split and load
    /// it in later runs; a grown dataset keeps every earlier sample's side (`Split.extend`).
    #[pyo3(signature = (val_fraction, *, seed=0, group_by=None))]
    fn split(&self, val_fraction: f64, seed: u64, group_by: Option<String>) -> PyResult<Split> {
        let mut spec = stoker::SplitSpec::fraction(val_fraction).seed(seed);
        if let Some(g) = group_by {
            spec = spec.group_by(g);
        }
        let inner = self.inner.clone().split(spec).py_err()?;
        Ok(Split { inner })
    }

    /// Every sample, as one subset with the training role (no split).
    fn all(&self) -> Subset {
        Subset {
            inner: self.inner.clone().all(),
        }
    }

    /// Class names, indexed by class id.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.inner.classes().to_vec()
    }

    /// Sample paths (relative to the dataset root), sorted.
    #[getter]
    fn paths(&self) -> Vec<String> {
        paths_of(self.inner.samples())
    }

    /// Sample ids, in the order of `paths`.
    #[getter]
    fn ids(&self) -> Vec<u64> {
        ids_of(self.inner.samples())
    }

    /// Labels (class ids, or None), in the order of `paths`.
    #[getter]
    fn labels(&self) -> Vec<Option<u32>> {
        self.inner.samples().iter().map(|s| s.label).collect()
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

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Dataset({} samples, {} classes)",
            self.inner.len(),
            self.inner.classes().len()
        )
    }
}

/// A fixed split: the training and validation subsets and the manifest recording them.
#[pyclass(module = "stoker", frozen)]
pub struct Split {
    inner: stoker::Split,
}

#[pymethods]
impl Split {
    /// The split a saved manifest records, over `dataset` (which must hold the same
    /// samples: a sample missing or added is an error; see `Split.extend`).
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf, dataset: &Dataset) -> PyResult<Self> {
        let d = dataset.inner.clone();
        let inner = py.detach(move || stoker::Split::load(path, d)).py_err()?;
        Ok(Split { inner })
    }

    /// The saved split extended to a grown `dataset`: every sample of the manifest keeps
    /// its side, new samples are placed by the manifest's own rule. Save it again.
    #[staticmethod]
    fn extend(py: Python<'_>, path: PathBuf, dataset: &Dataset) -> PyResult<Self> {
        let d = dataset.inner.clone();
        let inner = py.detach(move || stoker::Split::extend(path, d)).py_err()?;
        Ok(Split { inner })
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
        let a = self.inner.added();
        (a.train, a.val)
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

#[pymethods]
impl Subset {
    /// `"train"` (shuffled each epoch) or `"val"` (fixed order).
    #[getter]
    fn role(&self) -> &'static str {
        match self.inner.role() {
            stoker::source::Role::Train => "train",
            _ => "val",
        }
    }

    /// Class names, indexed by class id.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.inner.classes().to_vec()
    }

    /// Sample paths, sorted.
    #[getter]
    fn paths(&self) -> Vec<String> {
        paths_of(self.inner.samples())
    }

    /// Sample ids, in the order of `paths`.
    #[getter]
    fn ids(&self) -> Vec<u64> {
        ids_of(self.inner.samples())
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("Subset({}, {} samples)", self.role(), self.inner.len())
    }
}
