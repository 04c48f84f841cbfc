//! TFRecord shards: the framing (length, masked CRC-32C of the length, data, masked CRC-32C
//! of the data), the `tf.train.Example` records inside it, indexing a shard and reading one
//! record's bytes feature.

use std::io::{BufReader, Read, Seek};
use std::path::Path;
use std::sync::Arc;

use super::{
    recorded_text, with_shard, Entry, ExampleKeys, Problem, ReadError, RecordField, READ_AHEAD,
};
use crate::error::{Error, Result};
use crate::source::target::{BoundingBox, Keypoint, Targets, MAX_TARGETS};
use crate::source::MAX_LABEL;

/// What is wrong with a TFRecord record (the shard and record are in
/// [`ReadError::Record`]).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The shard could not be opened, or positioned at the record.
    #[error("{0}")]
    Io(std::io::Error),
    /// The shard ends inside the record's 12-byte header.
    #[error("record header cut short ({0})")]
    HeaderCutShort(std::io::Error),
    /// The masked CRC-32C of the length field does not hold.
    #[error("length checksum mismatch")]
    LengthChecksum,
    /// The length field holds, but is not the length the index has.
    #[error("length {found}, the index says {expected}")]
    Length {
        /// The record's length field.
        found: u64,
        /// The indexed length.
        expected: u64,
    },
    /// The shard ends inside the record's data or its data checksum.
    #[error("record cut short ({0})")]
    CutShort(std::io::Error),
    /// The masked CRC-32C of the data does not hold.
    #[error("data checksum mismatch")]
    DataChecksum,
    /// The data is not a `tf.train.Example` in the protobuf wire format.
    #[error(transparent)]
    Example(#[from] WireError),
    /// The example has no bytes feature of this key.
    #[error("no bytes feature {0:?}")]
    NoFeature(Arc<str>),
}

/// What is wrong with a record's protobuf wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The data ends inside a varint.
    #[error("varint cut short")]
    VarintCutShort,
    /// A varint of more than 64 bits.
    #[error("varint too long")]
    VarintTooLong,
    /// The data ends inside a fixed-size (32- or 64-bit) field.
    #[error("fixed field cut short")]
    FixedCutShort,
    /// A length that does not fit in memory.
    #[error("length too large")]
    LengthTooLarge,
    /// The data ends inside a length-delimited field.
    #[error("length-delimited field cut short")]
    DelimitedCutShort,
    /// A wire type protobuf does not define (or the deprecated groups, 3 and 4).
    #[error("unsupported wire type {0}")]
    WireType(u8),
}

// ---------------------------------------------------------------------------------------
// CRC-32C and TFRecord framing.

/// CRC-32C (Castagnoli) of `data`: the `crc32c` crate, with the CPU's CRC instructions
/// (SSE 4.2, ARMv8 CRC) where it has them.
pub fn crc32c(data: &[u8]) -> u32 {
    ::crc32c::crc32c(data)
}

/// TFRecord's masked CRC-32C.
pub fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xA282_EAD8)
}

/// Appends one TFRecord record (length, its masked CRC, data, its masked CRC).
pub fn frame_record(data: &[u8], out: &mut Vec<u8>) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}

/// The length in a record header, if the header's length checksum holds.
fn header_len(h: &[u8]) -> Option<u64> {
    let len = u64::from_le_bytes(h.get(..8)?.try_into().ok()?);
    let crc = u32::from_le_bytes(h.get(8..12)?.try_into().ok()?);
    (masked_crc(&h[..8]) == crc).then_some(len)
}

/// Reads the record at the position of `f`, checking both checksums, into `buf`;
/// `expect_len` is the indexed length.
fn read_record(f: &mut dyn Read, expect_len: u64, buf: &mut Vec<u8>) -> Result<(), RecordError> {
    let mut head = [0u8; 12];
    f.read_exact(&mut head)
        .map_err(RecordError::HeaderCutShort)?;
    let len = header_len(&head).ok_or(RecordError::LengthChecksum)?;
    if len != expect_len {
        return Err(RecordError::Length {
            found: len,
            expected: expect_len,
        });
    }
    buf.clear();
    buf.resize(len as usize, 0);
    let mut tail = [0u8; 4];
    f.read_exact(buf)
        .and_then(|()| f.read_exact(&mut tail))
        .map_err(RecordError::CutShort)?;
    if masked_crc(buf) != u32::from_le_bytes(tail) {
        return Err(RecordError::DataChecksum);
    }
    Ok(())
}

/// Reads `field` (the bytes feature of a TFRecord example) into `buf`; `max_bytes` bounds
/// the record. Errors say what is wrong with the record, and where.
pub fn read_field(field: &RecordField, max_bytes: u64, buf: &mut Vec<u8>) -> Result<(), ReadError> {
    if field.len > max_bytes {
        return Err(ReadError::RecordTooLarge {
            len: field.len,
            limit: max_bytes,
        });
    }
    let at = |error: RecordError| ReadError::Record {
        shard: field.shard.clone(),
        index: field.index,
        offset: field.offset,
        error,
    };
    let mut record = Vec::new();
    let mut checked = Ok(());
    with_shard(&field.shard, field.offset, field.len + 16, |f| {
        checked = read_record(f, field.len, &mut record);
        Ok(())
    })
    .map_err(|e| at(RecordError::Io(e)))?;
    checked.map_err(at)?;
    let ex = Example::parse(&record).map_err(|e| at(e.into()))?;
    let bytes = ex
        .bytes(&field.key)
        .ok_or_else(|| at(RecordError::NoFeature(Arc::clone(&field.key))))?;
    buf.clear();
    buf.extend_from_slice(bytes);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// tf.train.Example, the few fields we need, straight from the protobuf wire format.
//
// Hand-written rather than generated (prost and the like): it reads the three fields a
// source needs (the image and mask bytes, the label) as slices borrowed from the record
// buffer, with no copy and no allocation beyond two small lists of keys; generated types
// would copy every feature of every record into owned values and need a protobuf
// definition and code generation at build time. The wire format it reads is small and
// fixed: varints, fixed 32/64-bit fields and length-delimited fields.

/// The features of one `tf.train.Example`: for each key, its first bytes value or first
/// int64 value, and its float or int64 list undecoded (read by [`Example::floats`] and
/// [`Example::int_list`] only for the targets' keys).
#[derive(Debug, Default)]
struct Example<'a> {
    bytes: Vec<(&'a [u8], &'a [u8])>,
    ints: Vec<(&'a [u8], i64)>,
    /// (key, the `Feature` field of the list: 2 FloatList, 3 Int64List, the list).
    lists: Vec<(&'a [u8], u64, &'a [u8])>,
}

mod fault;
use fault::ListFault;

struct Wire<'a> {
    b: &'a [u8],
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Result<u64, WireError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.b.split_first().ok_or(WireError::VarintCutShort)?;
            self.b = rest;
            v |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError::VarintTooLong)
    }

    /// The next field: number, wire type, and for length-delimited fields the bytes.
    fn field(&mut self) -> Result<(u64, u8, &'a [u8], u64), WireError> {
        let tag = self.varint()?;
        let (num, wt) = (tag >> 3, (tag & 7) as u8);
        match wt {
            0 => Ok((num, wt, &[], self.varint()?)),
            1 | 5 => {
                let n = if wt == 1 { 8 } else { 4 };
                if self.b.len() < n {
                    return Err(WireError::FixedCutShort);
                }
                let (v, rest) = self.b.split_at(n);
                self.b = rest;
                Ok((num, wt, v, 0))
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| WireError::LengthTooLarge)?;
                if self.b.len() < n {
                    return Err(WireError::DelimitedCutShort);
                }
                let (v, rest) = self.b.split_at(n);
                self.b = rest;
                Ok((num, wt, v, 0))
            }
            _ => Err(WireError::WireType(wt)),
        }
    }

    fn done(&self) -> bool {
        self.b.is_empty()
    }
}

impl<'a> Example<'a> {
    fn parse(data: &'a [u8]) -> Result<Self, WireError> {
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

    /// One `Feature`: a BytesList (1), FloatList (2) or Int64List (3).
    fn feature(&mut self, key: &'a [u8], f: &'a [u8]) -> Result<(), WireError> {
        let mut w = Wire { b: f };
        while !w.done() {
            let (num, wt, list, _) = w.field()?;
            if wt != 2 {
                continue;
            }
            if num == 2 || num == 3 {
                self.lists.push((key, num, list));
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

    /// The list of `kind` (2 float, 3 int64) under `key`; `None` without the feature.
    fn list(&self, key: &str, kind: u64) -> std::result::Result<Option<&'a [u8]>, ListFault> {
        match self.lists.iter().find(|(k, _, _)| *k == key.as_bytes()) {
            None => Ok(None),
            Some((_, num, list)) if *num == kind => Ok(Some(list)),
            Some(_) => Err(ListFault::NotAList {
                key: key.into(),
                float: kind == 2,
            }),
        }
    }

    /// The fields of the list `key` of feature kind `kind` (2: floats, 3: int64s), each
    /// handed to `each` with the values gathered so far; `None` without the feature.
    fn gather<T>(
        &self,
        key: &str,
        kind: u64,
        mut each: impl FnMut(
            &mut Vec<T>,
            (u64, u8, &'a [u8], u64),
        ) -> std::result::Result<(), ListFault>,
    ) -> std::result::Result<Option<Vec<T>>, ListFault> {
        let Some(list) = self.list(key, kind)? else {
            return Ok(None);
        };
        let mut out = Vec::new();
        let mut l = Wire { b: list };
        while !l.done() {
            let field = l.field().map_err(|source| wire_fault(key, source))?;
            each(&mut out, field)?;
        }
        Ok(Some(out))
    }

    /// The values of the float list `key` (packed or not), at most
    /// [`crate::source::target::MAX_TARGETS`] * 4 of them; `None` without the feature.
    fn floats(&self, key: &str) -> std::result::Result<Option<Vec<f32>>, ListFault> {
        self.gather(key, 2, |out, field| {
            let chunk = match field {
                (1, 2, packed, _) if packed.len() % 4 == 0 => packed,
                (1, 2, _, _) => return Err(ListFault::PackedFloatsCutShort { key: key.into() }),
                (1, 5, one, _) => one,
                _ => return Ok(()),
            };
            if out.len() + chunk.len() / 4 > LIST_LIMIT {
                return Err(ListFault::TooManyValues { key: key.into() });
            }
            out.extend(
                chunk
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            Ok(())
        })
    }

    /// The values of the int64 list `key` (packed or not), as [`Example::floats`].
    fn int_list(&self, key: &str) -> std::result::Result<Option<Vec<i64>>, ListFault> {
        let push = |out: &mut Vec<i64>, v: u64| {
            if out.len() >= LIST_LIMIT {
                return Err(ListFault::TooManyValues { key: key.into() });
            }
            out.push(v as i64);
            Ok(())
        };
        self.gather(key, 3, |out, field| {
            match field {
                (1, 2, packed, _) => {
                    let mut p = Wire { b: packed };
                    while !p.done() {
                        let v = p.varint().map_err(|source| wire_fault(key, source))?;
                        push(out, v)?;
                    }
                }
                (1, 0, _, v) => push(out, v)?,
                _ => {}
            }
            Ok(())
        })
    }
}

/// The wire error `source` met in the list `key`.
fn wire_fault(key: &str, source: WireError) -> ListFault {
    ListFault::Wire {
        key: key.into(),
        source,
    }
}

/// The targets of an example under `keys` (several class ids, a value vector, boxes,
/// keypoints; `None` when it has none), or why they cannot be used. Coordinates are
/// checked as a manifest's are (finite, `x0 <= x1`, `y0 <= y1`), after scaling
/// normalised ones to pixels.
fn example_targets(
    ex: &Example<'_>,
    keys: &ExampleKeys,
) -> std::result::Result<Option<Targets>, ListFault> {
    let bounded = |n: usize, key: &str| {
        if n > MAX_TARGETS {
            return Err(ListFault::TooManyTargets { key: key.into(), n });
        }
        Ok(())
    };
    let class = |v: i64, key: &str| {
        u32::try_from(v)
            .ok()
            .filter(|&c| c <= MAX_LABEL)
            .ok_or_else(|| ListFault::NotAClassId {
                key: key.into(),
                value: v,
            })
    };
    let classes = |key: &str| -> std::result::Result<Option<Vec<u32>>, ListFault> {
        let Some(list) = ex.int_list(key)? else {
            return Ok(None);
        };
        bounded(list.len(), key)?;
        list.into_iter()
            .map(|v| class(v, key))
            .collect::<std::result::Result<_, _>>()
            .map(Some)
    };
    let mut t = Targets::default();
    if let Some(c) = classes(&keys.labels)? {
        t.classes = c;
    }
    if let Some(v) = ex.floats(&keys.values)? {
        bounded(v.len(), &keys.values)?;
        if let Some(x) = v.iter().find(|x| !x.is_finite()) {
            return Err(ListFault::NotFinite {
                key: keys.values.clone(),
                value: *x,
            });
        }
        t.values = v;
    }
    // Every coordinate list, pixels or fractions of the image's size.
    let coords = |key: &str| -> std::result::Result<Option<Vec<f32>>, ListFault> {
        let v = ex.floats(key)?;
        if let Some(v) = &v {
            bounded(v.len(), key)?;
        }
        Ok(v)
    };
    let edges = [
        &keys.box_xmin,
        &keys.box_ymin,
        &keys.box_xmax,
        &keys.box_ymax,
    ]
    .map(|k| coords(k));
    let [x0, y0, x1, y1] = edges;
    let (x0, y0, x1, y1) = (x0?, y0?, x1?, y1?);
    let (kx, ky) = (coords(&keys.keypoint_x)?, coords(&keys.keypoint_y)?);
    let any_coords = [&x0, &y0, &x1, &y1, &kx, &ky].iter().any(|c| c.is_some());
    // (width, height) to scale by: 1 for pixels.
    let (sx, sy) = if keys.normalized && any_coords {
        let size = |key: &str| {
            ex.int(key)
                .filter(|&v| (1..=i64::from(u32::MAX)).contains(&v))
                .map(|v| v as f32)
                .ok_or_else(|| ListFault::NoImageSize { key: key.into() })
        };
        (size(&keys.width)?, size(&keys.height)?)
    } else {
        (1.0, 1.0)
    };
    let pixel = |v: f32, scale: f32, key: &str| {
        let p = v * scale;
        if !p.is_finite() || p.abs() > 1e9 {
            return Err(ListFault::NotFiniteCoordinate {
                key: key.into(),
                value: v,
            });
        }
        Ok(p)
    };
    match (x0, y0, x1, y1) {
        (None, None, None, None) => {}
        (Some(x0), Some(y0), Some(x1), Some(y1)) => {
            let n = x0.len();
            if [y0.len(), x1.len(), y1.len()] != [n; 3] {
                return Err(ListFault::BoxLengths {
                    lens: [n, y0.len(), x1.len(), y1.len()],
                    keys: box_keys(keys),
                });
            }
            let box_classes = classes(&keys.box_class)?;
            if let Some(c) = &box_classes {
                if c.len() != n {
                    return Err(ListFault::BoxClasses {
                        boxes: n,
                        classes: c.len(),
                        key: keys.box_class.clone(),
                    });
                }
            }
            for i in 0..n {
                let b = BoundingBox {
                    x0: pixel(x0[i], sx, &keys.box_xmin)?,
                    y0: pixel(y0[i], sy, &keys.box_ymin)?,
                    x1: pixel(x1[i], sx, &keys.box_xmax)?,
                    y1: pixel(y1[i], sy, &keys.box_ymax)?,
                    class: box_classes.as_ref().map_or(0, |c| c[i]),
                };
                if b.x1 < b.x0 || b.y1 < b.y0 {
                    return Err(ListFault::InvertedBox {
                        index: i,
                        edges: [x0[i], y0[i], x1[i], y1[i]],
                    });
                }
                t.boxes.push(b);
            }
        }
        _ => {
            return Err(ListFault::IncompleteBoxes {
                keys: box_keys(keys),
            })
        }
    }
    keypoints(ex, keys, (kx, ky), &pixel, (sx, sy), &mut t)?;
    Ok((!t.is_empty()).then_some(t))
}

/// The names of the four box edge features, in the order xmin, ymin, xmax, ymax.
fn box_keys(keys: &ExampleKeys) -> Box<[String; 4]> {
    Box::new([
        keys.box_xmin.clone(),
        keys.box_ymin.clone(),
        keys.box_xmax.clone(),
        keys.box_ymax.clone(),
    ])
}

/// The keypoints of an example (`kx`, `ky`: its coordinate lists, if any), scaled to
/// pixels by `sx`, `sy` through `pixel`, each with its visibility and the box it belongs
/// to (those of `t`, in turn), into `t`.
fn keypoints(
    ex: &Example<'_>,
    keys: &ExampleKeys,
    (kx, ky): (Option<Vec<f32>>, Option<Vec<f32>>),
    pixel: &dyn Fn(f32, f32, &str) -> std::result::Result<f32, ListFault>,
    (sx, sy): (f32, f32),
    t: &mut Targets,
) -> std::result::Result<(), ListFault> {
    match (kx, ky) {
        (None, None) => {}
        (Some(kx), Some(ky)) => {
            let n = kx.len();
            if ky.len() != n {
                return Err(ListFault::KeypointLengths {
                    n,
                    x_key: keys.keypoint_x.clone(),
                    ny: ky.len(),
                    y_key: keys.keypoint_y.clone(),
                });
            }
            let vis = ex.int_list(&keys.keypoint_visibility)?;
            if let Some(v) = &vis {
                if v.len() != n {
                    return Err(ListFault::Visibilities {
                        n,
                        visibilities: v.len(),
                        key: keys.keypoint_visibility.clone(),
                    });
                }
            }
            // Each box's keypoints in turn: the same number per box.
            let per = match t.boxes.len() {
                0 => n.max(1),
                b if n % b == 0 => (n / b).max(1),
                b => return Err(ListFault::KeypointsPerBox { n, boxes: b }),
            };
            for i in 0..n {
                let visibility = match vis.as_ref().map(|v| v[i]) {
                    None => 2,
                    Some(v @ 0..=2) => v as u8,
                    Some(v) => {
                        return Err(ListFault::Visibility {
                            value: v,
                            key: keys.keypoint_visibility.clone(),
                        })
                    }
                };
                t.keypoints.push(Keypoint {
                    x: pixel(kx[i], sx, &keys.keypoint_x)?,
                    y: pixel(ky[i], sy, &keys.keypoint_y)?,
                    visibility,
                    object: (i / per) as u32,
                });
            }
        }
        _ => {
            return Err(ListFault::IncompleteKeypoints {
                x_key: keys.keypoint_x.clone(),
                y_key: keys.keypoint_y.clone(),
            })
        }
    }
    Ok(())
}

/// The most values of one list feature read for targets: four per box, or one per
/// keypoint coordinate, for [`crate::source::target::MAX_TARGETS`] of them.
const LIST_LIMIT: usize = 4 * MAX_TARGETS;

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

// ---------------------------------------------------------------------------------------
// Indexing.

/// Indexes a TFRecord shard: every record's offset and length, label and mask presence,
/// recorded path and class name.
///
/// Damage: a header whose length checksum fails is one entry that fails when read; one
/// whose length runs past the end of the shard (a record cut short, or a damaged length
/// that happens to pass its checksum) is one entry that is reported; and indexing resumes at the next position whose header
/// checksum holds (after the damaged byte; after the header whose length runs past the
/// end), so the records after it are still indexed. A record whose data checksum fails, or
/// whose data is not an example, is indexed and fails when read. An empty shard is one
/// entry that is reported.
pub(super) fn index(shard: &Path, size: u64, keys: &ExampleKeys) -> Result<Vec<Entry>> {
    let io = |e: std::io::Error| Error::io(shard, e);
    // One sequential pass with a large buffer: shards are far larger than memory wants.
    let r = BufReader::with_capacity(READ_AHEAD, super::open_shard(shard).map_err(io)?);
    index_records(r, size, keys, &shard.display().to_string()).map_err(io)
}

/// Bytes the search for the next intact header holds at a time, however far it looks.
const RESYNC_WINDOW: usize = 64 << 10;

/// A reader of a shard and the position it is at.
struct Shard<R> {
    r: BufReader<R>,
    pos: u64,
}

impl<R: Read + Seek> Shard<R> {
    /// Moves to `to`, within the read buffer where it can.
    fn seek(&mut self, to: u64) -> std::io::Result<()> {
        let delta = i64::try_from(i128::from(to) - i128::from(self.pos))
            .map_err(|_| std::io::Error::other("seek out of range"))?;
        self.r.seek_relative(delta)?;
        self.pos = to;
        Ok(())
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.r.read_exact(buf)?;
        self.pos += buf.len() as u64;
        Ok(())
    }

    /// The first position at or after `from` whose 12 bytes are a record header whose
    /// length checksum holds, in a shard of `size` bytes; `None` when the shard ends first.
    /// Reads the shard once from `from`, [`RESYNC_WINDOW`] bytes at a time, and leaves the
    /// reader at the position found.
    fn next_header(&mut self, from: u64, size: u64) -> std::io::Result<Option<u64>> {
        self.seek(from)?;
        let mut window = vec![0u8; RESYNC_WINDOW];
        // `window[..have]` is the shard from `base`.
        let (mut base, mut have) = (from, 0usize);
        loop {
            let left = size.saturating_sub(base + have as u64);
            let room = RESYNC_WINDOW - have;
            let want = usize::try_from(left).map_or(room, |l| l.min(room));
            let Some(fresh) = window.get_mut(have..have + want) else {
                return Ok(None);
            };
            self.read_exact(fresh)?;
            have += want;
            let found = (0..(have + 1).saturating_sub(12))
                .find(|&p| window.get(p..p + 12).and_then(header_len).is_some());
            if let Some(p) = found {
                let at = base + p as u64;
                self.seek(at)?;
                return Ok(Some(at));
            }
            if want == 0 {
                return Ok(None);
            }
            // Keep the last 11 bytes: a header may start in them.
            let keep = have.min(11);
            window.copy_within(have - keep..have, 0);
            base += (have - keep) as u64;
            have = keep;
        }
    }
}

/// [`index`], of the shard `r` reads (named `shard` in logs).
fn index_records<R: Read + Seek>(
    r: BufReader<R>,
    size: u64,
    keys: &ExampleKeys,
    shard: &str,
) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    if size == 0 {
        out.push(Entry::damage(0, 0, "is empty (0 bytes): no records".into()));
        return Ok(out);
    }
    let mut r = Shard { r, pos: 0 };
    let mut rec = Vec::new();
    let mut at = 0u64;
    while at < size {
        let mut entry = Entry {
            name: format!("{:08}", out.len()),
            offset: at,
            len: 0,
            label: None,
            mask: None,
            path: None,
            class: None,
            problem: None,
            unread: true,
            targets: None,
            check: None,
            mask_check: None,
        };
        let mut head = [0u8; 12];
        if at + 12 > size {
            // Cut short inside a header: the entry fails when read.
            out.push(entry);
            break;
        }
        r.read_exact(&mut head)?;
        let len = header_len(&head);
        let end = len.and_then(|l| (at + 12).checked_add(l)?.checked_add(4));
        let resume = match (len, end) {
            (Some(len), Some(end)) if end <= size => {
                entry.len = len;
                let n = usize::try_from(len).map_err(std::io::Error::other)?;
                rec.resize(n, 0);
                let mut tail = [0u8; 4];
                r.read_exact(&mut rec)?;
                r.read_exact(&mut tail)?;
                if masked_crc(&rec) == u32::from_le_bytes(tail) {
                    if let Ok(ex) = Example::parse(&rec) {
                        entry.unread = false;
                        entry.label = ex.int(&keys.label).map(i128::from);
                        entry.mask = ex.bytes(&keys.mask).map(|_| (0, 0));
                        entry.path = ex.bytes(&keys.path).and_then(recorded_text);
                        entry.class = ex.bytes(&keys.class_text).and_then(recorded_text);
                        let record = out.len();
                        match example_targets(&ex, keys) {
                            Ok(t) => entry.targets = t,
                            Err(why) => {
                                entry.problem = Some(Problem::Label(format!(
                                    "record {record} (offset {at}): its targets: {why}"
                                )))
                            }
                        }
                        // One class id is the label; several are `labels`' targets.
                        if let Ok(Some(l)) = ex.int_list(&keys.label) {
                            if l.len() > 1 && entry.problem.is_none() {
                                entry.problem = Some(Problem::Label(format!(
                                    "record {record} (offset {at}): feature {:?} holds {} class ids, not one (several go in ExampleKeys::labels)",
                                    keys.label,
                                    l.len()
                                )));
                            }
                        }
                    }
                }
                out.push(entry);
                at = end;
                continue;
            }
            (Some(len), _) => {
                let left = size - (at + 12);
                let what = format!(
                    "record {} (offset {at}): its length of {len} bytes exceeds the limit of the {left} bytes the shard holds after its header: the record is cut short, or its length is damaged",
                    out.len()
                );
                log::warn!("{shard} {what}");
                entry.len = len;
                entry.unread = false;
                entry.problem = Some(Problem::Corrupt(what));
                at + 12
            }
            (None, _) => {
                log::warn!("{shard}: damaged record header at offset {at}");
                at + 1
            }
        };
        out.push(entry);
        match r.next_header(resume, size)? {
            Some(p) => {
                log::warn!("{shard}: records resume at offset {p}");
                at = p;
            }
            None => break,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard in memory that counts what is read from it: the bytes, and the largest
    /// single read asked for.
    struct Counting {
        shard: std::io::Cursor<Vec<u8>>,
        read: u64,
        largest: usize,
    }

    impl Read for Counting {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.largest = self.largest.max(buf.len());
            let n = self.shard.read(buf)?;
            self.read += n as u64;
            Ok(n)
        }
    }

    impl Seek for Counting {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.shard.seek(to)
        }
    }

    #[test]
    fn resyncing_after_damaged_headers_reads_the_shard_once_with_a_bounded_buffer() {
        // Finding 8 (a 180 MB shard with 20 damaged headers took 185 MB to index, each
        // damaged header reading the rest of the shard), at 24 MB: 240 records of 100 kB
        // of noise, the length field of 20 of them damaged.
        let mut shard = Vec::new();
        let mut starts = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..240 {
            let image: Vec<u8> = (0..100_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x >> 24) as u8
                })
                .collect();
            starts.push(shard.len() as u64);
            let example = encode_example(&[("image/encoded", &image)], &[("image/class/label", i)]);
            frame_record(&example, &mut shard);
        }
        let damaged: Vec<usize> = (0..20).map(|k| 5 + 12 * k).collect();
        for &i in &damaged {
            shard[starts[i] as usize] ^= 0x01;
        }
        let size = shard.len() as u64;
        let mut counting = Counting {
            shard: std::io::Cursor::new(shard),
            read: 0,
            largest: 0,
        };
        let r = BufReader::with_capacity(READ_AHEAD, &mut counting);
        let entries = index_records(r, size, &ExampleKeys::default(), "test").expect("indexes");
        // Every record has its entry at its offset: a damaged one unread (it fails when
        // read), every good one after it with its label.
        let got: Vec<(u64, Option<i128>, bool)> = entries
            .iter()
            .map(|e| (e.offset, e.label, e.unread))
            .collect();
        let want: Vec<(u64, Option<i128>, bool)> = starts
            .iter()
            .enumerate()
            .map(|(i, &at)| {
                let bad = damaged.contains(&i);
                (at, (!bad).then_some(i as i128), bad)
            })
            .collect();
        assert_eq!(got, want);
        // Read once, in reads no larger than the read-ahead buffer (the search for the
        // next header re-reads at most one buffer's worth after each damaged header).
        assert!(
            counting.largest <= READ_AHEAD,
            "a read of {} bytes",
            counting.largest
        );
        let bound = size + 20 * READ_AHEAD as u64;
        assert!(
            counting.read <= bound,
            "{} bytes read from a shard of {size}",
            counting.read
        );
        println!(
            "{} bytes read from a shard of {size}, at most {} at a time",
            counting.read, counting.largest
        );
    }

    #[test]
    fn a_length_past_the_end_is_one_entry_and_the_records_after_it_are_indexed() {
        // Finding 9: a length of 1 TiB whose checksum holds hid the records after it.
        let mut shard = Vec::new();
        let mut starts = Vec::new();
        let ex = |i: i64| {
            encode_example(
                &[("image/encoded", &[i as u8; 50])],
                &[("image/class/label", i)],
            )
        };
        for i in 0..4 {
            starts.push(shard.len() as u64);
            frame_record(&ex(i), &mut shard);
            if i == 1 {
                starts.push(shard.len() as u64);
                let len = (1u64 << 40).to_le_bytes();
                shard.extend_from_slice(&len);
                shard.extend_from_slice(&masked_crc(&len).to_le_bytes());
            }
        }
        let size = shard.len() as u64;
        let r = BufReader::new(std::io::Cursor::new(shard));
        let entries = index_records(r, size, &ExampleKeys::default(), "test").expect("indexes");
        let got: Vec<(u64, u64, Option<i128>, bool)> = entries
            .iter()
            .map(|e| (e.offset, e.len, e.label, e.unread))
            .collect();
        let good = |k: usize, i: i64| (starts[k], ex(i).len() as u64, Some(i128::from(i)), false);
        assert_eq!(
            got,
            [
                good(0, 0),
                good(1, 1),
                (starts[2], 1 << 40, None, false),
                good(3, 2),
                good(4, 3),
            ]
        );
        assert!(matches!(
            &entries[2].problem,
            Some(Problem::Corrupt(w)) if w.starts_with(&format!("record 2 (offset {}): its length of 1099511627776 bytes", starts[2]))
        ));
    }

    #[test]
    fn an_empty_shard_is_one_damage_entry() {
        let r = BufReader::new(std::io::Cursor::new(Vec::new()));
        let entries = index_records(r, 0, &ExampleKeys::default(), "test").expect("indexes");
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].name, "@0");
        assert!(matches!(&entries[0].problem, Some(Problem::Corrupt(w)) if w.contains("empty")));
    }

    #[test]
    fn crc32c_matches_the_standard_check_values() {
        // The check value of the CRC catalogue, and RFC 3720 (iSCSI) B.4's test vectors.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46DD_794E);
    }

    #[test]
    fn masked_crc_is_tensorflows() {
        // The first record header of tests/data/shards/tfrecord/train-00000-of-00002.tfrecord,
        // written by TensorFlow: a length of 3736 and its masked CRC.
        let head = [0x98, 0x0e, 0, 0, 0, 0, 0, 0, 0x36, 0x76, 0xa7, 0x33u8];
        assert_eq!(masked_crc(&head[..8]), 0x33a7_7636);
        assert_eq!(header_len(&head), Some(3736));
        let mut framed = Vec::new();
        frame_record(b"abcd", &mut framed);
        assert_eq!(framed.len(), 8 + 4 + 4 + 4);
        assert_eq!(header_len(&framed), Some(4));
        framed[0] ^= 1;
        assert_eq!(header_len(&framed), None);
    }

    #[test]
    fn records_read_back_and_damage_is_named() {
        let mut framed = Vec::new();
        frame_record(b"abcd", &mut framed);
        let mut buf = Vec::new();
        read_record(&mut &framed[..], 4, &mut buf).expect("reads");
        assert_eq!(buf, b"abcd");
        let err = |bytes: &[u8], len| read_record(&mut &bytes[..], len, &mut Vec::new());
        assert!(matches!(
            err(&framed, 5),
            Err(RecordError::Length {
                found: 4,
                expected: 5
            })
        ));
        assert!(matches!(
            err(&framed[..6], 4),
            Err(RecordError::HeaderCutShort(_))
        ));
        assert!(matches!(
            err(&framed[..14], 4),
            Err(RecordError::CutShort(_))
        ));
        let mut bad = framed.clone();
        bad[13] ^= 1;
        assert!(matches!(err(&bad, 4), Err(RecordError::DataChecksum)));
        bad = framed;
        bad[9] ^= 1;
        assert!(matches!(err(&bad, 4), Err(RecordError::LengthChecksum)));
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
        assert_eq!(
            Example::parse(&[0x0A, 0x05, 0x0A]).err(),
            Some(WireError::DelimitedCutShort)
        );
        // And what the writer encodes, the reader reads.
        let ex_bytes = encode_example(&[("img", b"pixels")], &[("label", 7)]);
        let ex = Example::parse(&ex_bytes).expect("parses");
        assert_eq!(ex.bytes("img"), Some(&b"pixels"[..]));
        assert_eq!(ex.int("label"), Some(7));
    }

    /// A float list whose protobuf encoding is cut short: the fault names the feature
    /// and keeps the wire error as its source.
    #[test]
    fn a_broken_list_keeps_its_wire_error_as_the_source() {
        // Field 1, length-delimited, 5 bytes announced, 1 present.
        let list = [0x0A, 0x05, 0x00];
        let mut feature = Vec::new();
        delimited(2, &list, &mut feature);
        let mut entry = Vec::new();
        delimited(1, b"xs", &mut entry);
        delimited(2, &feature, &mut entry);
        let mut features = Vec::new();
        delimited(1, &entry, &mut features);
        let mut data = Vec::new();
        delimited(1, &features, &mut data);
        let ex = Example::parse(&data).expect("the list is read only when asked for");
        let fault = ex.floats("xs").expect_err("the list is cut short");
        assert_eq!(
            fault.to_string(),
            format!("feature \"xs\": {}", WireError::DelimitedCutShort)
        );
        let source = std::error::Error::source(&fault).expect("a source");
        assert!(matches!(
            source.downcast_ref::<WireError>(),
            Some(WireError::DelimitedCutShort)
        ));
    }
}
