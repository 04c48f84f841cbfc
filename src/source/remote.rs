//! Datasets on object storage: S3 and S3-compatible stores (MinIO, R2, Ceph), Google Cloud
//! Storage, Azure Blob Storage and plain HTTP(S), through the `object_store` crate (feature
//! `object-store`).
//!
//! A URL goes wherever a dataset constructor takes a path: `s3://bucket/prefix/`,
//! `gs://bucket/prefix/`, `az://container/prefix/`, `https://host/path/`. A URL ending in
//! `/` (or one under which the store lists objects) is a folder; otherwise an object.
//! Credentials, region and endpoint come from the environment as `object_store` reads them
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT` for an
//! S3-compatible store, `AWS_ALLOW_HTTP`; `GOOGLE_*`; `AZURE_*`) and from
//! [`RemoteConfig::options`]; nothing is asked for, and no credential is logged. Profile
//! files (`~/.aws/credentials`) are not read. An S3 store with no keys, web identity or
//! container credentials probes the instance metadata service once (a few seconds at
//! most): if none answers, the store is refused with [`RemoteError::NoCredentials`],
//! naming where credentials were looked for.
//!
//! Every request is bounded and retried ([`RemoteConfig`]): at most
//! [`RemoteConfig::max_requests`] requests and [`RemoteConfig::max_bytes_in_flight`] bytes
//! in flight in the process, each request with a timeout, retried with exponential backoff
//! (and jitter) on timeouts, throttling, server errors, connections reset mid-body and
//! bodies cut short; a ranged read is checked to bring exactly the bytes asked for, and
//! carries the object's ETag (`If-Match`), so an object rewritten after it was listed is
//! reported as changed rather than read half old, half new. A read that fails after the
//! retries is the sample's report (kind `io`), with the URL and the last error, under the
//! pipeline's `OnError` policy: nothing is delivered twice or lost across retries, since a
//! retry repeats one read of one sample before anything of it is delivered.
//!
//! Whole objects are checked against the store's checksum where it gives one, the ETag
//! of an S3 (or S3-compatible) store: the MD5 of an object put in one request, or the MD5
//! of its parts' MD5s for one uploaded in parts of 8 MiB. Checked: objects read whole (the
//! loose files of a folder, sidecars, class lists, a shard that fits one read-ahead read
//! from its start), shards fetched whole for block order, objects fetched into the disk
//! cache; a body that fails is a failed try, never delivered nor cached. Not checked
//! against the store: a range of an object (a sample read from a shard: TFRecord's CRCs
//! and tar's header checksums are the format's checks, a tar member's bytes and Parquet
//! pages have none), GCS, Azure and plain HTTP bodies, and ETags that prove not to be
//! MD5s (SSE-KMS, SSE-C).
//!
//! Reads of a shard that follow each other (the validation order, a reader given
//! neighbours) coalesce into one ranged read of [`RemoteConfig::read_ahead`] bytes;
//! indexing a shard without a sidecar streams it in reads of that size. With
//! [`RemoteConfig::cache`], whole objects are kept on local disk, keyed by URL and ETag
//! (or size and modification time), least recently used evicted past the bound: later
//! epochs read locally, and a changed object is fetched again.
//!
//! The state (the stores, the limits, the counters) is process-wide: [`configure`] sets it
//! before the first URL is read, else it is made from the environment
//! ([`RemoteConfig::from_env`]).

use std::path::Path;

/// Whether `path` is a URL (`scheme://...`, the scheme letters, digits, `+`, `-`, `.`)
/// rather than a local path.
pub fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| scheme_of(s).is_some())
}

/// Whether the URL `s` names a folder: it ends in `/`, or names no object at all (a
/// bucket: `s3://bucket`).
pub fn is_folder_url(s: &str) -> bool {
    let rest = s.split_once("://").map_or(s, |(_, r)| r);
    s.ends_with('/') || rest.split_once('/').is_none_or(|(_, path)| path.is_empty())
}

/// The scheme of a URL string.
fn scheme_of(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// Why object storage could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// Not a URL of a store this build reads.
    #[error("{url}: not a URL stoker reads ({why})")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        why: String,
    },
    /// No object at the URL.
    #[error("{url}: no such object")]
    NotFound {
        /// The URL.
        url: String,
    },
    /// The object changed since it was listed (another ETag).
    #[error("{url}: the object changed since it was listed ({last})")]
    Changed {
        /// The URL.
        url: String,
        /// What the store said.
        last: String,
    },
    /// The object is larger than the limit (checked before reading it).
    #[error("{url}: {bytes} bytes exceed the limit of {limit}")]
    TooLarge {
        /// The URL.
        url: String,
        /// Bytes it has.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A request failed, after the retries where it was worth retrying.
    #[error("{url}: {what} failed after {attempts} attempt(s): {last}")]
    Failed {
        /// The URL.
        url: String,
        /// What was asked (`read of bytes 0..512`, `listing`, ...).
        what: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        last: String,
    },
    /// No credentials for an S3 store: none in the options or the environment, and no
    /// instance metadata service answered (probed once, within seconds).
    #[error("{url}: no credentials found (looked in: {looked_in})")]
    NoCredentials {
        /// The store (`s3://bucket`).
        url: String,
        /// Where they were looked for, and what the metadata service did.
        looked_in: String,
    },
    /// The client could not be set up: a setting out of range, or the client shut down
    /// (a description; the variants below carry the errors of the other causes).
    #[error("object storage: {0}")]
    Setup(String),
    /// A setting from the environment that is not a whole number.
    #[error("object storage: {name}={value:?} is not a whole number")]
    EnvNumber {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// Why it does not parse.
        source: std::num::ParseIntError,
    },
    /// The client's I/O runtime could not be started.
    #[error("object storage: the I/O runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// A store could not be built from its options.
    #[cfg(feature = "object-store")]
    #[error("object storage: {root}: {}", client::chain(source))]
    Store {
        /// The store (`s3://bucket`).
        root: String,
        /// What `object_store` said.
        source: object_store::Error,
    },
    /// No memory for a whole object.
    #[error("object storage: {url}: {source}")]
    Memory {
        /// The object's URL.
        url: String,
        /// The failed reservation.
        source: std::collections::TryReserveError,
    },
    /// A build without the `object-store` feature.
    #[error(
        "{url}: this build of stoker reads no object storage (the `object-store` feature is off)"
    )]
    NotBuilt {
        /// The URL.
        url: String,
    },
}

impl From<RemoteError> for std::io::Error {
    fn from(e: RemoteError) -> Self {
        let kind = match &e {
            RemoteError::NotFound { .. } => std::io::ErrorKind::NotFound,
            RemoteError::Failed { .. } => std::io::ErrorKind::TimedOut,
            RemoteError::NoCredentials { .. } => std::io::ErrorKind::PermissionDenied,
            RemoteError::Url { .. }
            | RemoteError::Setup(_)
            | RemoteError::EnvNumber { .. }
            | RemoteError::NotBuilt { .. } => std::io::ErrorKind::InvalidInput,
            RemoteError::Runtime(_) | RemoteError::Memory { .. } => {
                std::io::ErrorKind::InvalidInput
            }
            #[cfg(feature = "object-store")]
            RemoteError::Store { .. } => std::io::ErrorKind::InvalidInput,
            _ => std::io::ErrorKind::Other,
        };
        std::io::Error::new(kind, e)
    }
}

#[cfg(feature = "object-store")]
mod client;
#[cfg(feature = "object-store")]
mod credentials;
#[cfg(feature = "object-store")]
mod integrity;
#[cfg(feature = "object-store")]
pub use client::{configure, hold, stats, upload, CacheConfig, RemoteConfig, RemoteStats};

/// Every object under the folder `url` (`/` added when it has none), sorted by URL.
pub fn list(url: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
    client::list(url)
}

/// What the store says of the object `url` (its size, modification time, ETag): asked
/// once, then remembered for the process (listing remembers what it lists).
pub fn stat(url: &str) -> Result<ObjectInfo, RemoteError> {
    client::info(url)
}

/// What the store says of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its URL.
    pub url: String,
    /// Bytes.
    pub size: u64,
    /// Last modified, ns since the epoch.
    pub mtime_ns: u128,
    /// Its ETag, when the store gives one.
    pub etag: Option<String>,
}

/// The stand-ins of a build without the feature: every URL is an error saying so.
#[cfg(not(feature = "object-store"))]
mod client {
    use super::{ObjectInfo, RemoteError};

    fn off<T>(url: &str) -> Result<T, RemoteError> {
        Err(RemoteError::NotBuilt { url: url.into() })
    }
    pub(crate) fn info(url: &str) -> Result<ObjectInfo, RemoteError> {
        off(url)
    }
    pub(crate) fn list(url: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        off(url)
    }
    pub(crate) fn read_all(url: &str, _max: u64) -> Result<Vec<u8>, RemoteError> {
        off(url)
    }
    pub(crate) fn read_at(url: &str, _offset: u64, _len: u64) -> Result<Vec<u8>, RemoteError> {
        off(url)
    }
    pub(crate) fn stream(url: &str) -> Result<std::io::Empty, RemoteError> {
        off(url)
    }
    pub(crate) fn forget_read_ahead(_url: &str) {}
    /// Uploads a file: in this build, an error saying object storage is not built in.
    pub fn upload(_local: &std::path::Path, url: &str) -> Result<(), RemoteError> {
        off(url)
    }
    /// Holds objects in memory: in this build, nothing to hold (no URL can be read).
    pub fn hold(_urls: &[String]) -> Result<(), RemoteError> {
        Ok(())
    }
}

pub(crate) use client::{forget_read_ahead, info, read_all, read_at, stream};
#[cfg(not(feature = "object-store"))]
pub use client::{hold, upload};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for url in [
            "s3://bucket/a.tar",
            "gs://b/",
            "az://c/p/",
            "https://host/x",
            "s3+x.y-z://b",
        ] {
            assert!(is_url(Path::new(url)), "{url}");
        }
        for folder in ["s3://b", "s3://b/", "s3://b/p/", "gs://b/p/q/"] {
            assert!(is_folder_url(folder), "{folder}");
        }
        for object in ["s3://b/a.tar", "s3://b/p/q", "https://h/x"] {
            assert!(!is_folder_url(object), "{object}");
        }
        for path in [
            "a.tar",
            "/data/s3://x",
            "C:\\data",
            "://x",
            "1s3://b",
            "./s3://b",
        ] {
            assert!(!is_url(Path::new(path)), "{path}");
        }
    }
}
