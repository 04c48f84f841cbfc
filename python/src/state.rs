//! A pipeline's resumable state (`stoker::ResumeState`) as a plain Python dict, made
//! through its JSON form both ways, so that any field the library adds passes through
//! (and a checkpoint holds it with `torch.save`, `json.dump` or `pickle` alike).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::resume_format_err;

/// The state as a dict (`json.loads` of its JSON).
pub fn to_dict(py: Python<'_>, state: &stoker::ResumeState) -> PyResult<Py<PyAny>> {
    let text = serde_json::to_string(state)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot write the state as JSON: {e}")))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

/// The state a dict made by [`to_dict`] holds; `ResumeError` (reason `"format"`) for
/// anything else.
pub fn from_dict(state: &Bound<'_, PyAny>) -> PyResult<stoker::ResumeState> {
    if !state.is_instance_of::<PyDict>() {
        return Err(resume_format_err(format!(
            "a state is the dict that state() gives, not {}",
            state.get_type().name()?
        )));
    }
    let text: String = state
        .py()
        .import("json")?
        .call_method1("dumps", (state,))
        .and_then(|t| t.extract())
        .map_err(|e| resume_format_err(format!("the state is not plain JSON data: {e}")))?;
    serde_json::from_str(&text)
        .map_err(|e| resume_format_err(format!("the dict is not a pipeline state: {e}")))
}
