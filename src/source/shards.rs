//! Samples in shards: TFRecord files of `tf.train.Example` records, and tar files in the
//! WebDataset layout. Each shard is indexed once (every record's offset and length, its
//! label, whether it has a mask) into a sidecar file beside it, `<shard>.stoker-index`,
//! checked against the shard's size and modification time and rebuilt when either
//! changed, so that any sample is read by offset and the sampler's full permutation works
//! across shards.
//!
//! A sample's id is stable: it is [`super::sample_id`] of `<shard file name>/<record>`
//! (the record's index, 8 digits, for TFRecord; the sample key for tar).
//!
//! Damage is found when a sample is read, and reported as a [`crate::SampleError`] with
//! the shard and record: a TFRecord record is read with both of its masked CRC-32C
//! checks verified (a bad length checksum, a bad data checksum, a record cut short); a
//! tar member that runs past the end of the file is cut short. Indexing skips past a
//! damaged TFRecord header by looking for the next header whose checksum holds, so the
//! rest of the shard is still delivered.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::{sample_id, Dataset, Location, Sample};
use crate::error::{Error, Result};

/// The `tf.train.Example` feature keys a TFRecord source reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExampleKeys {
    /// The encoded image (bytes). Default `image/encoded`.
    pub image: String,
    /// The class label (int64). Default `image/class/label`.
    pub label: String,
    /// The encoded label mask (bytes), when records have one. Default
    /// `image/segmentation/class/encoded`.
    pub mask: String,
}

impl Default for ExampleKeys {
    fn default() -> Self {
        ExampleKeys {
            image: "image/encoded".into(),
            label: "image/class/label".into(),
            mask: "image/segmentation/class/encoded".into(),
        }
    }
}

/// What to read from a TFRecord record: the bytes feature `key` of its example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordField {
    /// The shard.
    pub shard: PathBuf,
    /// Where the record starts (its length field).
    pub offset: u64,
    /// Bytes of the record's data.
    pub len: u64,
    /// Index of the record in the shard (for reports).
    pub index: u64,
    /// The bytes feature to return.
    pub key: Arc<str>,
}

/// One cell of a Parquet file: the bytes of `column` in row `row` of row group
/// `row_group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParquetCell {
    /// The file.
    pub path: PathBuf,
    /// The row group.
    pub row_group: usize,
    /// The row within the row group.
    pub row: usize,
    /// The row's index in the file (for reports).
    pub index: u64,
    /// The column (binary, or struct with `bytes`).
    pub column: Arc<str>,
}

// ---------------------------------------------------------------------------------------
// CRC-32C and TFRecord framing.

const fn crc32c_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CRC32C: [u32; 256] = crc32c_table();

/// CRC-32C (Castagnoli) of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = CRC32C[((c ^ u32::from(b)) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

/// TFRecord's masked CRC-32C.
pub fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xA282_EAD8)
}

/// Bytes a reader thread reads ahead from a shard: samples that follow each other in a
/// shard (a validation pass, or the neighbours one thread is given) come from one large
/// sequential read instead of one small read each.
const READ_AHEAD: usize = 4 << 20;

/// A reader thread's open shard, with its read-ahead buffer.
struct Cursor {
    path: PathBuf,
    /// Size and modification time when opened: a rewritten shard is opened again.
    stamp: (u64, u128),
    file: BufReader<File>,
    /// Where the last read ended: a read that starts there continues a sequential run.
    end: u64,
}

thread_local! {
    static CURSOR: std::cell::RefCell<Option<Cursor>> = const { std::cell::RefCell::new(None) };
}

/// Runs `read` on `path` positioned at `offset`, reusing this thread's open shard when it
/// is the same one. A read inside the read-ahead buffer skips forward in it; a read that
/// continues where the last one ended goes through the buffer (a sequential run: one
/// large read serves the samples that follow); any other read seeks and reads exactly
/// what it asks for, so random access costs no more than it reads.
fn with_shard<T>(
    path: &Path,
    offset: u64,
    read: impl FnOnce(&mut dyn Read) -> std::io::Result<T>,
) -> std::io::Result<T> {
    CURSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        let stamp = file_stamp(path).map_err(|e| std::io::Error::other(e.to_string()))?;
        if !slot
            .as_ref()
            .is_some_and(|c| c.path == path && c.stamp == stamp)
        {
            *slot = Some(Cursor {
                path: path.to_path_buf(),
                stamp,
                file: BufReader::with_capacity(READ_AHEAD, File::open(path)?),
                end: u64::MAX,
            });
        }
        let Some(c) = slot.as_mut() else {
            return Err(std::io::Error::other("no open shard"));
        };
        let pos = c.file.stream_position()?;
        let ahead = offset.wrapping_sub(pos);
        let buffered = if offset >= pos && ahead <= c.file.buffer().len() as u64 {
            c.file.consume(ahead as usize);
            true
        } else {
            c.file.seek(SeekFrom::Start(offset))?;
            offset == c.end
        };
        let r = if buffered {
            read(&mut c.file)
        } else {
            read(c.file.get_mut())
        };
        match r {
            Ok(v) => {
                c.end = c.file.stream_position()?;
                Ok(v)
            }
            Err(e) => {
                // Where a failed read left the file is unknown: open it afresh next time.
                *slot = None;
                Err(e)
            }
        }
    })
}

/// Reads the record at the position of `f`, checking both checksums, into `buf`;
/// `expect_len` is the indexed length.
fn read_record(f: &mut dyn Read, expect_len: u64, buf: &mut Vec<u8>) -> Result<(), String> {
    let mut head = [0u8; 12];
    f.read_exact(&mut head)
        .map_err(|e| format!("record header cut short ({e})"))?;
    let len = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default());
    if masked_crc(&head[..8]) != crc {
        return Err("length checksum mismatch".into());
    }
    if len != expect_len {
        return Err(format!("length {len}, the index says {expect_len}"));
    }
    buf.clear();
    buf.resize(len as usize, 0);
    let mut tail = [0u8; 4];
    f.read_exact(buf)
        .and_then(|()| f.read_exact(&mut tail))
        .map_err(|e| format!("record cut short ({e})"))?;
    if masked_crc(buf) != u32::from_le_bytes(tail) {
        return Err("data checksum mismatch".into());
    }
    Ok(())
}

/// Reads `field` (the bytes feature of a TFRecord example) into `buf`; `max_bytes` bounds
/// the record. Errors say what is wrong with the record.
pub fn read_field(field: &RecordField, max_bytes: u64, buf: &mut Vec<u8>) -> Result<(), String> {
    if field.len > max_bytes {
        return Err(format!(
            "record of {} bytes exceeds the limit of {max_bytes}",
            field.len
        ));
    }
    let at = |e: String| {
        format!(
            "{} record {} (offset {}): {e}",
            field.shard.display(),
            field.index,
            field.offset
        )
    };
    let mut record = Vec::new();
    let mut checked = Ok(());
    with_shard(&field.shard, field.offset, |f| {
        checked = read_record(f, field.len, &mut record);
        Ok(())
    })
    .map_err(|e| at(e.to_string()))?;
    checked.map_err(at)?;
    let ex = Example::parse(&record).map_err(at)?;
    match ex.bytes(&field.key) {
        Some(b) => {
            buf.clear();
            buf.extend_from_slice(b);
            Ok(())
        }
        None => Err(at(format!("no bytes feature {:?}", &*field.key))),
    }
}

/// Reads a Parquet cell into `buf`; without the `parquet` feature, an error saying so.
pub fn read_parquet(cell: &ParquetCell, max_bytes: u64, buf: &mut Vec<u8>) -> Result<(), String> {
    #[cfg(feature = "parquet")]
    return super::parquet::read_cell(cell, max_bytes, buf);
    #[cfg(not(feature = "parquet"))]
    {
        let _ = (max_bytes, buf);
        Err(format!(
            "{}: this build of stoker reads no Parquet (the `parquet` feature is off)",
            cell.path.display()
        ))
    }
}

/// Reads bytes `[offset, offset + len)` of `path` into `buf` (a tar member).
pub fn read_range(
    path: &Path,
    offset: u64,
    len: u64,
    max_bytes: u64,
    buf: &mut Vec<u8>,
) -> Result<(), String> {
    if len > max_bytes {
        return Err(format!(
            "member of {len} bytes exceeds the limit of {max_bytes}"
        ));
    }
    buf.clear();
    buf.resize(len as usize, 0);
    with_shard(path, offset, |f| f.read_exact(buf))
        .map_err(|e| format!("{} at {offset}: member cut short ({e})", path.display()))
}

// ---------------------------------------------------------------------------------------
// tf.train.Example, the few fields we need, straight from the protobuf wire format.

/// The features of one `tf.train.Example`: for each key, its first bytes value or first
/// int64 value.
#[derive(Debug, Default)]
struct Example<'a> {
    bytes: Vec<(&'a [u8], &'a [u8])>,
    ints: Vec<(&'a [u8], i64)>,
}

struct Wire<'a> {
    b: &'a [u8],
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.b.split_first().ok_or("varint cut short")?;
            self.b = rest;
            v |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    /// The next field: number, wire type, and for length-delimited fields the bytes.
    fn field(&mut self) -> Result<(u64, u8, &'a [u8], u64), String> {
        let tag = self.varint()?;
        let (num, wt) = (tag >> 3, (tag & 7) as u8);
        match wt {
            0 => Ok((num, wt, &[], self.varint()?)),
            1 | 5 => {
                let n = if wt == 1 { 8 } else { 4 };
                if self.b.len() < n {
                    return Err("fixed field cut short".into());
                }
                let (v, rest) = self.b.split_at(n);
                self.b = rest;
                Ok((num, wt, v, 0))
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                if self.b.len() < n {
                    return Err("length-delimited field cut short".into());
                }
                let (v, rest) = self.b.split_at(n);
                self.b = rest;
                Ok((num, wt, v, 0))
            }
            _ => Err(format!("unsupported wire type {wt}")),
        }
    }

    fn done(&self) -> bool {
        self.b.is_empty()
    }
}

impl<'a> Example<'a> {
    fn parse(data: &'a [u8]) -> Result<Self, String> {
        let mut ex = Example::default();
        let mut top = Wire { b: data };
        while !top.done() {
            let (num, wt, features, _) = top.field()?;
            if num != 1 || wt != 2 {
                continue;
            }
            let mut fs = Wire { b: features };
            while !fs.done() {
                let (num, wt, entry, _) = fs.field()?;
                if num != 1 || wt != 2 {
                    continue;
                }
                let (mut key, mut feature) = (None, None);
                let mut e = Wire { b: entry };
                while !e.done() {
                    match e.field()? {
                        (1, 2, k, _) => key = Some(k),
                        (2, 2, f, _) => feature = Some(f),
                        _ => {}
                    }
                }
                if let (Some(key), Some(feature)) = (key, feature) {
                    ex.feature(key, feature)?;
                }
            }
        }
        Ok(ex)
    }

    /// One `Feature`: a BytesList (1) or Int64List (3); FloatLists are not needed.
    fn feature(&mut self, key: &'a [u8], f: &'a [u8]) -> Result<(), String> {
        let mut w = Wire { b: f };
        while !w.done() {
            let (num, wt, list, _) = w.field()?;
            if wt != 2 {
                continue;
            }
            let mut l = Wire { b: list };
            match num {
                1 => {
                    while !l.done() {
                        if let (1, 2, v, _) = l.field()? {
                            self.bytes.push((key, v));
                            break;
                        }
                    }
                }
                3 => {
                    while !l.done() {
                        match l.field()? {
                            // Packed (the default for proto3 repeated scalars).
                            (1, 2, packed, _) => {
                                let mut p = Wire { b: packed };
                                if !p.done() {
                                    self.ints.push((key, p.varint()? as i64));
                                }
                                break;
                            }
                            (1, 0, _, v) => {
                                self.ints.push((key, v as i64));
                                break;
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn bytes(&self, key: &str) -> Option<&'a [u8]> {
        self.bytes
            .iter()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| *v)
    }

    fn int(&self, key: &str) -> Option<i64> {
        self.ints
            .iter()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| *v)
    }
}

// ---------------------------------------------------------------------------------------
// Indexes.

/// One indexed sample of a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// TFRecord: the record index (8 digits); tar: the sample key.
    name: String,
    /// TFRecord: the record's offset; tar: the image member's data offset.
    offset: u64,
    /// TFRecord: the record's data length; tar: the image member's length.
    len: u64,
    /// The class label, when the record or sample has one.
    label: Option<u32>,
    /// Tar: the mask member (offset, length); TFRecord: `(0, 0)` when the example has the
    /// mask feature.
    mask: Option<(u64, u64)>,
}

/// A shard's sidecar index.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Index {
    version: u32,
    kind: String,
    size: u64,
    mtime_ns: u128,
    keys: Option<ExampleKeys>,
    entries: Vec<Entry>,
}

const INDEX_VERSION: u32 = 1;

/// A file's size and modification time (ns since the epoch): what an index or a cached
/// footer is checked against.
pub(crate) fn file_stamp(path: &Path) -> Result<(u64, u128)> {
    let m = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok((m.len(), mtime))
}

/// The sidecar index path of `shard`.
pub fn index_path(shard: &Path) -> PathBuf {
    let mut name = shard.file_name().unwrap_or_default().to_os_string();
    name.push(".stoker-index");
    shard.with_file_name(name)
}

/// The shard's index: the sidecar when it matches the shard (size, modification time,
/// kind, keys), else built now and saved (a sidecar that cannot be written is logged, not
/// an error: read-only datasets index in memory).
fn index(shard: &Path, kind: &str, keys: Option<&ExampleKeys>) -> Result<Index> {
    let (size, mtime_ns) = file_stamp(shard)?;
    let side = index_path(shard);
    if let Ok(text) = std::fs::read(&side) {
        if let Ok(ix) = serde_json::from_slice::<Index>(&text) {
            if ix.version == INDEX_VERSION
                && ix.size == size
                && ix.mtime_ns == mtime_ns
                && ix.kind == kind
                && ix.keys.as_ref() == keys
            {
                return Ok(ix);
            }
        }
    }
    let entries = match (kind, keys) {
        ("tfrecord", Some(k)) => index_tfrecord(shard, size, k)?,
        _ => index_tar(shard, size)?,
    };
    let ix = Index {
        version: INDEX_VERSION,
        kind: kind.into(),
        size,
        mtime_ns,
        keys: keys.cloned(),
        entries,
    };
    match serde_json::to_vec(&ix) {
        Ok(bytes) => {
            if let Err(e) = std::fs::write(&side, bytes) {
                log::info!("{}: index kept in memory ({e})", side.display());
            }
        }
        Err(e) => log::info!("{}: index not saved ({e})", side.display()),
    }
    Ok(ix)
}

/// Indexes a TFRecord shard: every record's offset and length, label and mask presence.
/// A header whose length checksum fails is skipped by searching for the next header whose
/// checksum holds (the damaged span becomes one entry that fails when read); a record
/// whose data checksum fails is indexed and fails when read; a record cut short at the
/// end is indexed and fails when read.
fn index_tfrecord(shard: &Path, size: u64, keys: &ExampleKeys) -> Result<Vec<Entry>> {
    let io = |e: std::io::Error| Error::io(shard, e);
    // One sequential pass with a large buffer: shards are far larger than memory wants.
    let mut r = BufReader::with_capacity(READ_AHEAD, File::open(shard).map_err(io)?);
    let header = |h: &[u8]| -> Option<u64> {
        let len = u64::from_le_bytes(h.get(..8)?.try_into().ok()?);
        let crc = u32::from_le_bytes(h.get(8..12)?.try_into().ok()?);
        (masked_crc(&h[..8]) == crc).then_some(len)
    };
    let mut out = Vec::new();
    let mut rec = Vec::new();
    let mut at = 0u64;
    while at < size {
        let name = format!("{:08}", out.len());
        let mut head = [0u8; 12];
        let whole = at + 12 <= size && r.read_exact(&mut head).is_ok();
        match header(&head).filter(|_| whole) {
            Some(len) => {
                let end = (at + 12).saturating_add(len).saturating_add(4);
                let (mut label, mut mask) = (None, None);
                if end <= size {
                    rec.resize(len as usize, 0);
                    let mut tail = [0u8; 4];
                    r.read_exact(&mut rec).map_err(io)?;
                    r.read_exact(&mut tail).map_err(io)?;
                    if masked_crc(&rec) == u32::from_le_bytes(tail) {
                        if let Ok(ex) = Example::parse(&rec) {
                            label = ex.int(&keys.label).and_then(|v| u32::try_from(v).ok());
                            mask = ex.bytes(&keys.mask).map(|_| (0, 0));
                        }
                    }
                }
                out.push(Entry {
                    name,
                    offset: at,
                    len,
                    label,
                    mask,
                });
                at = end;
            }
            None => {
                // A damaged header: one entry for it (it fails when read), then resume at
                // the next position whose header checksum holds, searched in the rest of
                // the shard (read whole only on this rare path).
                out.push(Entry {
                    name,
                    offset: at,
                    len: 0,
                    label: None,
                    mask: None,
                });
                r.seek(SeekFrom::Start(at + 1)).map_err(io)?;
                let mut rest = Vec::new();
                r.read_to_end(&mut rest).map_err(io)?;
                let next = (0..rest.len().saturating_sub(11))
                    .find(|&p| header(&rest[p..]).is_some())
                    .map(|p| at + 1 + p as u64);
                log::warn!(
                    "{}: damaged record header at offset {at}; resuming at {:?}",
                    shard.display(),
                    next
                );
                match next {
                    Some(p) => {
                        r.seek(SeekFrom::Start(p)).map_err(io)?;
                        at = p;
                    }
                    None => break,
                }
            }
        }
    }
    Ok(out)
}

/// The name and data size of the tar member whose 512-byte header is `h`, with a PAX or
/// GNU long name applied.
fn tar_octal(field: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(field).ok()?;
    let s = s.trim_matches(|c: char| c == '\0' || c == ' ');
    if s.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(s, 8).ok()
}

/// A tar member of a sample: its extension, data offset and length.
type Member = (String, u64, u64);

/// Indexes a WebDataset tar shard: members grouped by key (the member name up to the
/// first dot of its file name): the image (`jpg`, `jpeg`, `png`, `webp`, `bmp`), the label
/// mask (`mask.png` or `seg.png`; or `png` beside a JPEG), the label (`cls`, a decimal
/// integer).
fn index_tar(shard: &Path, size: u64) -> Result<Vec<Entry>> {
    let f = File::open(shard).map_err(|e| Error::io(shard, e))?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut at = 0u64;
    let mut long_name: Option<String> = None;
    let mut groups: Vec<(String, Vec<Member>)> = Vec::new();
    let mut h = [0u8; 512];
    while at + 512 <= size {
        r.read_exact(&mut h).map_err(|e| Error::io(shard, e))?;
        at += 512;
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let Some(len) = tar_octal(&h[124..136]) else {
            return Err(Error::Source(format!(
                "{}: bad tar header at offset {}",
                shard.display(),
                at - 512
            )));
        };
        let data_at = at;
        let padded = len.div_ceil(512) * 512;
        let typeflag = h[156];
        let mut content = Vec::new();
        if matches!(typeflag, b'x' | b'L') && len < (1 << 20) {
            content.resize(len as usize, 0);
            r.read_exact(&mut content)
                .map_err(|e| Error::io(shard, e))?;
            r.seek_relative((padded - len) as i64)
                .map_err(|e| Error::io(shard, e))?;
        } else {
            r.seek_relative(padded as i64)
                .map_err(|e| Error::io(shard, e))?;
        }
        at += padded;
        match typeflag {
            b'L' => {
                long_name = Some(
                    String::from_utf8_lossy(&content)
                        .trim_end_matches('\0')
                        .to_string(),
                );
                continue;
            }
            b'x' => {
                // PAX records: "<len> key=value\n"; only `path` matters here.
                let text = String::from_utf8_lossy(&content);
                for rec in text.split('\n') {
                    if let Some((_, kv)) = rec.split_once(' ') {
                        if let Some(p) = kv.strip_prefix("path=") {
                            long_name = Some(p.to_string());
                        }
                    }
                }
                continue;
            }
            b'0' | 0 => {}
            _ => {
                long_name = None;
                continue;
            }
        }
        let name = match long_name.take() {
            Some(n) => n,
            None => {
                let field = |b: &[u8]| {
                    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                    String::from_utf8_lossy(&b[..end]).to_string()
                };
                let (name, prefix) = (field(&h[0..100]), field(&h[345..500]));
                if prefix.is_empty() || &h[257..262] != b"ustar" {
                    name
                } else {
                    format!("{prefix}/{name}")
                }
            }
        };
        let (dir, file) = match name.rsplit_once('/') {
            Some((d, f)) => (format!("{d}/"), f.to_string()),
            None => (String::new(), name.clone()),
        };
        let Some((stem, ext)) = file.split_once('.') else {
            continue;
        };
        let key = format!("{dir}{stem}");
        let ext = ext.to_ascii_lowercase();
        match groups.last_mut() {
            Some((k, members)) if *k == key => members.push((ext, data_at, len)),
            _ => groups.push((key, vec![(ext, data_at, len)])),
        }
    }
    let mut out = Vec::with_capacity(groups.len());
    for (key, members) in groups {
        let find = |exts: &[&str]| {
            members
                .iter()
                .find(|(e, _, _)| exts.contains(&e.as_str()))
                .map(|&(_, o, l)| (o, l))
        };
        let jpeg = find(&["jpg", "jpeg"]);
        let png = find(&["png"]);
        let named_mask = find(&["mask.png", "seg.png"]);
        let (image, mask) = match (jpeg, png) {
            (Some(j), p) => (Some(j), named_mask.or(p)),
            (None, Some(p)) => (Some(p), named_mask),
            (None, None) => (find(&["webp", "bmp"]), named_mask),
        };
        let Some((offset, len)) = image else {
            log::warn!("{}: sample {key:?} has no image member", shard.display());
            continue;
        };
        let label = match find(&["cls"]) {
            Some((o, l)) if l <= 64 => {
                let mut b = Vec::new();
                read_range(shard, o, l, 64, &mut b)
                    .ok()
                    .and_then(|()| String::from_utf8(b).ok())
                    .and_then(|s| s.trim().parse::<u32>().ok())
            }
            _ => None,
        };
        out.push(Entry {
            name: key,
            offset,
            len,
            label,
            mask,
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Writing shards (`stoker convert`).

/// The shard formats [`ShardWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardFormat {
    /// TFRecord files of `tf.train.Example` records.
    TfRecord,
    /// WebDataset tar files.
    Tar,
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn delimited(num: u64, body: &[u8], out: &mut Vec<u8>) {
    varint(num << 3 | 2, out);
    varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// Encodes a `tf.train.Example` with bytes features and int64 features.
pub fn encode_example(bytes: &[(&str, &[u8])], ints: &[(&str, i64)]) -> Vec<u8> {
    let mut features = Vec::new();
    let mut entry = |key: &str, feature: Vec<u8>| {
        let mut e = Vec::new();
        delimited(1, key.as_bytes(), &mut e);
        delimited(2, &feature, &mut e);
        delimited(1, &e, &mut features);
    };
    for (k, v) in bytes {
        let (mut list, mut feature) = (Vec::new(), Vec::new());
        delimited(1, v, &mut list);
        delimited(1, &list, &mut feature);
        entry(k, feature);
    }
    for (k, v) in ints {
        let (mut packed, mut list, mut feature) = (Vec::new(), Vec::new(), Vec::new());
        varint(*v as u64, &mut packed);
        delimited(1, &packed, &mut list);
        delimited(3, &list, &mut feature);
        entry(k, feature);
    }
    let mut out = Vec::new();
    delimited(1, &features, &mut out);
    out
}

/// Appends one TFRecord record (length, its masked CRC, data, its masked CRC).
pub fn frame_record(data: &[u8], out: &mut Vec<u8>) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}

/// Appends one ustar member (a regular file) to a tar stream.
fn tar_member(name: &str, data: &[u8], out: &mut Vec<u8>) -> Result<()> {
    if name.len() > 100 {
        return Err(Error::Source(format!("tar member name too long: {name:?}")));
    }
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
    h[136..147].copy_from_slice(b"00000000000");
    h[148..156].copy_from_slice(b"        ");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    Ok(())
}

/// The extension of an encoded image, from its magic bytes.
fn image_ext(bytes: &[u8]) -> &'static str {
    match bytes {
        [0xFF, 0xD8, ..] => "jpg",
        [0x89, b'P', b'N', b'G', ..] => "png",
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => "webp",
        [b'B', b'M', ..] => "bmp",
        _ => "bin",
    }
}

/// Writes samples into shards of about `shard_bytes` each (`<prefix>-00000.tfrecord` or
/// `.tar` in `dir`), each indexed when it is closed. Samples keep their order.
#[derive(Debug)]
pub struct ShardWriter {
    format: ShardFormat,
    dir: PathBuf,
    prefix: String,
    shard_bytes: u64,
    buf: Vec<u8>,
    in_shard: usize,
    written: Vec<PathBuf>,
    keys: ExampleKeys,
}

impl ShardWriter {
    /// A writer into `dir` (created if missing).
    pub fn new(format: ShardFormat, dir: &Path, prefix: &str, shard_bytes: u64) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        Ok(ShardWriter {
            format,
            dir: dir.to_path_buf(),
            prefix: prefix.into(),
            shard_bytes: shard_bytes.max(1),
            buf: Vec::new(),
            in_shard: 0,
            written: Vec::new(),
            keys: ExampleKeys::default(),
        })
    }

    /// Adds a sample: its encoded image, label, mask, and a name (kept as
    /// `image/filename`, and as the tar key's suffix).
    pub fn add(
        &mut self,
        name: &str,
        image: &[u8],
        label: Option<u32>,
        mask: Option<&[u8]>,
    ) -> Result<()> {
        match self.format {
            ShardFormat::TfRecord => {
                let mut bytes: Vec<(&str, &[u8])> = vec![
                    (&self.keys.image, image),
                    ("image/filename", name.as_bytes()),
                    ("image/format", image_ext(image).as_bytes()),
                ];
                if let Some(m) = mask {
                    bytes.push((&self.keys.mask, m));
                }
                let ints: Vec<(&str, i64)> = label
                    .map(|l| vec![(self.keys.label.as_str(), i64::from(l))])
                    .unwrap_or_default();
                frame_record(&encode_example(&bytes, &ints), &mut self.buf);
            }
            ShardFormat::Tar => {
                // WebDataset keys hold no dots (the first dot starts the extension).
                let stem: String = name
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .take(60)
                    .collect();
                let key = format!("{:06}_{stem}", self.in_shard);
                tar_member(&format!("{key}.{}", image_ext(image)), image, &mut self.buf)?;
                if let Some(l) = label {
                    tar_member(
                        &format!("{key}.cls"),
                        l.to_string().as_bytes(),
                        &mut self.buf,
                    )?;
                }
                if let Some(m) = mask {
                    tar_member(&format!("{key}.mask.png"), m, &mut self.buf)?;
                }
            }
        }
        self.in_shard += 1;
        if self.buf.len() as u64 >= self.shard_bytes {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the open shard (and its index), if it holds any sample.
    fn flush(&mut self) -> Result<()> {
        if self.in_shard == 0 {
            return Ok(());
        }
        let (ext, kind) = match self.format {
            ShardFormat::TfRecord => ("tfrecord", "tfrecord"),
            ShardFormat::Tar => ("tar", "tar"),
        };
        if self.format == ShardFormat::Tar {
            self.buf.resize(self.buf.len() + 1024, 0);
        }
        let path = self
            .dir
            .join(format!("{}-{:05}.{ext}", self.prefix, self.written.len()));
        std::fs::write(&path, &self.buf).map_err(|e| Error::io(&path, e))?;
        let keys = (self.format == ShardFormat::TfRecord).then_some(&self.keys);
        index(&path, kind, keys)?;
        self.written.push(path);
        self.buf.clear();
        self.in_shard = 0;
        Ok(())
    }

    /// Writes the last shard and returns every shard written.
    pub fn finish(mut self) -> Result<Vec<PathBuf>> {
        self.flush()?;
        Ok(std::mem::take(&mut self.written))
    }
}

// ---------------------------------------------------------------------------------------
// Datasets.

/// The shards `paths` name: files as given, folders searched (not recursively) for files
/// ending in `ext`. Sorted, so the listing does not depend on the order given.
pub(crate) fn shard_paths(paths: &[PathBuf], ext: &[&str]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| Error::io(p, e))?;
            for e in rd.flatten() {
                let q = e.path();
                let name = q.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                if q.is_file() && ext.iter().any(|x| name.ends_with(x)) {
                    out.push(q);
                }
            }
        } else if p.is_file() {
            out.push(p.clone());
        } else {
            return Err(Error::Source(format!("no shard at {}", p.display())));
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(Error::Source(format!(
            "no shards ({}) in {:?}",
            ext.join(", "),
            paths
        )));
    }
    Ok(out)
}

pub(crate) fn shard_name(shard: &Path) -> String {
    shard
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
}

/// The dataset of `shards`: each shard's index (of `kind`, read through `keys` for
/// TFRecord), each entry a sample at `<shard file name>/<entry name>` whose image and
/// mask locations `locate` gives (shard, entry index, entry).
fn dataset(
    shards: &[PathBuf],
    kind: &str,
    keys: Option<&ExampleKeys>,
    locate: impl Fn(&Path, usize, &Entry) -> (Location, Option<Location>),
) -> Result<Dataset> {
    let mut samples = Vec::new();
    for shard in shards {
        let ix = index(shard, kind, keys)?;
        let name = shard_name(shard);
        for (i, e) in ix.entries.iter().enumerate() {
            let path = format!("{name}/{}", e.name);
            let (location, mask) = locate(shard, i, e);
            samples.push(Sample {
                id: sample_id(&path),
                path,
                location,
                label: e.label,
                mask,
                group: None,
            });
        }
    }
    from_files(shards, samples)
}

/// The dataset of `samples` listed from `files` (shards, Parquet files): rooted at the
/// first file's folder, classes named by their ids up to the largest label.
pub(crate) fn from_files(files: &[PathBuf], samples: Vec<Sample>) -> Result<Dataset> {
    let classes = super::numbered_classes(samples.iter().filter_map(|s| s.label).max());
    let root = files
        .first()
        .and_then(|s| s.parent())
        .map(Path::to_path_buf);
    Dataset::from_samples(root, samples, classes)
}

/// A TFRecord dataset: every record of the shards (`*.tfrecord`, `*.tfrecords`,
/// `*.record` files and folders of them) is a sample, read through `keys`.
pub fn tfrecord(paths: &[PathBuf], keys: &ExampleKeys) -> Result<Dataset> {
    let shards = shard_paths(paths, &[".tfrecord", ".tfrecords", ".record"])?;
    let (image, mask): (Arc<str>, Arc<str>) =
        (keys.image.as_str().into(), keys.mask.as_str().into());
    dataset(&shards, "tfrecord", Some(keys), |shard, i, e| {
        let field = |key: &Arc<str>| {
            Location::Record(RecordField {
                shard: shard.to_path_buf(),
                offset: e.offset,
                len: e.len,
                index: i as u64,
                key: Arc::clone(key),
            })
        };
        (field(&image), e.mask.map(|_| field(&mask)))
    })
}

/// A WebDataset tar dataset: every sample key of the shards (`*.tar` files and folders
/// of them) is a sample: its image member, its `cls` label, its mask member.
pub fn tar(paths: &[PathBuf]) -> Result<Dataset> {
    let shards = shard_paths(paths, &[".tar"])?;
    dataset(&shards, "tar", None, |shard, _, e| {
        let range = |offset, len| Location::Range {
            path: shard.to_path_buf(),
            offset,
            len,
        };
        (range(e.offset, e.len), e.mask.map(|(o, l)| range(o, l)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn example_parsing_reads_bytes_and_packed_or_unpacked_ints() {
        // Example{features{feature{key:"a" value{bytes_list{value:"xy"}}}
        //                  feature{key:"n" value{int64_list{value:[300]}}}}}
        fn ld(num: u8, body: &[u8]) -> Vec<u8> {
            let mut v = vec![num << 3 | 2, body.len() as u8];
            v.extend_from_slice(body);
            v
        }
        let bytes_feature = ld(1, &ld(1, b"xy"));
        let packed = ld(3, &ld(1, &[0xAC, 0x02]));
        let unpacked = ld(3, &[1 << 3, 0xAC, 0x02]);
        for ints in [packed, unpacked] {
            let entry_a = [ld(1, b"a"), ld(2, &bytes_feature)].concat();
            let entry_n = [ld(1, b"n"), ld(2, &ints)].concat();
            let features = [ld(1, &entry_a), ld(1, &entry_n)].concat();
            let ex_bytes = ld(1, &features);
            let ex = Example::parse(&ex_bytes).expect("parses");
            assert_eq!(ex.bytes("a"), Some(&b"xy"[..]));
            assert_eq!(ex.int("n"), Some(300));
            assert_eq!(ex.bytes("n"), None);
        }
        assert!(Example::parse(&[0x0A, 0x05, 0x0A]).is_err());
    }
}
