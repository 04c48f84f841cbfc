//! How object storage is read: the client's settings, their defaults and the
//! `STOKER_REMOTE_*` and `STOKER_CACHE_*` variables.

use super::*;

/// How object storage is read. [`RemoteConfig::default`] is what a URL gets unless
/// [`configure`] says otherwise; [`RemoteConfig::from_env`] is the default with the
/// `STOKER_REMOTE_*` and `STOKER_CACHE_*` variables applied.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RemoteConfig {
    /// Requests in flight in the process at most (default 64; a retry keeps its place).
    /// `STOKER_REMOTE_MAX_REQUESTS`.
    pub max_requests: usize,
    /// Bytes of requests in flight at most (default 256 MiB; a larger single request takes
    /// the whole budget). `STOKER_REMOTE_MAX_BYTES`.
    pub max_bytes_in_flight: u64,
    /// Each request's time limit, headers and body (default 30 s).
    /// `STOKER_REMOTE_TIMEOUT_MS`.
    pub timeout: Duration,
    /// Connecting's time limit (default 5 s).
    pub connect_timeout: Duration,
    /// Retries of a failed request (default 6): timeouts, throttling (429, 503 SlowDown),
    /// server errors (5xx), connections refused or reset, bodies cut short.
    /// `STOKER_REMOTE_RETRIES`.
    pub retries: u32,
    /// The first retry's wait (default 50 ms), doubled each retry up to
    /// [`RemoteConfig::max_backoff`] (default 5 s), each wait drawn between half and all
    /// of it.
    pub backoff: Duration,
    /// See [`RemoteConfig::backoff`].
    pub max_backoff: Duration,
    /// Bytes one read fetches when reads of a shard follow each other, and the size of
    /// the reads that index a shard without a sidecar (default 8 MiB).
    pub read_ahead: u64,
    /// Options for the stores, as `object_store` names them (`aws_endpoint`,
    /// `aws_region`, `aws_allow_http`, `google_service_account`, ...): applied after the
    /// environment's.
    pub options: Vec<(String, String)>,
    /// The disk cache of whole objects; `None` (the default) for none.
    /// `STOKER_CACHE_DIR` and `STOKER_CACHE_MAX_BYTES` (default 10 GiB).
    pub cache: Option<CacheConfig>,
}

/// A disk cache of whole objects, keyed by URL and ETag (or size and modification time).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheConfig {
    /// Its folder (made when missing).
    pub dir: PathBuf,
    /// Bytes it holds at most: the least recently used objects are removed past it, and
    /// an object larger than it is not cached.
    pub max_bytes: u64,
}

impl CacheConfig {
    /// A cache in `dir` of at most `max_bytes`.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        CacheConfig {
            dir: dir.into(),
            max_bytes,
        }
    }
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            max_requests: 64,
            max_bytes_in_flight: 256 << 20,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retries: 6,
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
            read_ahead: 8 << 20,
            options: Vec::new(),
            cache: None,
        }
    }
}

impl RemoteConfig {
    /// The default with the environment's settings: `STOKER_REMOTE_MAX_REQUESTS`,
    /// `STOKER_REMOTE_MAX_BYTES`, `STOKER_REMOTE_TIMEOUT_MS`, `STOKER_REMOTE_RETRIES`,
    /// `STOKER_CACHE_DIR`, `STOKER_CACHE_MAX_BYTES`. A value that is not a number is an
    /// error naming it.
    pub fn from_env() -> Result<Self, RemoteError> {
        let num = |name: &str| env_number(name, std::env::var(name).ok());
        let mut c = RemoteConfig::default();
        if let Some(n) = num("STOKER_REMOTE_MAX_REQUESTS")? {
            c.max_requests = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = num("STOKER_REMOTE_MAX_BYTES")? {
            c.max_bytes_in_flight = n;
        }
        if let Some(n) = num("STOKER_REMOTE_TIMEOUT_MS")? {
            c.timeout = Duration::from_millis(n);
        }
        if let Some(n) = num("STOKER_REMOTE_RETRIES")? {
            c.retries = u32::try_from(n).unwrap_or(u32::MAX);
        }
        if let Some(dir) = std::env::var_os("STOKER_CACHE_DIR").filter(|d| !d.is_empty()) {
            let max = num("STOKER_CACHE_MAX_BYTES")?.unwrap_or(10 << 30);
            c.cache = Some(CacheConfig::new(dir, max));
        }
        Ok(c)
    }

    pub(super) fn check(&self) -> Result<(), RemoteError> {
        let bad = |what: &str| Err(RemoteError::Setup(format!("{what} must be at least 1")));
        if self.max_requests == 0 {
            return bad("max_requests");
        }
        if self.max_bytes_in_flight == 0 {
            return bad("max_bytes_in_flight");
        }
        if self.read_ahead == 0 {
            return bad("read_ahead");
        }
        if self.timeout.is_zero() {
            return bad("timeout");
        }
        Ok(())
    }
}

/// The whole number an environment variable `name` holds (`value`, `None` when unset).
pub(super) fn env_number(name: &str, value: Option<String>) -> Result<Option<u64>, RemoteError> {
    let Some(value) = value else {
        return Ok(None);
    };
    match value.trim().parse::<u64>() {
        Ok(n) => Ok(Some(n)),
        Err(source) => Err(RemoteError::EnvNumber {
            name: name.to_string(),
            value,
            source,
        }),
    }
}
