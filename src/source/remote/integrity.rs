//! Whole objects checked against the store's checksum. An S3 ETag (and that of S3-compatible
//! stores, and GCS's XML API's for a non-composite object) is the MD5 of an object put in
//! one request, and `MD5(MD5(part 1) ‖ ... ‖
//! MD5(part N))-N` of one uploaded in N parts: the second is checked when N parts of
//! [`PART`] bytes make the object's size (stoker's uploads, the AWS CLI's default part
//! size). A body that does not hash to its ETag is a failed try, read again.
//!
//! An ETag that is not the MD5 of the bytes (objects encrypted with SSE-KMS or SSE-C, parts
//! of another size) shows as two reads of the object that agree with each other and not
//! with it: the object is then taken as read, and after [`NOT_MD5_OBJECTS`] such objects
//! the store's ETags are no longer checked (a warning says so). Ranges of an object carry
//! no checksum of their own and are not checked here.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use md5::{Digest, Md5};

/// The part size whose multipart ETags are checked.
pub(super) const PART: u64 = 8 << 20;

/// Objects of a store whose ETags proved not to be MD5s of their bytes, past which its
/// ETags are no longer checked.
const NOT_MD5_OBJECTS: u32 = 3;

/// What an ETag says an object's bytes hash to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Expected {
    digest: [u8; 16],
    /// The number of parts of a multipart ETag; `None` for a single-part one.
    parts: Option<u64>,
}

/// What the ETag `etag` of an object of `size` bytes says its bytes hash to: 32 hex digits
/// (quoted or not), with `-N` when N parts of [`PART`] bytes make `size`. `None` for an
/// ETag of another form (a weak one, another store's), which says nothing checkable.
pub(super) fn expected(etag: &str, size: u64) -> Option<Expected> {
    let tag = etag.trim();
    if tag.starts_with("W/") {
        return None;
    }
    let tag = tag.trim_matches('"');
    let (hex, parts) = match tag.split_once('-') {
        Some((hex, n)) => (hex, Some(n.parse::<u64>().ok()?)),
        None => (tag, None),
    };
    if parts.is_some_and(|n| n != size.div_ceil(PART).max(1)) {
        return None;
    }
    if hex.len() != 32 {
        return None;
    }
    let mut digest = [0u8; 16];
    for (k, d) in digest.iter_mut().enumerate() {
        *d = u8::from_str_radix(hex.get(2 * k..2 * k + 2)?, 16).ok()?;
    }
    Some(Expected { digest, parts })
}

/// The hash of an object's bytes in the form its [`Expected`] takes, fed in pieces of any
/// size.
pub(super) struct Hasher {
    multipart: bool,
    whole: Md5,
    part: Md5,
    in_part: u64,
}

impl Hasher {
    pub(super) fn new(want: &Expected) -> Self {
        Hasher {
            multipart: want.parts.is_some(),
            whole: Md5::new(),
            part: Md5::new(),
            in_part: 0,
        }
    }

    pub(super) fn update(&mut self, mut data: &[u8]) {
        if !self.multipart {
            self.whole.update(data);
            return;
        }
        while !data.is_empty() {
            let room = usize::try_from(PART - self.in_part).unwrap_or(usize::MAX);
            let (now, rest) = data.split_at(room.min(data.len()));
            self.part.update(now);
            self.in_part += now.len() as u64;
            data = rest;
            if self.in_part == PART {
                let d = self.part.finalize_reset();
                self.whole.update(d);
                self.in_part = 0;
            }
        }
    }

    pub(super) fn finish(mut self) -> [u8; 16] {
        if self.multipart && self.in_part > 0 {
            let d = self.part.finalize_reset();
            self.whole.update(d);
        }
        self.whole.finalize().into()
    }
}

/// The hash of `bytes`, in the form `want` takes.
pub(super) fn digest(bytes: &[u8], want: &Expected) -> [u8; 16] {
    let mut h = Hasher::new(want);
    h.update(bytes);
    h.finish()
}

/// What the checks have learned in this process.
#[derive(Default)]
pub(super) struct Checks {
    /// The hash of the last body of each object that disagreed with its ETag.
    mismatched: Mutex<HashMap<String, [u8; 16]>>,
    /// By store (`scheme://authority`): objects whose ETags proved not to be MD5s.
    not_md5: Mutex<HashMap<String, u32>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Checks {
    /// What to check an object of store `root` against (`s3`: an S3 or S3-compatible
    /// store, whose ETags are MD5s): its ETag's digest, unless the store's ETags proved
    /// to be something else.
    pub(super) fn expected(
        &self,
        root: &str,
        s3: bool,
        etag: Option<&str>,
        size: u64,
    ) -> Option<Expected> {
        if !s3 || lock(&self.not_md5).get(root).copied().unwrap_or(0) >= NOT_MD5_OBJECTS {
            return None;
        }
        expected(etag?, size)
    }

    /// Judges the hash `got` of a whole body of `url` (in store `root`) against `want`:
    /// `Err` (why) when it is not the ETag's and no earlier body of the object hashed the
    /// same.
    pub(super) fn judge(
        &self,
        root: &str,
        url: &str,
        want: &Expected,
        got: [u8; 16],
    ) -> Result<(), ChecksumError> {
        let mut mismatched = lock(&self.mismatched);
        if got == want.digest {
            mismatched.remove(url);
            return Ok(());
        }
        if mismatched.get(url) == Some(&got) {
            // Two bodies agree with each other and not with the ETag: it is not their MD5.
            mismatched.remove(url);
            let mut not_md5 = lock(&self.not_md5);
            let n = not_md5.entry(root.to_string()).or_insert(0);
            *n += 1;
            if *n == NOT_MD5_OBJECTS {
                log::warn!(
                    "{root}: the ETags of {n} objects are not the MD5s of their bytes \
                     (SSE-KMS or SSE-C encryption, or parts of another size than 8 MiB): \
                     whole objects of this store are no longer checked against them"
                );
            } else {
                log::debug!("{url}: its ETag is not the MD5 of its bytes (two reads agree)");
            }
            return Ok(());
        }
        mismatched.insert(url.to_string(), got);
        Err(ChecksumError::Mismatch {
            got,
            want: want.digest,
        })
    }
}

/// Why a body is not taken as the object's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChecksumError {
    /// The body's MD5 is not the ETag's, and no earlier body hashed the same.
    #[error(
        "the body's MD5 {} is not the ETag's {} (damaged in transit)",
        hex(got),
        hex(want)
    )]
    Mismatch {
        /// The body's MD5.
        got: [u8; 16],
        /// The ETag's.
        want: [u8; 16],
    },
    /// The hashing task failed (panicked or was cancelled).
    #[error("the checksum was not computed: {0}")]
    NotComputed(#[source] tokio::task::JoinError),
}

impl Checks {
    /// Checks the whole body of `url` (of store `root`; `s3` as for [`Checks::expected`])
    /// against its ETag, hashed on a blocking thread: `Err` (why) when it fails.
    pub(super) async fn check_body(
        &self,
        root: &str,
        s3: bool,
        url: &str,
        etag: Option<&str>,
        body: &bytes::Bytes,
    ) -> Result<(), ChecksumError> {
        let Some(want) = self.expected(root, s3, etag, body.len() as u64) else {
            return Ok(());
        };
        let b = body.clone();
        let got = tokio::task::spawn_blocking(move || digest(&b, &want))
            .await
            .map_err(ChecksumError::NotComputed)?;
        self.judge(root, url, &want, got)
    }
}

fn hex(d: &[u8; 16]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The MD5 test vectors of RFC 1321, and multipart ETags built from them by their
    /// definition.
    #[test]
    fn etags_are_parsed_and_bodies_hashed_as_s3_defines_them() {
        let abc = "900150983cd24fb0d6963f7d28e17f72";
        let want = expected(&format!("\"{abc}\""), 3).expect("an MD5 ETag");
        assert_eq!(digest(b"abc", &want), want.digest);
        assert_ne!(digest(b"abd", &want), want.digest);
        // One part: the MD5 of the part's MD5.
        let one = expected(&format!("\"{abc}-1\""), 3).expect("multipart");
        let inner: [u8; 16] = Md5::digest(Md5::digest(b"abc")).into();
        assert_eq!(digest(b"abc", &one), inner);
        // Two parts of 8 MiB and a bit, fed in pieces that straddle the boundary.
        let body: Vec<u8> = (0..PART + 5).map(|i| (i % 251) as u8).collect();
        let mut parts = Md5::new();
        parts.update(Md5::digest(&body[..PART as usize]));
        parts.update(Md5::digest(&body[PART as usize..]));
        let two: [u8; 16] = parts.finalize().into();
        let etag = format!("{}-2", hex(&two));
        let want = expected(&etag, body.len() as u64).expect("two parts of 8 MiB");
        let mut h = Hasher::new(&want);
        for piece in body.chunks(3 << 20) {
            h.update(piece);
        }
        assert_eq!(h.finish(), two);
        // Parts of another size, weak and foreign ETags: nothing to check.
        assert_eq!(expected(&etag, 3 * PART), None);
        for other in [
            "W/\"900150983cd24fb0d6963f7d28e17f72\"",
            "\"0x8D9\"",
            "abc",
            "",
        ] {
            assert_eq!(expected(other, 3), None, "{other}");
        }
    }

    #[test]
    fn a_mismatch_is_refused_unless_two_bodies_agree() {
        let checks = Checks::default();
        let want = expected("900150983cd24fb0d6963f7d28e17f72", 3).expect("ETag");
        let root = "s3://b";
        assert!(
            checks.expected(root, true, Some("900150983cd24fb0d6963f7d28e17f72"), 3) == Some(want)
        );
        assert!(checks
            .expected(root, false, Some("900150983cd24fb0d6963f7d28e17f72"), 3)
            .is_none());
        assert!(checks.judge(root, "s3://b/x", &want, want.digest).is_ok());
        // Two different damaged bodies: both refused.
        assert!(checks.judge(root, "s3://b/x", &want, [1; 16]).is_err());
        assert!(checks.judge(root, "s3://b/x", &want, [2; 16]).is_err());
        // Encrypted objects: two reads agree.
        for k in 0..NOT_MD5_OBJECTS {
            let url = format!("s3://b/k{k}");
            assert!(checks.judge(root, &url, &want, [7; 16]).is_err());
            assert!(checks.judge(root, &url, &want, [7; 16]).is_ok());
        }
        assert!(checks
            .expected(root, true, Some("900150983cd24fb0d6963f7d28e17f72"), 3)
            .is_none());
    }
}
