//! Parquet files as sources (cargo feature `parquet`): a column of encoded images, a label
//! column, an optional mask column, and optional targets columns (list columns with a
//! JSON Lines manifest's keys: `labels`, `values`, `boxes`, `box_classes`, `keypoints`;
//! see [`ParquetColumns`]). The image and mask columns may be plain binary columns or
//! structs with a `bytes` field (the Hugging Face `Image` layout).
//!
//! Every row is a sample, its id stable: [`super::sample_id`] of `<file name>/<row>` (the
//! row's index in the file, 8 digits). Listing reads the footer, the label column and the
//! targets columns only; a row whose targets cannot be used is reported every epoch with
//! its row and why, never delivered, and so is a row without a label (a null, or a file
//! without the label column) in a dataset where some row has one.
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
    Array, BinaryArray, FixedSizeListArray, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array, Int8Array, LargeBinaryArray, LargeListArray, ListArray, StructArray, UInt16Array,
    UInt32Array, UInt64Array, UInt8Array,
};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;

use super::shards::{file_stamp, from_files, shard_name, shard_paths, unlisted, ParquetCell};
use serde_json::Value;

use super::target::{targets_from_json, Bad, Targets, MAX_TARGETS};
use super::{sample_id, Dataset, Location, Sample};
use crate::error::{Error, Result, SampleErrorKind};

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
    /// The class labels (an integer column), if any. Default `label` (ignored when no
    /// file has such a column; where some row has a label, a row without one, a null or
    /// in a file without the column, is reported every epoch).
    pub label: String,
    /// The encoded label masks, if any. Default `mask` (ignored when absent).
    pub mask: String,
    /// Targets beyond one class id ([`crate::source::Targets`]), each column ignored when
    /// absent and a null cell meaning none, with a JSON Lines manifest's keys and values:
    /// several class ids (a list of integers). Default `labels`.
    pub labels: String,
    /// A value vector (a list of numbers). Default `values`.
    pub values: String,
    /// Boxes in pixels (a list of lists of 4 numbers, `[x0, y0, x1, y1]`, or 5 with the
    /// class id last). Default `boxes`.
    pub boxes: String,
    /// The class ids of four-number boxes (a list of integers). Default `box_classes`.
    pub box_classes: String,
    /// Keypoints in pixels (a list of `[x, y]` or `[x, y, visibility]`). Default
    /// `keypoints`.
    pub keypoints: String,
}

impl Default for ParquetColumns {
    fn default() -> Self {
        ParquetColumns {
            image: "image".into(),
            label: "label".into(),
            mask: "mask".into(),
            labels: "labels".into(),
            values: "values".into(),
            boxes: "boxes".into(),
            box_classes: "box_classes".into(),
            keypoints: "keypoints".into(),
        }
    }
}

/// A Parquet file on disk, or an object in a store (a URL: read by ranged requests, see
/// [`super::remote`]).
enum ParquetFile {
    Local(std::fs::File),
    Remote { url: String, size: u64 },
}

/// Opens the Parquet file (or object) at `path`.
fn open_file(path: &Path) -> std::io::Result<ParquetFile> {
    if super::remote::is_url(path) {
        let url = path.to_string_lossy().into_owned();
        let size = super::remote::stat(&url)?.size;
        return Ok(ParquetFile::Remote { url, size });
    }
    super::fsio::open_regular(path).map(ParquetFile::Local)
}

impl parquet::file::reader::Length for ParquetFile {
    fn len(&self) -> u64 {
        match self {
            ParquetFile::Local(f) => parquet::file::reader::Length::len(f),
            ParquetFile::Remote { size, .. } => *size,
        }
    }
}

impl parquet::file::reader::ChunkReader for ParquetFile {
    type T = Box<dyn std::io::Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        match self {
            ParquetFile::Local(f) => Ok(Box::new(parquet::file::reader::ChunkReader::get_read(
                f, start,
            )?)),
            ParquetFile::Remote { url, .. } => {
                use std::io::Seek;
                let mut r = super::remote::stream(url)
                    .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
                r.seek(std::io::SeekFrom::Start(start))?;
                Ok(Box::new(r))
            }
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        match self {
            ParquetFile::Local(f) => {
                parquet::file::reader::ChunkReader::get_bytes(f, start, length)
            }
            ParquetFile::Remote { url, .. } => super::remote::read_at(url, start, length as u64)
                .map(bytes::Bytes::from)
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e))),
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
    let f = open_file(path).map_err(|error| FileError::Open {
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
#[doc(hidden)]
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
    let f = open_file(&cell.path).map_err(|e| at(CellFault::Open(e)))?;
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

/// `$m!` over Arrow's integer array types, widest signed first, then any `$extra` types.
macro_rules! with_integer_arrays {
    ($m:ident $(, $extra:ty)*) => {
        $m!(
            Int64Array,
            Int32Array,
            Int16Array,
            Int8Array,
            UInt64Array,
            UInt32Array,
            UInt16Array,
            UInt8Array
            $(, $extra)*
        )
    };
}

/// The labels of every row (`None` for nulls), from an integer column, as recorded (they
/// are checked against [`crate::MAX_LABEL`] per sample).
fn labels(path: &Path, m: &ArrowReaderMetadata, col: usize) -> Result<Vec<Option<i128>>> {
    let f = open_file(path).map_err(|e| Error::io(path, e))?;
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
        with_integer_arrays!(ints);
        return Err(Error::source_at(
            path,
            format!("the label column is {}, not an integer", c.data_type()),
        ));
    }
    Ok(out)
}

/// One cell of a targets column as JSON (numbers, lists of them, null), as a manifest
/// holds it; no list longer than four times [`MAX_TARGETS`] is copied.
fn json_of(a: &dyn Array, i: usize) -> std::result::Result<Value, TargetsCellError> {
    if a.is_null(i) {
        return Ok(Value::Null);
    }
    let any = a.as_any();
    macro_rules! numbers {
        ($($t:ty),*) => {
            $(
                if let Some(x) = any.downcast_ref::<$t>() {
                    return Ok(Value::from(x.value(i)));
                }
            )*
        };
    }
    with_integer_arrays!(numbers, Float64Array);
    if let Some(x) = any.downcast_ref::<Float32Array>() {
        return Ok(Value::from(f64::from(x.value(i))));
    }
    let list = if let Some(l) = any.downcast_ref::<ListArray>() {
        l.value(i)
    } else if let Some(l) = any.downcast_ref::<LargeListArray>() {
        l.value(i)
    } else if let Some(l) = any.downcast_ref::<FixedSizeListArray>() {
        l.value(i)
    } else {
        return Err(TargetsCellError::NotNumbers(a.data_type().clone()));
    };
    if list.len() > 4 * MAX_TARGETS {
        return Err(TargetsCellError::TooLong(list.len()));
    }
    (0..list.len())
        .map(|j| json_of(list.as_ref(), j))
        .collect::<std::result::Result<Vec<Value>, TargetsCellError>>()
        .map(Value::Array)
}

/// Why a cell of a targets column cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
enum TargetsCellError {
    /// Not numbers or lists of them.
    #[error("a cell of type {0}, not numbers or lists of numbers")]
    NotNumbers(arrow_schema::DataType),
    /// A list longer than four times [`MAX_TARGETS`].
    #[error("a list of {0} values")]
    TooLong(usize),
}

/// Why a row's targets cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
enum RowTargetsError {
    /// The reader did not return the column.
    #[error("column {0:?} not read")]
    NotRead(String),
    /// A cell of the column cannot be used.
    #[error("column {column:?}: {source}")]
    Cell {
        /// The file's column.
        column: String,
        /// Why.
        source: TargetsCellError,
    },
    /// The cells are read but the targets they make are not usable.
    #[error(transparent)]
    Targets(#[from] Bad),
}

/// Each row's targets from the file's targets columns (`Ok(None)` for none; `Err` says
/// why the row's cannot be used), read whole at listing, as the labels are.
type RowTargets = std::result::Result<Option<Targets>, RowTargetsError>;

fn targets(
    path: &Path,
    m: &ArrowReaderMetadata,
    columns: &ParquetColumns,
    rows: usize,
) -> Result<Vec<RowTargets>> {
    // (manifest key, the file's column)
    let keys = [
        ("labels", &columns.labels),
        ("values", &columns.values),
        ("boxes", &columns.boxes),
        ("box_classes", &columns.box_classes),
        ("keypoints", &columns.keypoints),
    ];
    let schema = m.schema();
    let present: Vec<(&str, &String, usize)> = keys
        .iter()
        .filter_map(|(k, c)| schema.index_of(c).ok().map(|i| (*k, *c, i)))
        .collect();
    if present.is_empty() {
        return Ok(vec![Ok(None); rows]);
    }
    let f = open_file(path).map_err(|e| Error::io(path, e))?;
    let roots = present.iter().map(|p| p.2);
    let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(f, m.clone())
        .with_projection(ProjectionMask::roots(m.parquet_schema(), roots))
        .with_batch_size(1024)
        .build()
        .map_err(|e| Error::source_at(path, e.to_string()))?;
    let mut out = Vec::with_capacity(rows);
    for batch in reader {
        let batch = batch.map_err(|e| Error::source_at(path, e.to_string()))?;
        let cols: Vec<(&str, &String, Option<&arrow_array::ArrayRef>)> = present
            .iter()
            .map(|(k, c, _)| (*k, *c, batch.column_by_name(c)))
            .collect();
        for i in 0..batch.num_rows() {
            let mut record = serde_json::Map::new();
            let mut fault = None;
            for (key, name, col) in &cols {
                let Some(col) = col else {
                    fault.get_or_insert_with(|| RowTargetsError::NotRead(name.to_string()));
                    continue;
                };
                match json_of(col.as_ref(), i) {
                    Ok(v) => {
                        record.insert((*key).to_string(), v);
                    }
                    Err(source) => {
                        fault.get_or_insert_with(|| RowTargetsError::Cell {
                            column: name.to_string(),
                            source,
                        });
                    }
                }
            }
            out.push(match fault {
                Some(why) => Err(why),
                None => targets_from_json(&Value::Object(record)).map_err(RowTargetsError::from),
            });
        }
    }
    Ok(out)
}

/// A Parquet dataset: every row of the files (`*.parquet` files and folders of them).
///
/// A file that cannot be listed (its footer unreadable: cut short, not Parquet; no image
/// column; its label or targets columns unreadable) is listed as one sample,
/// `<file name>/@0`, that every epoch reports with the file and why
/// ([`SampleErrorKind::Corrupt`]), as a damaged shard is, and the other files are listed.
/// When no file can be listed, that is the error.
#[doc(hidden)]
pub fn parquet(paths: &[PathBuf], columns: &ParquetColumns) -> Result<Dataset> {
    let listed = shard_paths(paths, &[".parquet"])?;
    let all = listed.all();
    let files = listed.files;
    let (image, mask_col): (Arc<str>, Arc<str>) =
        (columns.image.as_str().into(), columns.mask.as_str().into());
    let mut samples = Vec::new();
    // The files that could not be listed, with why.
    let mut bad: Vec<(PathBuf, Error)> = listed.bad;
    // Whether a row has a label (then a row without one is reported).
    let mut labelled = false;
    for path in &files {
        let m = match metadata(path) {
            Ok(m) => m,
            Err(e) => {
                bad.push((path.clone(), Error::source_at(path, e.to_string())));
                continue;
            }
        };
        if leaf(&m, &columns.image).is_none() {
            let e = Error::source_at(path, format!("no image column {:?}", columns.image));
            bad.push((path.clone(), e));
            continue;
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
            Some(col) => labels(path, &m, col),
            None => Ok(vec![None; rows.len()]),
        };
        let (labels, targets) = match (labels, targets(path, &m, columns, rows.len())) {
            (Ok(l), Ok(t)) => (l, t),
            (Err(e), _) | (_, Err(e)) => {
                bad.push((path.clone(), e));
                continue;
            }
        };
        if labels.len() != rows.len() || targets.len() != rows.len() {
            return Err(Error::source_at(
                path,
                format!(
                    "{} labels and {} rows of targets for {} rows",
                    labels.len(),
                    targets.len(),
                    rows.len()
                ),
            ));
        }
        for (i, (((rg, r), label), targets)) in
            rows.into_iter().zip(labels).zip(targets).enumerate()
        {
            let cell = |column: &Arc<str>| ParquetCell {
                path: path.clone(),
                row_group: rg,
                row: r,
                index: i as u64,
                column: Arc::clone(column),
            };
            let path_s = format!("{name}/{i:08}");
            let at = format!("{} row {i}", path.display());
            labelled |= label.is_some();
            let (location, label) =
                match label.map(|v| crate::source::checked_label(v, &v.to_string(), &at)) {
                    None => (Location::Parquet(cell(&image)), None),
                    Some(Ok(l)) => (Location::Parquet(cell(&image)), Some(l)),
                    Some(Err(refused)) => (refused, None),
                };
            let (location, label, targets) = match targets {
                Err(why) if !matches!(location, Location::Refused { .. }) => (
                    Location::Refused {
                        kind: SampleErrorKind::Label,
                        reason: format!("{at}: its targets: {why}").into(),
                    },
                    None,
                    None,
                ),
                Err(_) => (location, label, None),
                Ok(t) => (location, label, t.map(Arc::new)),
            };
            samples.push(Sample {
                id: sample_id(&path_s),
                path: path_s,
                location,
                label,
                mask: has_mask.then(|| Location::Parquet(cell(&mask_col))),
                group: None,
                targets,
                source: 0,
            });
        }
    }
    if labelled {
        // (A row listed without a label and not reported has no label value.)
        let missing = samples
            .iter()
            .enumerate()
            .filter_map(|(k, s)| match &s.location {
                Location::Parquet(c) if s.label.is_none() => Some((
                    k,
                    format!(
                        "{} row {}: no label (no value in column {:?}), though other rows have one",
                        c.path.display(),
                        c.index,
                        columns.label
                    ),
                )),
                _ => None,
            })
            .collect();
        super::listing::report_unlabelled(&mut samples, missing);
    }
    if bad.len() == all.len() {
        if let Some((_, e)) = bad.into_iter().next() {
            return Err(e);
        }
        return Err(Error::dataset("no Parquet files"));
    }
    let masks = samples.iter().any(|s: &Sample| s.mask.is_some());
    samples.extend(bad.iter().map(|(path, e)| unlisted(path, e, masks)));
    from_files(&all, samples)
}
