//! Walking a folder tree to list it, bounded whatever the tree holds.
//!
//! Every real folder (device and inode) is entered once: a link to a folder already
//! listed (the dataset folder, one of its parents inside it, a folder another link led
//! to first) is not followed but reported ([`SkipReason::Listed`]), so links that branch
//! back up (`up1 -> ..`, `up2 -> ..`, `here -> .`) cannot make the walk branch. Links to
//! folders are followed after the real folders, so a folder is listed under its own path
//! rather than a link's. A link to a folder outside the dataset folder is not followed
//! unless [`WalkOptions::follow_links_outside`] says so ([`SkipReason::LinkOutside`]): a
//! link to `/` lists nothing. Folders nested deeper than [`WalkOptions::max_depth`] are
//! reported ([`SkipReason::TooDeep`]) and the rest listed. The walk as a whole stops with
//! [`Error::Listing`] past [`WalkOptions::max_entries`] entries or
//! [`WalkOptions::max_time`].

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{SkipReason, Skipped};
use crate::error::{Error, ListingBound, Result};

/// The bounds of a folder listing ([`crate::Dataset::flat_with`],
/// [`crate::Dataset::image_folder_with`]); [`WalkOptions::default`] is what
/// [`crate::Dataset::flat`] and [`crate::Dataset::image_folder`] use.
///
/// ```
/// let mut options = stoker::source::WalkOptions::default();
/// options.follow_links_outside = true;
/// assert_eq!(options.max_depth, 64);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalkOptions {
    /// Folders nested deeper than this below the dataset folder are not entered: each is
    /// reported ([`SkipReason::TooDeep`]) and the rest listed. Default 64.
    pub max_depth: usize,
    /// The most folder entries (files, folders, links, hidden ones included) the walk
    /// looks at; past it the listing stops with [`Error::Listing`]. Default 20 million.
    pub max_entries: u64,
    /// The longest the walk may take; past it the listing stops with [`Error::Listing`].
    /// Default 30 minutes.
    pub max_time: Duration,
    /// Whether links to folders outside the dataset folder are followed (each folder is
    /// still entered once, and the bounds hold). Default `false`: such a link is reported
    /// ([`SkipReason::LinkOutside`]) and not followed.
    pub follow_links_outside: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            max_depth: 64,
            max_entries: 20_000_000,
            max_time: Duration::from_secs(30 * 60),
            follow_links_outside: false,
        }
    }
}

/// File extensions taken as images (case-insensitive): JPEG, PNG, WebP, BMP, TIFF, GIF.
/// Listing a folder skips other files and reports them ([`crate::Dataset::skipped`]).
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "jpg", "jpeg", "jpe", "jfif", "png", "webp", "bmp", "dib", "tif", "tiff", "gif",
];

/// `None` for an image file; else the lower-cased extension (empty when none).
pub(crate) fn not_image(path: &Path) -> Option<String> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if IMAGE_EXTENSIONS.iter().any(|x| *x == ext) {
        None
    } else {
        Some(ext)
    }
}

/// The path of `path` relative to `root`, with `/` separators.
pub(crate) fn relative(root: &Path, path: &Path) -> Result<String> {
    let rel = path
        .strip_prefix(root)
        .map_err(|_| Error::source_at(path, format!("not under {}", root.display())))?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Ok(parts.join("/"))
}

/// What identifies a real folder: its device and inode.
#[cfg(unix)]
type Key = (u64, u64);
#[cfg(not(unix))]
type Key = PathBuf;

#[cfg(unix)]
fn key_of(_: &Path, meta: &std::fs::Metadata) -> Key {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn key_of(path: &Path, _: &std::fs::Metadata) -> Key {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A folder entry, as the folder lists it.
pub(crate) struct DirEntry {
    pub(crate) path: PathBuf,
    /// Whether the entry itself is a symbolic link.
    pub(crate) link: bool,
}

/// What a folder entry is, following symlinks: only folders and regular files are
/// entered or taken.
pub(crate) enum Kind {
    Folder(std::fs::Metadata),
    File,
    /// Neither: why it is skipped.
    Other(SkipReason),
}

pub(crate) fn kind_of(p: &Path) -> Kind {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Kind::Folder(m),
        Ok(m) if m.is_file() => Kind::File,
        Ok(m) => Kind::Other(SkipReason::NotAFile(
            super::fsio::kind_of(&m.file_type()).to_string(),
        )),
        Err(e) => Kind::Other(SkipReason::Unreadable(e.to_string())),
    }
}

pub(crate) fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// A link to a folder met during the walk, followed after the real folders.
struct Pending {
    path: PathBuf,
    depth: usize,
    tag: usize,
}

/// One listing's walk of a folder tree: what it entered, what it left out, and its bounds.
pub(crate) struct Walker<'a> {
    root: &'a Path,
    /// The dataset folder with every link resolved: links to folders below it are inside.
    real_root: PathBuf,
    options: &'a WalkOptions,
    /// Folders entered, each with its path relative to the root.
    seen: HashMap<Key, String>,
    links: VecDeque<Pending>,
    entries: u64,
    started: Instant,
    /// Stop at the first image found (a probe of what a folder holds).
    first_only: bool,
    /// What listing left out.
    pub(crate) skipped: Vec<Skipped>,
}

impl<'a> Walker<'a> {
    /// A walk of `root`, a folder (entered by the caller, at depth 0).
    pub(crate) fn new(root: &'a Path, options: &'a WalkOptions) -> Result<Self> {
        let meta = std::fs::metadata(root).map_err(|e| Error::io(root, e))?;
        let real_root = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
        let mut seen = HashMap::new();
        seen.insert(key_of(root, &meta), String::new());
        Ok(Walker {
            root,
            real_root,
            options,
            seen,
            links: VecDeque::new(),
            entries: 0,
            started: Instant::now(),
            first_only: false,
            skipped: Vec::new(),
        })
    }

    /// The walk stops at the first image it finds.
    pub(crate) fn first_only(mut self) -> Self {
        self.first_only = true;
        self
    }

    /// Reports `path` (a folder's path ends in `/`).
    pub(crate) fn skip(&mut self, path: &Path, folder: bool, reason: SkipReason) -> Result<()> {
        let mut rel = relative(self.root, path)?;
        if folder {
            rel.push('/');
        }
        self.skipped.push(Skipped { path: rel, reason });
        Ok(())
    }

    /// Counts one entry against the bounds.
    fn count(&mut self) -> Result<()> {
        self.entries += 1;
        let elapsed = self.started.elapsed();
        let bound = if self.entries > self.options.max_entries {
            ListingBound::Entries(self.options.max_entries)
        } else if elapsed > self.options.max_time {
            ListingBound::Time(self.options.max_time)
        } else {
            return Ok(());
        };
        Err(Error::Listing {
            path: self.root.to_path_buf(),
            bound,
            entries: self.entries,
            elapsed,
        })
    }

    /// The sorted entries of `dir`; hidden ones are reported and left out.
    pub(crate) fn read_dir(&mut self, dir: &Path) -> Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            self.count()?;
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            let path = entry.path();
            let link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if is_hidden(&path) {
                let folder = std::fs::metadata(&path).is_ok_and(|m| m.is_dir());
                self.skip(&path, folder, SkipReason::Hidden)?;
            } else {
                out.push(DirEntry { path, link });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Whether the folder `path` (at `depth`) is to be entered: deep enough, not entered
    /// before, and (a link) leading inside the root unless links outside are followed.
    /// Marks it entered; else reports why not.
    pub(crate) fn admit(
        &mut self,
        path: &Path,
        meta: &std::fs::Metadata,
        link: bool,
        depth: usize,
    ) -> Result<bool> {
        if depth > self.options.max_depth {
            self.skip(path, true, SkipReason::TooDeep(self.options.max_depth))?;
            return Ok(false);
        }
        let key = key_of(path, meta);
        if let Some(first) = self.seen.get(&key) {
            let first = first.clone();
            self.skip(path, true, SkipReason::Listed(first))?;
            return Ok(false);
        }
        if link && !self.options.follow_links_outside {
            match std::fs::canonicalize(path) {
                Ok(real) if real.starts_with(&self.real_root) => {}
                Ok(real) => {
                    let to = real.display().to_string();
                    self.skip(path, true, SkipReason::LinkOutside(to))?;
                    return Ok(false);
                }
                Err(e) => {
                    self.skip(path, true, SkipReason::Unreadable(e.to_string()))?;
                    return Ok(false);
                }
            }
        }
        let mut rel = relative(self.root, path)?;
        rel.push('/');
        self.seen.insert(key, rel);
        Ok(true)
    }

    /// Every image file below `dir` (entered, at `depth`) into `out`, tagged `tag`: its
    /// real sub-folders now, the links to folders queued for [`Walker::follow_links`].
    /// A folder that cannot be read is reported, unless it is the root.
    pub(crate) fn walk(
        &mut self,
        dir: &Path,
        depth: usize,
        tag: usize,
        out: &mut Vec<(usize, PathBuf)>,
    ) -> Result<()> {
        let entries = match self.read_dir(dir) {
            Ok(e) => e,
            Err(Error::Io { source, .. }) if depth > 0 => {
                return self.skip(dir, true, SkipReason::Unreadable(source.to_string()));
            }
            Err(e) => return Err(e),
        };
        for DirEntry { path, link } in entries {
            if self.first_only && !out.is_empty() {
                return Ok(());
            }
            match kind_of(&path) {
                Kind::Folder(_) if link => self.links.push_back(Pending {
                    path,
                    depth: depth + 1,
                    tag,
                }),
                Kind::Folder(meta) => {
                    if self.admit(&path, &meta, false, depth + 1)? {
                        self.walk(&path, depth + 1, tag, out)?;
                    }
                }
                Kind::File => match not_image(&path) {
                    None => out.push((tag, path)),
                    Some(ext) => self.skip(&path, false, SkipReason::Extension(ext))?,
                },
                Kind::Other(reason) => self.skip(&path, false, reason)?,
            }
        }
        Ok(())
    }

    /// Follows the links to folders [`Walker::walk`] queued (and those met below them),
    /// each folder once.
    pub(crate) fn follow_links(&mut self, out: &mut Vec<(usize, PathBuf)>) -> Result<()> {
        while let Some(Pending { path, depth, tag }) = self.links.pop_front() {
            if self.first_only && !out.is_empty() {
                return Ok(());
            }
            match kind_of(&path) {
                Kind::Folder(meta) => {
                    if self.admit(&path, &meta, true, depth)? {
                        self.walk(&path, depth, tag, out)?;
                    }
                }
                Kind::File => match not_image(&path) {
                    None => out.push((tag, path)),
                    Some(ext) => self.skip(&path, false, SkipReason::Extension(ext))?,
                },
                Kind::Other(reason) => self.skip(&path, false, reason)?,
            }
        }
        Ok(())
    }
}
