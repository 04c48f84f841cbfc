//! Parquet files as sources (cargo feature `parquet`): a column of encoded images, a label
//! column, an optional mask column. The image and mask columns may be plain binary
//! columns or structs with a `bytes` field (the Hugging Face `Image` layout).
//!
//! Every row is a sample, its id stable: [`super::sample_id`] of `<file name>/<row>` (the
//! row's index in the file, 8 digits). Listing reads the footer and the label column only.
//! A sample is read alone: the reader selects its row group and, within it, its one row;
//! with a page index in the file (written by `pyarrow` with `write_page_index=True`, by
//! Spark, by DuckDB) only the page holding the row is read and decompressed, without one
//! the column chunk's pages before it are decoded too. Each file's footer is parsed once
//! per process and cached. Reading happens on the pipeline's reader threads, so row groups
//! are read in parallel.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use arrow_array::{
    Array, BinaryArray, Int16Array, Int32Array, Int64Array, Int8Array, LargeBinaryArray,
    StructArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;

use super::shards::{file_stamp, from_files, shard_name, shard_paths, ParquetCell};
use super::{sample_id, Dataset, Location, Sample};
use crate::error::{Error, Result};

/// A Parquet cell that could not be read: the file, the row, and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{} row {index} (row group {row_group}): {fault}", path.display())]
pub struct CellError {
    /// The file.
    pub path: PathBuf,
    /// The row's index in the file.
    pub index: u64,
    /// The row group.
    pub row_group: usize,
    /// What went wrong.
    pub fault: CellFault,
}

/// What went wrong reading a Parquet cell.
#[derive(Debug, thiserror::Error)]
pub enum CellFault {
    /// The file's footer could not be read.
    #[error(transparent)]
    File(#[from] FileError),
    /// The file has no such column (binary, or struct with `bytes`).
    #[error("no column {0:?}")]
    NoColumn(Arc<str>),
    /// The file could not be opened.
    #[error("{0}")]
    Open(std::io::Error),
    /// The Parquet reader failed (building it, or reading the row).
    #[error("{0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// Decoding the row into Arrow failed.
    #[error("{0}")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// The row group has fewer rows than the index says.
    #[error("row missing")]
    RowMissing,
    /// The reader returned an empty batch.
    #[error("no row read")]
    NoRow,
    /// A struct column without the `bytes` field of the Hugging Face `Image` layout.
    #[error("struct column without a `bytes` field")]
    NoBytesField,
    /// A column of a type that holds no bytes (its Arrow type).
    #[error("column of type {0} holds no bytes")]
    NotBytes(arrow_schema::DataType),
    /// The cell is null.
    #[error("{0:?} is null")]
    Null(Arc<str>),
    /// The cell is larger than the limit.
    #[error("{len} bytes exceed the limit of {limit}")]
    TooLarge {
        /// The cell's length.
        len: u64,
        /// The limit.
        limit: u64,
    },
}

/// Why a Parquet file's footer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// Its size and modification time could not be read.
    #[error("{0}")]
    Stamp(Error),
    /// It could not be opened.
    #[error("{}: {error}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What opening it said.
        error: std::io::Error,
    },
    /// It is not a Parquet file the reader can read.
    #[error("{}: not a readable Parquet file ({error})", path.display())]
    Footer {
        /// The file.
        path: PathBuf,
        /// What the reader said.
        error: parquet::errors::ParquetError,
    },
}

/// The columns a Parquet source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetColumns {
    /// The encoded images (binary, or a struct with a `bytes` field). Default `image`.
    pub image: String,
    /// The class labels (an integer column), if any. Default `label` (ignored when the
    /// file has no such column).
    pub label: String,
    /// The encoded label masks, if any. Default `mask` (ignored when absent).
    pub mask: String,
}

impl Default for ParquetColumns {
    fn default() -> Self {
        ParquetColumns {
            image: "image".into(),
            label: "label".into(),
            mask: "mask".into(),
        }
    }
}

fn options() -> ArrowReaderOptions {
    ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional)
}

/// The file's footer (and page index), parsed once per process; a file whose size or
/// modification time changed is parsed again.
fn metadata(path: &Path) -> std::result::Result<ArrowReaderMetadata, FileError> {
    type Cache = Mutex<HashMap<PathBuf, ((u64, u128), ArrowReaderMetadata)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let stamp = file_stamp(path).map_err(FileError::Stamp)?;
    let cache = CACHE.get_or_init(Default::default);
    if let Some((s, m)) = cache.lock().ok().and_then(|c| c.get(path).cloned()) {
        if s == stamp {
            return Ok(m);
        }
    }
    let f = super::fsio::open_regular(path).map_err(|error| FileError::Open {
        path: path.to_path_buf(),
        error,
    })?;
    let m = ArrowReaderMetadata::load(&f, options()).map_err(|error| FileError::Footer {
        path: path.to_path_buf(),
        error,
    })?;
    if let Ok(mut c) = cache.lock() {
        c.insert(path.to_path_buf(), (stamp, m.clone()));
    }
    Ok(m)
}

/// The leaf column that holds `name`'s bytes: `name` itself, or `name.bytes`.
fn leaf(m: &ArrowReaderMetadata, name: &str) -> Option<usize> {
    let schema = m.parquet_schema();
    let want = [name.to_string(), format!("{name}.bytes")];
    (0..schema.num_columns()).find(|&i| want.contains(&schema.column(i).path().string()))
}

/// The bytes of the first row of a batch column: binary, large binary, or a struct's
/// `bytes` field. `None` for a null.
fn bytes_of(col: &dyn Array) -> std::result::Result<Option<Vec<u8>>, CellFault> {
    if col.is_empty() {
        return Err(CellFault::NoRow);
    }
    if let Some(s) = col.as_any().downcast_ref::<StructArray>() {
        if s.is_null(0) {
            return Ok(None);
        }
        let inner = s.column_by_name("bytes").ok_or(CellFault::NoBytesField)?;
        return bytes_of(inner.as_ref());
    }
    if col.is_null(0) {
        return Ok(None);
    }
    if let Some(b) = col.as_any().downcast_ref::<BinaryArray>() {
        return Ok(Some(b.value(0).to_vec()));
    }
    if let Some(b) = col.as_any().downcast_ref::<LargeBinaryArray>() {
        return Ok(Some(b.value(0).to_vec()));
    }
    Err(CellFault::NotBytes(col.data_type().clone()))
}

/// Reads `cell` into `buf`; `max_bytes` bounds it.
pub fn read_cell(
    cell: &ParquetCell,
    max_bytes: u64,
    buf: &mut Vec<u8>,
) -> std::result::Result<(), CellError> {
    let at = |fault: CellFault| CellError {
        path: cell.path.clone(),
        index: cell.index,
        row_group: cell.row_group,
        fault,
    };
    let m = metadata(&cell.path).map_err(|e| at(e.into()))?;
    let col =
        leaf(&m, &cell.column).ok_or_else(|| at(CellFault::NoColumn(Arc::clone(&cell.column))))?;
    let mask = ProjectionMask::leaves(m.parquet_schema(), [col]);
    let f = super::fsio::open_regular(&cell.path).map_err(|e| at(CellFault::Open(e)))?;
    let mut reader = ParquetRecordBatchReaderBuilder::new_with_metadata(f, m)
        .with_row_groups(vec![cell.row_group])
        .with_projection(mask)
        .with_row_selection(RowSelection::from(vec![
            RowSelector::skip(cell.row),
            RowSelector::select(1),
        ]))
        .with_batch_size(1)
        .build()
        .map_err(|e| at(e.into()))?;
    let batch = reader
        .next()
        .ok_or_else(|| at(CellFault::RowMissing))?
        .map_err(|e| at(e.into()))?;
    let value = bytes_of(batch.column(0).as_ref()).map_err(at)?;
    let value = value.ok_or_else(|| at(CellFault::Null(Arc::clone(&cell.column))))?;
    if value.len() as u64 > max_bytes {
        return Err(at(CellFault::TooLarge {
            len: value.len() as u64,
            limit: max_bytes,
        }));
    }
    *buf = value;
    Ok(())
}

/// The labels of every row (`None` for nulls), from an integer column, as recorded (they
/// are checked against [`crate::MAX_LABEL`] per sample).
fn labels(path: &Path, m: &ArrowReaderMetadata, col: usize) -> Result<Vec<Option<i128>>> {
    let f = super::fsio::open_regular(path).map_err(|e| Error::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(f, m.clone())
        .with_projection(ProjectionMask::leaves(m.parquet_schema(), [col]))
        .with_batch_size(8192)
        .build()
        .map_err(|e| Error::source_at(path, e.to_string()))?;
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::source_at(path, e.to_string()))?;
        let c = batch.column(0);
        macro_rules! ints {
            ($($t:ty),*) => {{
                $(
                    if let Some(a) = c.as_any().downcast_ref::<$t>() {
                        out.extend((0..a.len()).map(|i| {
                            (!a.is_null(i)).then(|| i128::from(a.value(i)))
                        }));
                        continue;
                    }
                )*
            }};
        }
        ints!(
            Int64Array,
            Int32Array,
            Int16Array,
            Int8Array,
            UInt64Array,
            UInt32Array,
            UInt16Array,
            UInt8Array
        );
        return Err(Error::source_at(
            path,
            format!("the label column is {}, not an integer", c.data_type()),
        ));
    }
    Ok(out)
}

/// A Parquet dataset: every row of the files (`*.parquet` files and folders of them).
pub fn parquet(paths: &[PathBuf], columns: &ParquetColumns) -> Result<Dataset> {
    let files = shard_paths(paths, &[".parquet"])?;
    let (image, mask_col): (Arc<str>, Arc<str>) =
        (columns.image.as_str().into(), columns.mask.as_str().into());
    let mut samples = Vec::new();
    for path in &files {
        let m = metadata(path).map_err(|e| Error::source_at(path, e.to_string()))?;
        if leaf(&m, &columns.image).is_none() {
            return Err(Error::source_at(
                path,
                format!("no image column {:?}", columns.image),
            ));
        }
        let has_mask = leaf(&m, &columns.mask).is_some();
        let name = shard_name(path);
        let mut rows = Vec::new();
        for (rg, g) in m.metadata().row_groups().iter().enumerate() {
            rows.extend((0..g.num_rows().max(0) as usize).map(|r| (rg, r)));
        }
        let labels = match m
            .parquet_schema()
            .columns()
            .iter()
            .position(|c| c.path().string() == columns.label)
        {
            Some(col) => labels(path, &m, col)?,
            None => vec![None; rows.len()],
        };
        if labels.len() != rows.len() {
            return Err(Error::source_at(
                path,
                format!("{} labels for {} rows", labels.len(), rows.len()),
            ));
        }
        for (i, ((rg, r), label)) in rows.into_iter().zip(labels).enumerate() {
            let cell = |column: &Arc<str>| ParquetCell {
                path: path.clone(),
                row_group: rg,
                row: r,
                index: i as u64,
                column: Arc::clone(column),
            };
            let path_s = format!("{name}/{i:08}");
            let (location, label) = match label.map(|v| {
                let at = format!("{} row {i}", path.display());
                crate::source::checked_label(v, &v.to_string(), &at)
            }) {
                None => (Location::Parquet(cell(&image)), None),
                Some(Ok(l)) => (Location::Parquet(cell(&image)), Some(l)),
                Some(Err(refused)) => (refused, None),
            };
            samples.push(Sample {
                id: sample_id(&path_s),
                path: path_s,
                location,
                label,
                mask: has_mask.then(|| Location::Parquet(cell(&mask_col))),
                group: None,
                targets: None,
            });
        }
    }
    from_files(&files, samples)
}
