//! Python bindings of stoker (the `stoker` package's native module, `stoker._stoker`):
//! datasets, splits, augmentation and pipelines, with batches handed to PyTorch, NumPy
//! and any DLPack consumer without a copy. A thin layer over the crate's public API; the
//! package's Python side (`pysrc/stoker`) adds the exception classes and type stubs.

use pyo3::prelude::*;

mod augment;
mod batch;
mod data;
mod errors;
mod owner;
mod pipeline;
mod recipe;
mod report;
mod state;
mod tensor;

#[pymodule]
fn _stoker(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<data::Dataset>()?;
    m.add_class::<data::Split>()?;
    m.add_class::<data::Subset>()?;
    m.add_class::<augment::Augment>()?;
    m.add_class::<pipeline::Pipeline>()?;
    m.add_class::<pipeline::Epoch>()?;
    m.add_class::<pipeline::Stats>()?;
    m.add_class::<report::Report>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<tensor::Tensor>()?;
    m.add_function(wrap_pyfunction!(backends, m)?)?;
    Ok(())
}

/// The backends compiled into this build (`cpu` always; `cuda`, `wgpu`), whether or not
/// this machine can run them.
#[pyfunction]
fn backends() -> Vec<&'static str> {
    let mut v = vec!["cpu"];
    if cfg!(feature = "cuda") {
        v.push("cuda");
    }
    if cfg!(feature = "wgpu") {
        v.push("wgpu");
    }
    v
}
