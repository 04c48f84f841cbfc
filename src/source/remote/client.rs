//! The object-storage client: stores by URL, bounded and retried requests, read-ahead,
//! whole objects held in memory (block order), the disk cache. Async inside (the
//! `object_store` crate is), blocking outside: reader threads call in and wait.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, ObjectStoreScheme};

use super::integrity::{self, Checks};
use super::{credentials, ObjectInfo, RemoteError};
use crate::rng::{fnv1a64, mix64};

mod cache;
mod config;
mod hold;
#[cfg(test)]
use config::env_number;
pub use config::{CacheConfig, RemoteConfig};
pub use hold::hold;

/// What the process's object-storage client has done (see [`stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteStats {
    /// Requests sent, retries included.
    pub requests: u64,
    /// Retries (requests sent again after a failure).
    pub retries: u64,
    /// Requests that failed for good (after the retries).
    pub failures: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// The most requests that were in flight at once.
    pub max_in_flight: u64,
    /// The most request bytes that were in flight at once.
    pub max_bytes_in_flight: u64,
    /// Reads served from the disk cache.
    pub cache_hits: u64,
    /// Objects written into the disk cache.
    pub cache_fills: u64,
    /// Reads served from objects held in memory (block order).
    pub held_hits: u64,
}

/// A request counted in flight until dropped (a request whose future is dropped, as
/// the other parts of a whole-object read are when one fails, stops counting too).
struct InFlight<'a> {
    c: &'a Counters,
    bytes: u64,
}

impl<'a> InFlight<'a> {
    fn new(c: &'a Counters, bytes: u64) -> Self {
        let n = c.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        c.max_in_flight.fetch_max(n, Ordering::Relaxed);
        let b = c.bytes_in_flight.fetch_add(bytes, Ordering::Relaxed) + bytes;
        c.max_bytes_in_flight.fetch_max(b, Ordering::Relaxed);
        InFlight { c, bytes }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.c.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.c
            .bytes_in_flight
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct Counters {
    /// Requests begun (for each one's own jitter).
    sequence: AtomicU64,
    requests: AtomicU64,
    retries: AtomicU64,
    failures: AtomicU64,
    bytes: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    bytes_in_flight: AtomicU64,
    max_bytes_in_flight: AtomicU64,
    cache_hits: AtomicU64,
    cache_fills: AtomicU64,
    held_hits: AtomicU64,
}

/// An object held in memory, or on its way.
enum Held {
    Loading,
    Ready(Bytes),
    Failed,
}

/// Objects held, by URL, each with the last [`hold`] call that asked for it; and the
/// number of calls.
type HeldObjects = (HashMap<String, (Held, u64)>, u64);

/// How many of the latest [`hold`] calls' objects stay held: the readers work a few
/// batches behind the planner that asks for them.
const HOLD_CALLS_KEPT: u64 = 4;

/// The process's client.
struct Remote {
    /// The I/O runtime, to run and spawn on.
    rt: tokio::runtime::Handle,
    /// Owns the runtime (see [`RuntimeOwner`]).
    _owner: RuntimeOwner,
    config: RemoteConfig,
    /// Stores by `scheme://authority`.
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    /// What listing and HEAD found, by URL: sizes for reads, ETags for `If-Match`.
    objects: Mutex<HashMap<String, ObjectInfo>>,
    requests: tokio::sync::Semaphore,
    /// Permits of 1 KiB.
    bytes: tokio::sync::Semaphore,
    bytes_permits: u32,
    counters: Counters,
    /// Whole objects held in memory (block order), each with the last [`hold`] call that
    /// asked for it, and the number of calls; who waits for them.
    held: Mutex<HeldObjects>,
    held_ready: Condvar,
    /// Objects the disk cache is fetching.
    filling: Mutex<HashSet<String>>,
    /// Whole objects' checks against their ETags, and what they learned.
    checks: Checks,
}

static STATE: Mutex<Option<Arc<Remote>>> = Mutex::new(None);

/// The client's runtime, shut down without waiting when the client goes: the last holder
/// of a client replaced by [`configure`] may be one of its own background tasks (a disk
/// cache fill), where dropping a runtime the ordinary way panics ("Cannot drop a runtime
/// in a context where blocking is not allowed").
struct RuntimeOwner(Option<tokio::runtime::Runtime>);

impl Drop for RuntimeOwner {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sets how object storage is read, for the rest of the process: stores, counters and
/// held objects start afresh (reads in progress finish under the old settings).
pub fn configure(config: RemoteConfig) -> Result<(), RemoteError> {
    let r = Remote::new(config)?;
    *lock(&STATE) = Some(Arc::new(r));
    Ok(())
}

/// What the client has done since it was set up (see [`configure`]).
pub fn stats() -> RemoteStats {
    let Some(r) = lock(&STATE).clone() else {
        return RemoteStats::default();
    };
    let c = &r.counters;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    RemoteStats {
        requests: get(&c.requests),
        retries: get(&c.retries),
        failures: get(&c.failures),
        bytes: get(&c.bytes),
        max_in_flight: get(&c.max_in_flight),
        max_bytes_in_flight: get(&c.max_bytes_in_flight),
        cache_hits: get(&c.cache_hits),
        cache_fills: get(&c.cache_fills),
        held_hits: get(&c.held_hits),
    }
}

fn remote() -> Result<Arc<Remote>, RemoteError> {
    let mut state = lock(&STATE);
    if let Some(r) = state.as_ref() {
        return Ok(Arc::clone(r));
    }
    let r = Arc::new(Remote::new(RemoteConfig::from_env()?)?);
    *state = Some(Arc::clone(&r));
    Ok(r)
}

/// The error's text with its sources', which say what the transport saw.
pub(super) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        let t = x.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = x.source();
    }
    s
}

/// Splits a URL into the key of its store (`scheme://authority`) and the object path.
fn split_url(url: &str) -> Result<(String, ObjectStoreScheme, ObjectPath, url::Url), RemoteError> {
    let bad = |why: String| RemoteError::Url {
        url: url.into(),
        why,
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad(chain(&e)))?;
    let path = ObjectPath::parse(path).map_err(|e| bad(chain(&e)))?;
    let root = parsed[..url::Position::BeforePath].to_string();
    Ok((root, scheme, path, parsed))
}

impl Remote {
    fn new(config: RemoteConfig) -> Result<Self, RemoteError> {
        config.check()?;
        // rustls without a provider chosen at build time (ring here; aws-lc-rs, its
        // default, is a long C build): install ring's, unless the program installed one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("stoker-remote")
            .enable_all()
            .build()
            .map_err(RemoteError::Runtime)?;
        let bytes_permits = u32::try_from(config.max_bytes_in_flight.div_ceil(1024))
            .unwrap_or(tokio::sync::Semaphore::MAX_PERMITS as u32)
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS as u32);
        Ok(Remote {
            rt: rt.handle().clone(),
            _owner: RuntimeOwner(Some(rt)),
            requests: tokio::sync::Semaphore::new(config.max_requests),
            bytes: tokio::sync::Semaphore::new(bytes_permits as usize),
            bytes_permits,
            config,
            stores: Mutex::new(HashMap::new()),
            objects: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            held: Mutex::new((HashMap::new(), 0)),
            held_ready: Condvar::new(),
            filling: Mutex::new(HashSet::new()),
            checks: Checks::default(),
        })
    }

    /// Runs `fut` to its end on the runtime, from any thread (one inside another async
    /// runtime too: it waits on a thread of its own rather than block that runtime).
    fn run<T: Send>(&self, fut: impl std::future::Future<Output = T> + Send) -> T {
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                let h = s.spawn(|| self.rt.block_on(fut));
                match h.join() {
                    Ok(v) => v,
                    Err(p) => std::panic::resume_unwind(p),
                }
            })
        } else {
            self.rt.block_on(fut)
        }
    }

    /// The store of `url` and the object's path in it.
    fn store(&self, url: &str) -> Result<(Arc<dyn ObjectStore>, ObjectPath), RemoteError> {
        let (root, scheme, path, parsed) = split_url(url)?;
        let mut stores = lock(&self.stores);
        if let Some(s) = stores.get(&root) {
            return Ok((Arc::clone(s), path));
        }
        let store = self.build(&root, scheme, &parsed)?;
        stores.insert(root, Arc::clone(&store));
        Ok((store, path))
    }

    fn build(
        &self,
        root: &str,
        scheme: ObjectStoreScheme,
        url: &url::Url,
    ) -> Result<Arc<dyn ObjectStore>, RemoteError> {
        let c = &self.config;
        // object_store's own retries are off: every retry is this client's, counted, with
        // the request's place in flight kept.
        let retry = object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        };
        let mut options: Vec<(String, String)> = vec![
            ("timeout".into(), format!("{}ms", c.timeout.as_millis())),
            (
                "connect_timeout".into(),
                format!("{}ms", c.connect_timeout.as_millis()),
            ),
        ];
        options.extend(c.options.iter().cloned());
        let setup = |source: object_store::Error| RemoteError::Store {
            root: root.to_string(),
            source,
        };
        // `$check` looks at the builder with every setting applied, before it builds.
        macro_rules! built {
            ($builder:expr, $check:expr) => {{
                let mut b = $builder.with_url(url.as_str()).with_retry(retry);
                for (k, v) in &options {
                    match k.to_ascii_lowercase().parse() {
                        Ok(key) => b = b.with_config(key, v.clone()),
                        Err(_) => log::warn!(
                            "{root}: store option {k:?} is not one this store takes; ignored"
                        ),
                    }
                }
                ($check)(&b)?;
                Arc::new(b.build().map_err(setup)?) as Arc<dyn ObjectStore>
            }};
        }
        fn unchecked<B>(_: &B) -> Result<(), RemoteError> {
            Ok(())
        }
        Ok(match scheme {
            ObjectStoreScheme::AmazonS3 => {
                built!(object_store::aws::AmazonS3Builder::from_env(), |b| {
                    credentials::check_s3(root, b)
                })
            }
            ObjectStoreScheme::GoogleCloudStorage => built!(
                object_store::gcp::GoogleCloudStorageBuilder::from_env(),
                unchecked
            ),
            ObjectStoreScheme::MicrosoftAzure => built!(
                object_store::azure::MicrosoftAzureBuilder::from_env(),
                unchecked
            ),
            ObjectStoreScheme::Http => {
                let mut b = object_store::http::HttpBuilder::new()
                    .with_url(root)
                    .with_retry(retry);
                for (k, v) in &options {
                    if let Ok(key) = k.to_ascii_lowercase().parse() {
                        b = b.with_config(key, v.clone());
                    }
                }
                Arc::new(b.build().map_err(setup)?) as Arc<dyn ObjectStore>
            }
            other => {
                return Err(RemoteError::Url {
                    url: url.to_string(),
                    why: format!("{other:?} is not an object store (a local path needs no URL)"),
                })
            }
        })
    }

    /// The wait before retry `attempt` (1, 2, ...): doubling from the first backoff up to
    /// the largest, drawn between half and all of it.
    fn backoff(&self, attempt: u32, salt: u64) -> Duration {
        let c = &self.config;
        let full = c
            .backoff
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(c.max_backoff);
        let u = (mix64(salt ^ u64::from(attempt)) >> 11) as f64 / (1u64 << 53) as f64;
        full.mul_f64(0.5 + 0.5 * u)
    }

    /// Runs `attempt` with a place in flight (one request, `bytes` of budget), `limit`
    /// for each try (the configured timeout; more for a listing of many pages or an upload
    /// of many parts), and retries with backoff while what fails is worth retrying.
    async fn request<T, F, Fut>(
        &self,
        url: &str,
        what: impl Fn() -> String,
        bytes: u64,
        limit: Duration,
        attempt: F,
    ) -> Result<T, RemoteError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let closed = |_| RemoteError::Setup("the client was shut down".into());
        let _req = self.requests.acquire().await.map_err(closed)?;
        let kib = u32::try_from(bytes.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .clamp(1, self.bytes_permits);
        let _budget = self.bytes.acquire_many(kib).await.map_err(closed)?;
        let c = &self.counters;
        let _counted = InFlight::new(c, bytes);
        // Jitter of its own for each request, so that reads of one shard that failed
        // together do not come back together.
        let salt = fnv1a64(url.as_bytes()) ^ mix64(c.sequence.fetch_add(1, Ordering::Relaxed));
        let mut tries = 0u32;
        let out = loop {
            tries += 1;
            c.requests.fetch_add(1, Ordering::Relaxed);
            let last = match tokio::time::timeout(limit, attempt()).await {
                Ok(Ok(v)) => break Ok(v),
                Ok(Err(Failure::Final(e))) => break Err(e),
                Ok(Err(Failure::Again(why))) => why,
                Err(_) => format!("no answer within {limit:?}"),
            };
            if tries > self.config.retries {
                break Err(RemoteError::Failed {
                    url: url.into(),
                    what: what(),
                    attempts: tries,
                    last,
                });
            }
            log::debug!("{url}: {} failed ({last}); retrying", what());
            c.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.backoff(tries, salt)).await;
        };
        if out.is_err() {
            c.failures.fetch_add(1, Ordering::Relaxed);
        }
        out
    }

    /// Bytes `range` of `url`, exactly (a shorter body is retried), from the object with
    /// `etag` when given.
    async fn get_range(
        &self,
        url: &str,
        range: Range<u64>,
        etag: Option<&str>,
    ) -> Result<Bytes, RemoteError> {
        self.get(url, range, etag, false).await
    }

    /// [`Remote::get_range`], or with `whole` the whole object (of `range.end` bytes) by a
    /// GET without a range.
    async fn get(
        &self,
        url: &str,
        range: Range<u64>,
        etag: Option<&str>,
        whole: bool,
    ) -> Result<Bytes, RemoteError> {
        let (store, path) = self.store(url)?;
        let (root, s3) = etag_kind(url);
        let want = range.end - range.start;
        let what = || match whole {
            true => format!("read of the object ({want} bytes)"),
            false => format!("read of bytes {}..{}", range.start, range.end),
        };
        let got = self
            .request(url, what, want, self.config.timeout, || {
                let opts = GetOptions {
                    range: (!whole).then(|| GetRange::Bounded(range.clone())),
                    if_match: etag.map(str::to_string),
                    ..Default::default()
                };
                let (store, path) = (Arc::clone(&store), path.clone());
                let root = root.as_str();
                async move {
                    let r = store
                        .get_opts(&path, opts)
                        .await
                        .map_err(|e| classify(url, e))?;
                    let tag = r.meta.e_tag.clone();
                    let b = r.bytes().await.map_err(|e| classify(url, e))?;
                    if b.len() as u64 != want {
                        return Err(Failure::Again(format!(
                            "{} bytes of the {want} asked for arrived",
                            b.len()
                        )));
                    }
                    if whole {
                        // A whole object has a checksum (where the store gives one).
                        let tag = tag.as_deref().or(etag);
                        self.checks
                            .check_body(root, s3, url, tag, &b)
                            .await
                            .map_err(|e| Failure::Again(e.to_string()))?;
                    }
                    Ok(b)
                }
            })
            .await?;
        self.counters.bytes.fetch_add(want, Ordering::Relaxed);
        Ok(got)
    }

    /// What the store says of `url` (remembered from listing, else asked).
    fn info(&self, url: &str) -> Result<ObjectInfo, RemoteError> {
        if let Some(i) = lock(&self.objects).get(url) {
            return Ok(i.clone());
        }
        let (store, path) = self.store(url)?;
        let meta = self.run(self.request(
            url,
            || "HEAD".into(),
            0,
            self.config.timeout,
            || {
                let (store, path) = (Arc::clone(&store), path.clone());
                async move { store.head(&path).await.map_err(|e| classify(url, e)) }
            },
        ))?;
        let info = to_info(url.to_string(), &meta);
        lock(&self.objects).insert(url.to_string(), info.clone());
        Ok(info)
    }

    /// Every object under `url` (a folder: `url` with a `/` added when it has none), sorted
    /// by URL.
    fn list(&self, url: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        let folder = if url.ends_with('/') {
            url.to_string()
        } else {
            format!("{url}/")
        };
        let (store, prefix) = self.store(&folder)?;
        let (root, ..) = split_url(&folder)?;
        let at = folder.as_str();
        // A listing is a page a request: it may take many requests' time.
        let limit = self.config.timeout.saturating_mul(LISTING_TIMEOUTS);
        let metas = self.run(self.request(
            at,
            || "listing".into(),
            0,
            limit,
            || {
                let (store, prefix) = (Arc::clone(&store), prefix.clone());
                async move {
                    let p = (!prefix.as_ref().is_empty()).then_some(&prefix);
                    store
                        .list(p)
                        .try_collect::<Vec<_>>()
                        .await
                        .map_err(|e| classify(at, e))
                }
            },
        ))?;
        let mut out: Vec<ObjectInfo> = metas
            .iter()
            .map(|m| to_info(format!("{root}/{}", m.location), m))
            .collect();
        out.sort_by(|a, b| a.url.cmp(&b.url));
        let mut objects = lock(&self.objects);
        for i in &out {
            objects.insert(i.url.clone(), i.clone());
        }
        Ok(out)
    }
}

/// The store of `url` (`scheme://authority`), and whether its ETags are MD5s of whole
/// objects (see [`integrity`]): those of S3 and S3-compatible stores, and of Google Cloud
/// Storage, whose XML API (the one `object_store` reads) gives a non-composite object's
/// MD5 as its ETag (a composite object's has another form, which is not checked; ETags
/// that prove not to be MD5s stop being checked, as for S3).
fn etag_kind(url: &str) -> (String, bool) {
    match split_url(url) {
        Ok((root, scheme, ..)) => (
            root,
            matches!(
                scheme,
                ObjectStoreScheme::AmazonS3 | ObjectStoreScheme::GoogleCloudStorage
            ),
        ),
        Err(_) => (String::new(), false),
    }
}

#[cfg(test)]
mod tests {
    /// S3's and GCS's ETags are checked as MD5s; Azure's and plain HTTP's are not.
    #[test]
    fn the_stores_whose_etags_are_md5s() {
        for (url, md5) in [
            ("s3://bucket/a/b.tar", true),
            ("gs://bucket/a/b.tar", true),
            ("az://container/a/b.tar", false),
            ("https://example.com/a/b.tar", false),
        ] {
            assert_eq!(super::etag_kind(url).1, md5, "{url}");
        }
    }

    /// A setting that is not a whole number names itself and keeps the parse error.
    #[test]
    fn a_setting_that_is_not_a_number_keeps_the_parse_error() {
        let e = super::env_number("STOKER_REMOTE_RETRIES", Some("three".into()))
            .expect_err("not a number");
        assert_eq!(
            e.to_string(),
            "object storage: STOKER_REMOTE_RETRIES=\"three\" is not a whole number"
        );
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<std::num::ParseIntError>().is_some());
        assert_eq!(
            super::env_number("X", Some(" 7 ".into())).ok(),
            Some(Some(7))
        );
        assert_eq!(super::env_number("X", None).ok(), Some(None));
    }
}

/// A listing's time limit, in request time limits.
const LISTING_TIMEOUTS: u32 = 20;

/// A failed try: worth another, or final.
enum Failure {
    Again(String),
    Final(RemoteError),
}

/// Sorts a store's error: what no retry can change is final.
fn classify(url: &str, e: object_store::Error) -> Failure {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => Failure::Final(RemoteError::NotFound { url: url.into() }),
        E::Precondition { .. } => Failure::Final(RemoteError::Changed {
            url: url.into(),
            last: chain(&e),
        }),
        E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::InvalidPath { .. }
        | E::NotSupported { .. }
        | E::NotImplemented { .. }
        | E::UnknownConfigurationKey { .. } => Failure::Final(RemoteError::Failed {
            url: url.into(),
            what: "request".into(),
            attempts: 1,
            last: chain(&e),
        }),
        e => Failure::Again(chain(&e)),
    }
}

fn to_info(url: String, m: &object_store::ObjectMeta) -> ObjectInfo {
    ObjectInfo {
        url,
        size: m.size,
        mtime_ns: m
            .last_modified
            .timestamp_nanos_opt()
            .and_then(|n| u128::try_from(n).ok())
            .unwrap_or(0),
        etag: m.e_tag.clone(),
    }
}

/// What the store says of `url`.
pub(crate) fn info(url: &str) -> Result<ObjectInfo, RemoteError> {
    remote()?.info(url)
}

/// Every object under the folder `url`, sorted by URL.
pub(crate) fn list(url: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
    remote()?.list(url)
}

/// The whole object `url`, refused (before reading it) when larger than `max_bytes`.
pub(crate) fn read_all(url: &str, max_bytes: u64) -> Result<Vec<u8>, RemoteError> {
    let r = remote()?;
    let info = r.info(url)?;
    if info.size > max_bytes {
        return Err(RemoteError::TooLarge {
            url: url.into(),
            bytes: info.size,
            limit: max_bytes,
        });
    }
    Ok(r.read(&info, 0, info.size, false)?.to_vec())
}

/// `len` bytes of `url` from `offset`, through this thread's read-ahead: a read that
/// starts where this thread's last read of the object ended (or up to [`COALESCE_GAP`]
/// after) fetches [`RemoteConfig::read_ahead`] bytes, which serve the reads after it.
pub(crate) fn read_at(url: &str, offset: u64, len: u64) -> Result<Vec<u8>, RemoteError> {
    let r = remote()?;
    let info = r.info(url)?;
    let end = offset
        .checked_add(len)
        .filter(|e| *e <= info.size)
        .ok_or_else(|| RemoteError::Failed {
            url: url.into(),
            what: format!("read of {len} bytes at {offset}"),
            attempts: 0,
            last: format!("the object has {} bytes", info.size),
        })?;
    AHEAD.with(|cell| {
        let mut ahead = cell.borrow_mut();
        if let Some(a) = ahead.as_ref().filter(|a| a.url == url) {
            if offset >= a.start && end <= a.start + a.data.len() as u64 {
                let from = (offset - a.start) as usize;
                let bytes = a.data.slice(from..from + len as usize).to_vec();
                if let Some(a) = ahead.as_mut() {
                    a.end = end;
                }
                return Ok(bytes);
            }
        }
        // A read that starts at or a little after where the last one ended (the next tar
        // member after the headers and members between) continues a run.
        let sequential = ahead
            .as_ref()
            .is_some_and(|a| a.url == url && offset >= a.end && offset - a.end <= COALESCE_GAP);
        let data = r.read(&info, offset, len, sequential)?;
        let out = data.slice(0..len as usize).to_vec();
        *ahead = Some(Ahead {
            url: url.to_string(),
            start: offset,
            data,
            end,
        });
        Ok(out)
    })
}

/// Drops what this thread read ahead of `url`, so that its next read asks the store
/// again (a read whose bytes failed a check of the caller's: a fresh copy, not the same
/// damaged one).
pub(crate) fn forget_read_ahead(url: &str) {
    AHEAD.with(|cell| {
        let mut ahead = cell.borrow_mut();
        if ahead.as_ref().is_some_and(|a| a.url == url) {
            *ahead = None;
        }
    });
}

/// How far past the end of the last read a read may start and still continue its run
/// (what lies between is read and thrown away).
const COALESCE_GAP: u64 = 1 << 20;

/// A thread's last read of an object, with what it read ahead.
struct Ahead {
    url: String,
    start: u64,
    data: Bytes,
    /// Where the last read ended.
    end: u64,
}

thread_local! {
    static AHEAD: std::cell::RefCell<Option<Ahead>> = const { std::cell::RefCell::new(None) };
}

impl Remote {
    /// At least `len` bytes of the object from `offset` (more when `ahead`: up to
    /// [`RemoteConfig::read_ahead`]): from the object held in memory, the disk cache, or
    /// the store.
    fn read(
        self: &Arc<Self>,
        info: &ObjectInfo,
        offset: u64,
        len: u64,
        ahead: bool,
    ) -> Result<Bytes, RemoteError> {
        let end = offset + len;
        if let Some(whole) = self.held(&info.url).filter(|w| end <= w.len() as u64) {
            self.counters.held_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(whole.slice(offset as usize..end as usize));
        }
        if let Some(b) = self.cached(info, offset, len)? {
            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(b);
        }
        let end = if ahead {
            end.max(offset.saturating_add(self.config.read_ahead))
                .min(info.size)
        } else {
            end
        };
        // The whole object (a loose file, a shard that fits a read ahead): one GET, checked.
        let whole = offset == 0 && end == info.size;
        self.run(self.get(&info.url, offset..end, info.etag.as_deref(), whole))
    }
}

// ---------------------------------------------------------------------------------------
// Streaming and uploading.

/// A reader of a whole object in reads of [`RemoteConfig::read_ahead`] bytes (indexing a
/// shard without a sidecar): seeking within what was read costs nothing.
pub(crate) struct ObjectReader {
    remote: Arc<Remote>,
    info: ObjectInfo,
    pos: u64,
    start: u64,
    data: Bytes,
}

/// A reader of the object `url` from its start.
pub(crate) fn stream(url: &str) -> Result<ObjectReader, RemoteError> {
    let remote = remote()?;
    let info = remote.info(url)?;
    Ok(ObjectReader {
        remote,
        info,
        pos: 0,
        start: 0,
        data: Bytes::new(),
    })
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.info.size || buf.is_empty() {
            return Ok(0);
        }
        let have = self.start..self.start + self.data.len() as u64;
        if !have.contains(&self.pos) {
            let len = self.remote.config.read_ahead.min(self.info.size - self.pos);
            self.data = self.remote.read(&self.info, self.pos, len, false)?;
            self.start = self.pos;
        }
        let from = (self.pos - self.start) as usize;
        let n = buf.len().min(self.data.len() - from);
        buf[..n].copy_from_slice(&self.data[from..from + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ObjectReader {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
            SeekFrom::End(d) => self.info.size.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| std::io::Error::other("seek out of range"))?;
        Ok(self.pos)
    }
}

/// Uploads the file `local` to `url` in parts: complete, or aborted (nothing left at
/// `url`). A failed upload is begun again from the start, with the retries and backoff
/// of every request; each try's time limit grows with the file (a request's limit per
/// 8 MiB part).
pub fn upload(local: &Path, url: &str) -> Result<(), RemoteError> {
    let r = remote()?;
    let (store, path) = r.store(url)?;
    let size = std::fs::metadata(local)
        .map_err(|e| RemoteError::Failed {
            url: url.into(),
            what: format!("upload of {}", local.display()),
            attempts: 0,
            last: e.to_string(),
        })?
        .len();
    const PART: u64 = 8 << 20;
    let parts = u32::try_from(size.div_ceil(PART)).unwrap_or(u32::MAX);
    let limit = r.config.timeout.saturating_mul(parts.saturating_add(1));
    let what = || format!("upload of {}", local.display());
    r.run(r.request(url, what, 0, limit, || {
        let (store, path) = (Arc::clone(&store), path.clone());
        async move {
            let again = |e: String| Failure::Again(e);
            let mut file = std::fs::File::open(local).map_err(|e| {
                Failure::Final(RemoteError::Failed {
                    url: url.into(),
                    what: format!("upload of {}", local.display()),
                    attempts: 1,
                    last: e.to_string(),
                })
            })?;
            let upload = store
                .put_multipart(&path)
                .await
                .map_err(|e| classify(url, e))?;
            let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, PART as usize);
            let mut buf = vec![0u8; PART as usize];
            loop {
                let n = match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => {
                        let _ = w.abort().await;
                        return Err(again(e.to_string()));
                    }
                };
                if let Err(e) = w.wait_for_capacity(4).await {
                    let _ = w.abort().await;
                    return Err(classify(url, e));
                }
                w.write(&buf[..n]);
            }
            w.finish().await.map_err(|e| classify(url, e))?;
            Ok(())
        }
    }))?;
    lock(&r.objects).remove(url);
    Ok(())
}
