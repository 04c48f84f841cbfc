//! What pickling carries for a `Dataset` or an `Augment`: the calls that made it (its
//! configuration, never samples or pixels), made again by `pickle.loads`, in the same
//! process or another one (a `spawn`ed worker).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use crate::errors::config_err;

/// The keyword arguments `name = value, ...` as a dict (for [`Recipe::then`]).
macro_rules! kwargs {
    ($py:expr $(, $k:ident = $v:expr)* $(,)?) => {{
        let d = pyo3::types::PyDict::new($py);
        $(d.set_item(stringify!($k), $v)?;)*
        d
    }};
}
pub(crate) use kwargs;

/// One call: the method's name (empty for the class itself) and its keyword arguments.
struct Step {
    name: &'static str,
    kwargs: Py<PyDict>,
    before: Option<Arc<Step>>,
}

/// The calls that made an object: the first on the class, each later one on the result
/// of the one before. Objects made from one another share their first steps.
#[derive(Clone)]
pub(crate) struct Recipe(Arc<Step>);

impl Recipe {
    /// A recipe whose first call is `name` (a static method of the class, or `""` for
    /// the class's constructor) with `kwargs`.
    pub(crate) fn start(name: &'static str, kwargs: Bound<'_, PyDict>) -> Self {
        Recipe(Arc::new(Step {
            name,
            kwargs: kwargs.unbind(),
            before: None,
        }))
    }

    /// This recipe followed by the method call `name(**kwargs)` on its result.
    pub(crate) fn then(&self, name: &'static str, kwargs: Bound<'_, PyDict>) -> Self {
        Recipe(Arc::new(Step {
            name,
            kwargs: kwargs.unbind(),
            before: Some(Arc::clone(&self.0)),
        }))
    }

    /// The calls, first to last, as a list of `(name, kwargs)` (what pickling carries).
    pub(crate) fn steps<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut steps = Vec::new();
        let mut step = Some(&self.0);
        while let Some(s) = step {
            steps.push((s.name, s.kwargs.bind(py).copy()?));
            step = s.before.as_ref();
        }
        steps.reverse();
        PyList::new(py, steps)
    }
}

/// Makes an object of class `cls` again from its [`Recipe::steps`]. Only public methods
/// are called: the steps come from a pickle, which may have been made by anyone.
pub(crate) fn replay<'py>(
    cls: &Bound<'py, PyType>,
    steps: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut obj = cls.clone().into_any();
    for (i, step) in steps.try_iter()?.enumerate() {
        let (name, kwargs): (String, Bound<'py, PyDict>) = step?.extract()?;
        let target = if i == 0 && name.is_empty() {
            obj.clone()
        } else if name.is_empty() || name.starts_with('_') {
            return Err(config_err(
                "pickle",
                format!("step {i} of the pickled recipe calls {name:?}, not a public method"),
            ));
        } else {
            obj.getattr(name.as_str())?
        };
        obj = target.call((), Some(&kwargs))?;
    }
    Ok(obj)
}

/// What `obj.__reduce__()` returns: its class's `_restore`, and the arguments `args` that
/// make `obj` again.
pub(crate) fn reduce<'py, A>(obj: &Bound<'py, PyAny>, args: A) -> PyResult<Bound<'py, PyTuple>>
where
    A: IntoPyObject<'py>,
    PyErr: From<A::Error>,
{
    let restore = obj.get_type().getattr("_restore")?;
    (restore, args).into_pyobject(obj.py())
}
