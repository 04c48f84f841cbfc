//! Whole objects held in memory for block order: [`hold`] and the reads it serves.

use super::cache::{evict, touch, write_whole};
use super::*;

/// Fetches the objects `urls` whole into memory, in the background (with the same bounds
/// and retries as every read): reads of a held object wait for it and are served from
/// memory. Objects that none of the last few calls asked for are let go (the readers
/// work a few batches behind whoever asks). An object that cannot be fetched is read by
/// range as if never held (and its reads report what fails).
pub fn hold(urls: &[String]) -> Result<(), RemoteError> {
    let r = remote()?;
    let mut infos = Vec::new();
    for url in urls {
        match r.info(url) {
            Ok(i) => infos.push(i),
            Err(e) => log::debug!("{url}: not held ({e})"),
        }
    }
    let mut guard = lock(&r.held);
    let (held, calls) = &mut *guard;
    *calls += 1;
    let call = *calls;
    for info in infos {
        if let Some(h) = held.get_mut(&info.url) {
            h.1 = call;
            continue;
        }
        held.insert(info.url.clone(), (Held::Loading, call));
        let r2 = Arc::clone(&r);
        r.rt.spawn(async move {
            let got = r2.fetch_whole(&info).await;
            let mut guard = lock(&r2.held);
            if let Some(slot) = guard.0.get_mut(&info.url) {
                slot.0 = match got {
                    Ok(b) => Held::Ready(b),
                    Err(e) => {
                        log::warn!("{}: not held in memory ({e}); read by range", info.url);
                        Held::Failed
                    }
                };
            }
            r2.held_ready.notify_all();
        });
    }
    held.retain(|_, h| h.1 + HOLD_CALLS_KEPT > call);
    Ok(())
}

impl Remote {
    /// The held object `url`, waiting while it is on its way.
    pub(super) fn held(&self, url: &str) -> Option<Bytes> {
        let mut guard = lock(&self.held);
        loop {
            match &guard.0.get(url)?.0 {
                Held::Ready(b) => return Some(b.clone()),
                Held::Failed => return None,
                Held::Loading => {
                    guard = self
                        .held_ready
                        .wait(guard)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            }
        }
    }

    /// The whole object (block order): from the disk cache when it holds it; else fetched,
    /// and put into the cache.
    async fn fetch_whole(&self, info: &ObjectInfo) -> Result<Bytes, RemoteError> {
        let file = self.cache_file(info);
        if let Some(f) = &file {
            if let Ok(b) = std::fs::read(f) {
                if b.len() as u64 == info.size {
                    if let Ok(h) = std::fs::File::open(f) {
                        touch(&h);
                    }
                    self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(Bytes::from(b));
                }
            }
        }
        let whole = self.download_checked(info).await?;
        if let (Some(f), Some(c)) = (&file, &self.config.cache) {
            let claimed = lock(&self.filling).insert(info.url.clone());
            if claimed {
                match write_whole(f, &whole) {
                    Ok(()) => {
                        self.counters.cache_fills.fetch_add(1, Ordering::Relaxed);
                        evict(&c.dir, c.max_bytes, f);
                    }
                    Err(e) => log::warn!("{}: not cached ({e})", info.url),
                }
                lock(&self.filling).remove(&info.url);
            }
        }
        Ok(whole)
    }

    /// [`Remote::download_whole`], checked against the object's ETag where that is a
    /// checksum: an object that fails it is fetched again (with the retries and backoff of
    /// a request), never kept.
    async fn download_checked(&self, info: &ObjectInfo) -> Result<Bytes, RemoteError> {
        let (root, s3) = etag_kind(&info.url);
        let etag = info.etag.as_deref();
        let mut tries = 0u32;
        loop {
            tries += 1;
            let whole = self.download_whole(info).await?;
            let check = self.checks.check_body(&root, s3, &info.url, etag, &whole);
            let last = match check.await {
                Ok(()) => return Ok(whole),
                Err(why) => why.to_string(),
            };
            if tries > self.config.retries {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                return Err(RemoteError::Failed {
                    url: info.url.clone(),
                    what: format!("read of the object ({} bytes)", info.size),
                    attempts: tries,
                    last,
                });
            }
            log::debug!("{}: {last}; fetched again", info.url);
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            let salt = fnv1a64(info.url.as_bytes());
            tokio::time::sleep(self.backoff(tries, salt)).await;
        }
    }

    /// The whole object, in reads of [`RemoteConfig::read_ahead`] bytes, several at once.
    async fn download_whole(&self, info: &ObjectInfo) -> Result<Bytes, RemoteError> {
        let step = self.config.read_ahead;
        let ranges: Vec<Range<u64>> = (0..info.size.div_ceil(step))
            .map(|k| k * step..((k + 1) * step).min(info.size))
            .collect();
        let parts = futures_util::future::try_join_all(
            ranges
                .into_iter()
                .map(|r| self.get_range(&info.url, r, info.etag.as_deref())),
        )
        .await?;
        let mut whole = Vec::new();
        whole
            .try_reserve_exact(usize::try_from(info.size).unwrap_or(usize::MAX))
            .map_err(|source| RemoteError::Memory {
                url: info.url.clone(),
                source,
            })?;
        for p in parts {
            whole.extend_from_slice(&p);
        }
        Ok(Bytes::from(whole))
    }
}
