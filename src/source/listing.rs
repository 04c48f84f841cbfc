//! Rules every listing source follows, in one place: where a listed path may point
//! ([`ListingOptions::allow_outside_root`]), and what becomes of a sample without a label
//! in a labelled dataset (reported per sample, `report_unlabelled`).

use std::path::{Component, Path};

use super::{Location, Sample};
use crate::error::SampleErrorKind;

/// Options of the sources that name files by path: file lists ([`super::Dataset::files_with`]),
/// manifests ([`super::Dataset::from_manifest_with`]) and COCO files
/// ([`super::Dataset::coco_with`]).
///
/// ```
/// let options = stoker::ListingOptions::new().allow_outside_root(true);
/// assert!(options.allow_outside_root);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListingOptions {
    /// Whether a listed path may point outside the dataset's folder (the folder of the
    /// list or manifest, or COCO's image folder): an absolute path, or one with a `..`
    /// part. Off by default: such a path refuses the listing, naming its line or entry,
    /// so that a list from elsewhere reads nothing outside the folder it describes.
    pub allow_outside_root: bool,
}

impl ListingOptions {
    /// The defaults: paths stay below the dataset's folder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lets listed paths point outside the dataset's folder (absolute paths, `..`).
    pub fn allow_outside_root(mut self, allow: bool) -> Self {
        self.allow_outside_root = allow;
        self
    }

    /// `Err` with why when `path` (as listed) points outside `folder` (its description)
    /// and the options do not allow it.
    pub(crate) fn check_path(&self, path: &str, folder: &str) -> Result<(), OutsideRoot> {
        if self.allow_outside_root || stays_below(path) {
            return Ok(());
        }
        Err(OutsideRoot {
            path: path.to_string(),
            folder: folder.to_string(),
        })
    }
}

/// A listed path that points outside the dataset's folder (absolute, or with `..`) when
/// [`ListingOptions::allow_outside_root`] is not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "path {path:?} must be relative and stay below {folder} (no absolute path, \
     no `..`; ListingOptions::allow_outside_root allows it)"
)]
pub struct OutsideRoot {
    /// The path as listed.
    pub path: String,
    /// What it must stay below (e.g. "the manifest's folder").
    pub folder: String,
}

/// Whether `path` stays below the folder it is relative to: not absolute, no root or
/// drive, no `..` part, whichever separator (`/` or `\`) it uses.
pub(crate) fn stays_below(path: &str) -> bool {
    let p = Path::new(path);
    let drive = path.as_bytes().get(1) == Some(&b':')
        && path.as_bytes().first().is_some_and(u8::is_ascii_alphabetic);
    !p.is_absolute()
        && !p.has_root()
        && !drive
        && !path.starts_with(['/', '\\'])
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && !path.split(['/', '\\']).any(|c| c == "..")
}

/// The rule for a sample without a label in a labelled dataset (one where some sample
/// records a label): it is reported every epoch with [`SampleErrorKind::Label`] and
/// `why`, never delivered unlabelled among labelled ones. `missing` holds the indices in
/// `samples` of those without a label, each with why; a sample already reported for
/// something else keeps that report.
pub(crate) fn report_unlabelled(samples: &mut [Sample], missing: Vec<(usize, String)>) {
    for (i, why) in missing {
        if let Some(s) = samples.get_mut(i) {
            if !matches!(s.location, Location::Refused { .. }) {
                s.location = Location::Refused {
                    kind: SampleErrorKind::Label,
                    reason: why.into(),
                };
                s.label = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_below_and_outside() {
        for p in ["a.jpg", "a/b.jpg", "./a.jpg", "a..b.jpg", "..a/b.jpg"] {
            assert!(stays_below(p), "{p}");
        }
        for p in [
            "../a.jpg",
            "a/../../b.jpg",
            "a/..",
            "/etc/x.jpg",
            "\\x.jpg",
            "..\\x.jpg",
            "a\\..\\..\\x.jpg",
            "C:\\x.jpg",
            "c:x.jpg",
        ] {
            assert!(!stays_below(p), "{p}");
        }
    }
}
