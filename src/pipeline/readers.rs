//! Reading a sample's compressed bytes, with the file-size limit checked before reading.

use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::Instant;

use crate::decode::Limits;
use crate::error::{SampleError, SampleErrorKind};
use crate::source::{Location, Sample};

use super::stats::Counters;

/// Reads `loc` into `buf` (cleared first), refusing files over `limits.max_bytes` before
/// reading them. `largest` is the largest file this epoch has read: a buffer that must
/// grow grows to it at once, so a reused buffer grows once rather than once for every
/// larger file it happens to meet.
pub(crate) fn read_location(
    s: &Sample,
    loc: &Location,
    what: &str,
    limits: &Limits,
    buf: &mut Vec<u8>,
    largest: &AtomicUsize,
) -> Result<(), SampleError> {
    buf.clear();
    match loc {
        Location::Record(field) => crate::source::shards::read_field(field, limits.max_bytes, buf)
            .map_err(|e| SampleError::new(s, shard_error_kind(&e), format!("{what}: {e}"))),
        Location::Parquet(cell) => crate::source::shards::read_parquet(cell, limits.max_bytes, buf)
            .map_err(|e| SampleError::new(s, SampleErrorKind::Corrupt, format!("{what}: {e}"))),
        Location::Range { path, offset, len } => {
            crate::source::shards::read_range(path, *offset, *len, limits.max_bytes, buf)
                .map_err(|e| SampleError::new(s, shard_error_kind(&e), format!("{what}: {e}")))
        }
        Location::Member(m) => crate::source::shards::read_member(m, limits.max_bytes, buf)
            .map_err(|e| SampleError::new(s, shard_error_kind(&e), format!("{what}: {e}"))),
        Location::Refused { kind, reason } => Err(SampleError::new(s, *kind, reason.to_string())),
        Location::Memory(bytes) => {
            if bytes.len() as u64 > limits.max_bytes {
                return Err(SampleError::new(
                    s,
                    SampleErrorKind::Limit,
                    format!(
                        "{what} of {} bytes exceeds the limit of {}",
                        bytes.len(),
                        limits.max_bytes
                    ),
                ));
            }
            buf.extend_from_slice(bytes);
            Ok(())
        }
        Location::File(path) if crate::source::remote::is_url(path) => {
            match crate::source::fsio::read_bounded(path, limits.max_bytes, buf) {
                Ok(()) => Ok(()),
                Err(crate::source::fsio::ReadError::TooLarge { bytes, limit }) => {
                    Err(SampleError::new(
                        s,
                        SampleErrorKind::Limit,
                        format!("{what} of {bytes} bytes exceeds the limit of {limit}"),
                    ))
                }
                Err(e) => Err(SampleError::new(
                    s,
                    SampleErrorKind::Io,
                    format!("{what} {e}"),
                )),
            }
        }
        Location::File(path) => {
            let io = |e: std::io::Error| {
                SampleError::new(
                    s,
                    SampleErrorKind::Io,
                    format!("{what} {}: {e}", path.display()),
                )
            };
            let mut f = crate::source::fsio::open_regular(path).map_err(io)?;
            let len = f.metadata().map_err(io)?.len();
            if len > limits.max_bytes {
                return Err(SampleError::new(
                    s,
                    SampleErrorKind::Limit,
                    format!(
                        "{what} of {len} bytes exceeds the limit of {}",
                        limits.max_bytes
                    ),
                ));
            }
            let want = largest
                .fetch_max(len as usize, Ordering::Relaxed)
                .max(len as usize);
            buf.reserve(want);
            // `take` guards against a file that grows while being read.
            (&mut f)
                .take(limits.max_bytes + 1)
                .read_to_end(buf)
                .map_err(io)?;
            if buf.len() as u64 > limits.max_bytes {
                return Err(SampleError::new(
                    s,
                    SampleErrorKind::Limit,
                    format!(
                        "{what} grew past the limit of {} bytes while being read",
                        limits.max_bytes
                    ),
                ));
            }
            Ok(())
        }
    }
}

/// The kind a shard read's failure is reported under: damage (`corrupt`), except a read
/// from a store that failed after its retries or found the object changed (`io`: the
/// bytes were never seen).
fn shard_error_kind(e: &crate::source::shards::ReadError) -> SampleErrorKind {
    use crate::source::shards::{ReadError, RecordError};
    let remote = |e: &std::io::Error| {
        e.get_ref()
            .is_some_and(|x| x.is::<crate::source::remote::RemoteError>())
    };
    match e {
        ReadError::MemberCutShort { error, .. } if remote(error) => SampleErrorKind::Io,
        ReadError::Record {
            error: RecordError::Io(error),
            ..
        } if remote(error) => SampleErrorKind::Io,
        _ => SampleErrorKind::Corrupt,
    }
}

/// Reads a sample's image (and mask, if it has one) into the staging buffers.
pub(crate) fn read_sample(
    s: &Sample,
    limits: &Limits,
    image: &mut Vec<u8>,
    mask: &mut Vec<u8>,
    stats: &Counters,
) -> Result<(), SampleError> {
    let t = Instant::now();
    let r =
        read_location(s, &s.location, "image", limits, image, &stats.largest_file).and_then(|()| {
            match &s.mask {
                Some(m) => read_location(s, m, "mask", limits, mask, &stats.largest_file),
                None => {
                    mask.clear();
                    Ok(())
                }
            }
        });
    stats.spent(&stats.read_ns, "read", t.elapsed(), s.id);
    stats
        .reads
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    stats.bytes_read.fetch_add(
        (image.len() + mask.len()) as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
    r
}
