//! Image sizes read from headers, never by decoding: what aspect-ratio buckets group
//! samples by ([`crate::source::buckets`]).
//!
//! One read per sample: a file (local, or a URL in object storage) and a byte range of a
//! file give their first [`HEADER_BYTES`] (in object storage one ranged GET, after the
//! object's size is asked); a tar member, a TFRecord field, a Parquet cell and bytes in
//! memory are read whole (bounded by the decode limit), as the pipeline reads them. A
//! JPEG whose frame header lies past the first [`HEADER_BYTES`] (large EXIF or ICC
//! segments) is read again whole, bounded by the same limit. The size is the image's
//! upright size (after its EXIF orientation), the size the augmentation plans with.

use std::io::Read;

use super::{Location, Sample};
use crate::decode::{peek_info, Limits};
use crate::error::{SampleError, SampleErrorKind};

/// Bytes read from the start of a file for its headers.
pub const HEADER_BYTES: u64 = 64 << 10;

/// The upright `(width, height)` of `sample`'s image, from its headers; a sample whose
/// headers cannot be read (or give a zero side, or more pixels than `limits` allow) is
/// an error naming it and why.
pub fn stored_size(sample: &Sample, limits: &Limits) -> Result<(u32, u32), SampleError> {
    let fail = |kind, reason: String| SampleError::new(sample, kind, reason);
    let (bytes, whole) = head(&sample.location, limits.max_bytes).map_err(|(k, r)| fail(k, r))?;
    let info = match peek_info(&bytes) {
        Ok(info) => info,
        Err(_) if !whole => {
            let all =
                read_whole(&sample.location, limits.max_bytes).map_err(|(k, r)| fail(k, r))?;
            peek_info(&all).map_err(|e| fail(e.kind(), format!("header: {e}")))?
        }
        Err(e) => return Err(fail(e.kind(), format!("header: {e}"))),
    };
    crate::decode::check_limits(&info, limits)
        .map_err(|e| fail(e.kind(), format!("header: {e}")))?;
    Ok(info.oriented_size())
}

type ReadFailure = (SampleErrorKind, String);

/// The first bytes of `location`, and whether they are all of it.
fn head(location: &Location, max_bytes: u64) -> Result<(Vec<u8>, bool), ReadFailure> {
    let io = |e: String| (SampleErrorKind::Io, e);
    match location {
        Location::File(path) if super::remote::is_url(path) => {
            let url = path.to_string_lossy();
            let size = super::remote::stat(&url)
                .map_err(|e| io(e.to_string()))?
                .size;
            let n = size.min(HEADER_BYTES);
            let bytes = super::remote::read_at(&url, 0, n).map_err(|e| io(e.to_string()))?;
            Ok((bytes, n == size))
        }
        Location::File(path) => {
            let file =
                std::fs::File::open(path).map_err(|e| io(format!("{}: {e}", path.display())))?;
            let mut bytes = Vec::new();
            file.take(HEADER_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| io(format!("{}: {e}", path.display())))?;
            let whole = bytes.len() as u64 <= HEADER_BYTES;
            bytes.truncate(HEADER_BYTES as usize);
            Ok((bytes, whole))
        }
        Location::Range { path, offset, len } => {
            let n = (*len).min(HEADER_BYTES);
            let mut bytes = Vec::new();
            super::shards::read_range(path, *offset, n, max_bytes, &mut bytes)
                .map_err(|e| read_failure(&e))?;
            Ok((bytes, n == *len))
        }
        other => Ok((read_whole(other, max_bytes)?, true)),
    }
}

/// All of `location`'s bytes, bounded by `max_bytes`.
fn read_whole(location: &Location, max_bytes: u64) -> Result<Vec<u8>, ReadFailure> {
    location.read(max_bytes).map_err(|e| read_failure(&e))
}

fn read_failure(e: &super::shards::ReadError) -> ReadFailure {
    use super::shards::ReadError;
    let kind = match e {
        ReadError::Refused { kind, .. } => *kind,
        ReadError::TooLarge { .. }
        | ReadError::RecordTooLarge { .. }
        | ReadError::MemberTooLarge { .. } => SampleErrorKind::Limit,
        _ => SampleErrorKind::Io,
    };
    (kind, e.to_string())
}
