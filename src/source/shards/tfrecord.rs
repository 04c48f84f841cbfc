//! TFRecord shards: the framing (length, masked CRC-32C of the length, data, masked CRC-32C
//! of the data), the `tf.train.Example` records inside it, indexing a shard and reading one
//! record's bytes feature.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use super::{recorded_text, with_shard, Entry, ExampleKeys, ReadError, RecordField, READ_AHEAD};
use crate::error::{Error, Result};

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
    with_shard(&field.shard, field.offset, |f| {
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

    /// One `Feature`: a BytesList (1) or Int64List (3); FloatLists are not needed.
    fn feature(&mut self, key: &'a [u8], f: &'a [u8]) -> Result<(), WireError> {
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
/// A header whose length checksum fails is skipped by searching for the next header whose
/// checksum holds (the damaged span becomes one entry that fails when read); a record
/// whose data checksum fails is indexed and fails when read; a record cut short at the
/// end is indexed and fails when read.
pub(super) fn index(shard: &Path, size: u64, keys: &ExampleKeys) -> Result<Vec<Entry>> {
    let io = |e: std::io::Error| Error::io(shard, e);
    // One sequential pass with a large buffer: shards are far larger than memory wants.
    let mut r = BufReader::with_capacity(READ_AHEAD, File::open(shard).map_err(io)?);
    let mut out = Vec::new();
    let mut rec = Vec::new();
    let mut at = 0u64;
    while at < size {
        let name = format!("{:08}", out.len());
        let mut head = [0u8; 12];
        let whole = at + 12 <= size && r.read_exact(&mut head).is_ok();
        match header_len(&head).filter(|_| whole) {
            Some(len) => {
                let end = (at + 12).saturating_add(len).saturating_add(4);
                let (mut label, mut mask, mut path, mut class) = (None, None, None, None);
                if end <= size {
                    rec.resize(len as usize, 0);
                    let mut tail = [0u8; 4];
                    r.read_exact(&mut rec).map_err(io)?;
                    r.read_exact(&mut tail).map_err(io)?;
                    if masked_crc(&rec) == u32::from_le_bytes(tail) {
                        if let Ok(ex) = Example::parse(&rec) {
                            label = ex.int(&keys.label).and_then(|v| u32::try_from(v).ok());
                            mask = ex.bytes(&keys.mask).map(|_| (0, 0));
                            path = ex.bytes(&keys.path).and_then(recorded_text);
                            class = ex.bytes(&keys.class_text).and_then(recorded_text);
                        }
                    }
                }
                out.push(Entry {
                    name,
                    offset: at,
                    len,
                    label,
                    mask,
                    path,
                    class,
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
                    path: None,
                    class: None,
                });
                r.seek(SeekFrom::Start(at + 1)).map_err(io)?;
                let mut rest = Vec::new();
                r.read_to_end(&mut rest).map_err(io)?;
                let next = (0..rest.len().saturating_sub(11))
                    .find(|&p| header_len(&rest[p..]).is_some())
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
