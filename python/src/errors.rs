//! stoker's errors as Python exceptions. The classes are defined in Python
//! (`stoker/_errors.py`), where they can also derive from the built-in categories
//! (`ConfigError` is a `ValueError`, `SourceError` an `OSError`); this module makes
//! instances of them with the library's fields.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};
use pyo3::IntoPyObjectExt;

/// The Python module that defines the classes.
const MODULE: &str = "stoker._errors";

/// The exception class `name` of `stoker._errors`.
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    static MODULE_CELL: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let m = MODULE_CELL.get_or_try_init(py, || py.import(MODULE).map(Bound::unbind))?;
    Ok(m.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// An instance of class `name` with `message` and the keyword fields.
fn make(py: Python<'_>, name: &str, message: String, fields: &[(&str, Py<PyAny>)]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        for (k, v) in fields {
            kwargs.set_item(k, v)?;
        }
        let value = class(py, name)?.call((message.clone(),), Some(&kwargs))?;
        Ok(PyErr::from_value(value))
    };
    // The classes ship with the package: failing to make one means a broken install.
    build().unwrap_or_else(|e| PyRuntimeError::new_err(format!("{message} ({name}: {e})")))
}

/// A Python object from a Rust value (infallible for the plain types used here).
fn obj<'py, V: IntoPyObject<'py>>(py: Python<'py>, v: V) -> Py<PyAny> {
    v.into_bound_py_any(py)
        .map(Bound::unbind)
        .unwrap_or_else(|_| py.None())
}

/// The report's kind as its snake_case name (`io`, `decode`, `corrupt`, ...).
pub fn kind_name(kind: stoker::SampleErrorKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{kind:?}").to_lowercase())
}

/// A `SampleError` with the report's fields (raised, or listed on a batch).
pub fn sample_error(py: Python<'_>, e: &stoker::SampleError) -> PyErr {
    make(
        py,
        "SampleError",
        e.to_string(),
        &[
            ("id", obj(py, e.id)),
            ("path", obj(py, e.path.clone())),
            ("kind", obj(py, kind_name(e.kind))),
            ("reason", obj(py, e.reason.clone())),
        ],
    )
}

/// A `SampleError` instance as an object (for `Batch.errors`).
pub fn sample_error_object(py: Python<'_>, e: &stoker::SampleError) -> Py<PyAny> {
    sample_error(py, e).into_value(py).into_any()
}

/// A `ConfigError` about `setting`, raised by the bindings themselves.
pub fn config_err(setting: &str, reason: impl Into<String>) -> PyErr {
    Python::attach(|py| config(py, setting, reason.into()))
}

fn config(py: Python<'_>, setting: &str, reason: String) -> PyErr {
    make(
        py,
        "ConfigError",
        format!("invalid configuration: {setting}: {reason}"),
        &[("setting", obj(py, setting)), ("reason", obj(py, reason))],
    )
}

/// The Python exception for a stoker error: its category's class, with its fields.
pub fn to_py(e: stoker::Error) -> PyErr {
    Python::attach(|py| convert(py, e))
}

fn convert(py: Python<'_>, e: stoker::Error) -> PyErr {
    use stoker::Error as E;
    let msg = e.to_string();
    let path = |p: Option<std::path::PathBuf>| obj(py, p.map(|p| p.display().to_string()));
    match e {
        E::Io { path: p, source } => make(
            py,
            "SourceError",
            msg,
            &[
                ("path", path(Some(p))),
                ("reason", obj(py, source.to_string())),
            ],
        ),
        E::Source { path: p, reason } => make(
            py,
            "SourceError",
            msg,
            &[("path", path(p)), ("reason", obj(py, reason))],
        ),
        E::Listing { path: p, .. } => make(
            py,
            "SourceError",
            msg.clone(),
            &[("path", path(Some(p))), ("reason", obj(py, msg))],
        ),
        E::Split { path: p, reason } => make(
            py,
            "SplitError",
            msg,
            &[("path", path(p)), ("reason", obj(py, reason))],
        ),
        E::Config { setting, reason } => config(py, &setting, reason),
        E::DType { asked, found } => config(
            py,
            "dtype",
            format!("the batch holds {found}, asked for {asked}"),
        ),
        E::Limit { what, .. } => config(py, &what, msg),
        E::Sample(s) => sample_error(py, &s),
        E::BackendUnavailable { backend, reason } => make(
            py,
            "BackendUnavailableError",
            msg,
            &[("backend", obj(py, backend)), ("reason", obj(py, reason))],
        ),
        E::Device(_) | E::DeviceMismatch { .. } => make(py, "DeviceError", msg, &[]),
        E::Pipeline(p) => {
            let samples: Vec<Py<PyAny>> = match &p {
                stoker::PipelineError::ReplacementsExhausted { samples, .. } => {
                    samples.iter().map(|s| sample_error_object(py, s)).collect()
                }
                _ => Vec::new(),
            };
            make(py, "PipelineError", msg, &[("samples", obj(py, samples))])
        }
        E::Resume(r) => resume(py, &r, msg),
        _ => make(py, "StokerError", msg, &[]),
    }
}

/// A `ResumeError` for a saved state this pipeline cannot resume: `reason` names the field
/// that differs (`version`, `seed`, `order`, `global_batch_size`, `position`), with the
/// state's and the pipeline's values where there are two.
fn resume(py: Python<'_>, e: &stoker::ResumeError, msg: String) -> PyErr {
    use stoker::ResumeError as R;
    let (reason, state, pipeline): (&str, Option<u64>, Option<u64>) = match *e {
        R::Version { found, expected } => ("version", Some(found.into()), Some(expected.into())),
        R::Seed { state, pipeline } => ("seed", Some(state), Some(pipeline)),
        R::Order { state, pipeline } => ("order", Some(state), Some(pipeline)),
        R::GlobalBatchSize { state, pipeline } => {
            ("global_batch_size", Some(state), Some(pipeline))
        }
        R::Position { consumed, .. } => ("position", Some(consumed), None),
        _ => ("other", None, None),
    };
    make(
        py,
        "ResumeError",
        msg,
        &[
            ("reason", obj(py, reason)),
            ("state", obj(py, state)),
            ("pipeline", obj(py, pipeline)),
        ],
    )
}

/// A `ResumeError` (reason `"format"`) for something that is not a saved state.
pub fn resume_format_err(detail: String) -> PyErr {
    Python::attach(|py| {
        make(
            py,
            "ResumeError",
            format!("cannot resume: {detail}"),
            &[
                ("reason", obj(py, "format")),
                ("state", py.None()),
                ("pipeline", py.None()),
            ],
        )
    })
}

/// `Result<T, stoker::Error>` into a `PyResult`.
pub trait IntoPy<T> {
    /// The error as its Python exception.
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for stoker::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
