//! The disk cache of whole objects: file names by URL and ETag, background fills
//! checked against the store's checksum, eviction of the least recently used.

use super::*;

impl Remote {
    /// The cache file of an object: named by a hash of its URL and its ETag (else its size
    /// and modification time), so that a changed object is another file.
    pub(super) fn cache_file(&self, info: &ObjectInfo) -> Option<PathBuf> {
        let c = self.config.cache.as_ref()?;
        if info.size > c.max_bytes || info.size == 0 {
            return None;
        }
        let key = match &info.etag {
            Some(e) => format!("{}\n{e}", info.url),
            None => format!("{}\n{}\n{}", info.url, info.size, info.mtime_ns),
        };
        let a = fnv1a64(key.as_bytes());
        let b = mix64(a ^ fnv1a64(format!("stoker-cache\n{key}").as_bytes()));
        Some(c.dir.join(format!("{a:016x}{b:016x}.obj")))
    }

    /// `len` bytes at `offset` from the cached object, when it is cached; otherwise starts
    /// fetching it into the cache (in the background) and says `None`.
    pub(super) fn cached(
        self: &Arc<Self>,
        info: &ObjectInfo,
        offset: u64,
        len: u64,
    ) -> Result<Option<Bytes>, RemoteError> {
        let Some(file) = self.cache_file(info) else {
            return Ok(None);
        };
        match std::fs::File::open(&file) {
            Ok(mut f) if f.metadata().is_ok_and(|m| m.len() == info.size) => {
                let mut buf = vec![0u8; len as usize];
                let read = f
                    .seek(SeekFrom::Start(offset))
                    .and_then(|_| f.read_exact(&mut buf));
                match read {
                    Ok(()) => {
                        touch(&f);
                        return Ok(Some(Bytes::from(buf)));
                    }
                    Err(e) => log::warn!("{}: cache read failed ({e})", file.display()),
                }
            }
            _ => {}
        }
        if lock(&self.filling).insert(info.url.clone()) {
            let (r, info) = (Arc::clone(self), info.clone());
            self.rt.spawn(async move {
                match r.fill(&info, &file).await {
                    Ok(()) => {
                        r.counters.cache_fills.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => log::warn!("{}: not cached ({e})", info.url),
                }
                lock(&r.filling).remove(&info.url);
            });
        }
        Ok(None)
    }

    /// Fetches the object whole into `file` (written beside it, renamed into place), then
    /// removes the least recently used objects past the cache's bound.
    async fn fill(&self, info: &ObjectInfo, file: &Path) -> Result<(), FillError> {
        let Some(c) = self.config.cache.as_ref() else {
            return Ok(());
        };
        std::fs::create_dir_all(&c.dir).map_err(|source| FillError::Dir {
            dir: c.dir.clone(),
            source,
        })?;
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        // An object that fails its checksum is not cached (a later read fetches it again).
        let (root, s3) = etag_kind(&info.url);
        let want = self
            .checks
            .expected(&root, s3, info.etag.as_deref(), info.size);
        let written = async {
            use std::io::Write;
            let mut out = std::fs::File::create(&tmp)?;
            let mut hash = want.as_ref().map(integrity::Hasher::new);
            let step = self.config.read_ahead;
            let mut at = 0;
            while at < info.size {
                let end = (at + step).min(info.size);
                let part = self
                    .get_range(&info.url, at..end, info.etag.as_deref())
                    .await?;
                if let Some(h) = hash.as_mut() {
                    h.update(&part);
                }
                out.write_all(&part)?;
                at = end;
            }
            if let (Some(h), Some(w)) = (hash, &want) {
                self.checks.judge(&root, &info.url, w, h.finish())?;
            }
            out.sync_all()?;
            std::fs::rename(&tmp, file)?;
            Ok::<(), FillError>(())
        }
        .await;
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written?;
        evict(&c.dir, c.max_bytes, file);
        Ok(())
    }
}

/// Why an object was not put in the cache.
#[derive(Debug, thiserror::Error)]
pub(super) enum FillError {
    /// The cache folder could not be made.
    #[error("{}: {source}", dir.display())]
    Dir {
        /// The cache folder.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The cache file could not be written.
    #[error(transparent)]
    Write(#[from] std::io::Error),
    /// A read of the object failed.
    #[error(transparent)]
    Read(#[from] RemoteError),
    /// The object's bytes are not its ETag's.
    #[error(transparent)]
    Checksum(#[from] integrity::ChecksumError),
}

/// Writes a cache file whole: beside it first, renamed into place.
pub(super) fn write_whole(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = file.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, file));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Marks a cache file used now (its modification time is its last use).
pub(super) fn touch(f: &std::fs::File) {
    let _ = f.set_modified(SystemTime::now());
}

/// Removes the least recently used cache files of `dir` until at most `max_bytes` remain,
/// keeping `keep` (just written).
pub(super) fn evict(dir: &Path, max_bytes: u64, keep: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(SystemTime, u64, PathBuf)> = rd
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "obj"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((m.modified().unwrap_or(UNIX_EPOCH), m.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    files.sort();
    for (_, len, path) in files {
        if total <= max_bytes {
            break;
        }
        if path != keep && std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}
