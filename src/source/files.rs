//! File sources: image-folder trees, file lists, flat folders, and masks paired by stem.
//!
//! Folders are walked by the rules of `walk`: each real folder entered once, links
//! to folders outside the dataset folder not followed unless asked ([`WalkOptions`]),
//! folders nested too deep reported, the walk bounded in entries and time.
#![doc(hidden)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::walk::{kind_of, not_image, Kind, WalkOptions, Walker};
use super::{sample_id, Dataset, Location, Sample, SkipReason, Skipped};
use crate::error::{Error, Result};

pub(crate) use super::walk::relative;
pub use super::walk::IMAGE_EXTENSIONS;

fn file_sample(root: &Path, path: PathBuf, label: Option<u32>) -> Result<Sample> {
    let rel = relative(root, &path)?;
    Ok(Sample {
        id: sample_id(&rel),
        path: rel,
        location: Location::File(path),
        label,
        mask: None,
        group: None,
        targets: None,
        source: 0,
    })
}

/// The class folders of the image-folder tree `root` (sorted), admitted to `walker`: the
/// real folders first, then links to folders by the walk's rules (a link to a folder
/// listed already, or outside `root` unless followed, is reported and is no class).
/// Files directly in `root` are reported; with `top_images`, whether any is an image.
fn class_folders(root: &Path, walker: &mut Walker) -> Result<(Vec<PathBuf>, bool)> {
    let mut real = Vec::new();
    let mut links = Vec::new();
    let mut top_images = false;
    for e in walker.read_dir(root)? {
        match kind_of(&e.path) {
            Kind::Folder(meta) if e.link => links.push((e.path, meta)),
            Kind::Folder(meta) => real.push((e.path, meta)),
            Kind::File => {
                let ext = not_image(&e.path);
                top_images |= ext.is_none();
                let reason = ext.map_or(SkipReason::OutsideClasses, SkipReason::Extension);
                walker.skip(&e.path, false, reason)?;
            }
            Kind::Other(reason) => walker.skip(&e.path, false, reason)?,
        }
    }
    let mut classes = Vec::new();
    for (path, meta) in real {
        if walker.admit(&path, &meta, false, 1)? {
            classes.push(path);
        }
    }
    for (path, meta) in links {
        if walker.admit(&path, &meta, true, 1)? {
            classes.push(path);
        }
    }
    classes.sort();
    Ok((classes, top_images))
}

/// An image-folder tree: each sub-folder of `root` is a class, class ids follow the sorted
/// folder names, and every image file below a class folder (recursively) is a sample.
/// Other files, hidden entries and files directly in `root` are left out and reported
/// ([`Dataset::skipped`]), and so are the folders and links the walk does not enter
/// ([`WalkOptions`]: with its defaults).
pub fn image_folder(root: &Path) -> Result<Dataset> {
    image_folder_with(root, &WalkOptions::default())
}

/// [`image_folder`] with the walk's bounds and rules `options`.
pub fn image_folder_with(root: &Path, options: &WalkOptions) -> Result<Dataset> {
    tree(root, options, true)
}

/// [`image_folder_with`] (`labelled`) or [`flat_with`]: of a folder in a store (a URL)
/// or of a local folder, walked by `options`.
fn tree(root: &Path, options: &WalkOptions, labelled: bool) -> Result<Dataset> {
    if super::remote::is_url(root) {
        return remote_tree(root, labelled);
    }
    if !root.is_dir() {
        return Err(Error::source_at(root, "not a folder"));
    }
    let mut walker = Walker::new(root, options)?;
    let (samples, names) = if labelled {
        class_samples(root, &mut walker)?
    } else {
        (flat_samples(root, &mut walker)?, Vec::new())
    };
    Ok(
        Dataset::from_samples(Some(root.to_path_buf()), samples, names)?
            .with_skipped(walker.skipped),
    )
}

/// The samples of a local image-folder tree, labelled by class folder, and the class
/// names.
fn class_samples(root: &Path, walker: &mut Walker) -> Result<(Vec<Sample>, Vec<String>)> {
    let (classes, _) = class_folders(root, walker)?;
    if classes.is_empty() {
        return Err(Error::source_at(
            root,
            "no class folders (expected one sub-folder per class)",
        ));
    }
    let mut files = Vec::new();
    let mut names = Vec::new();
    for (class_id, dir) in classes.iter().enumerate() {
        names.push(relative(root, dir)?);
        walker.walk(dir, 1, class_id, &mut files)?;
    }
    walker.follow_links(&mut files)?;
    let mut samples = Vec::new();
    for (class_id, f) in files {
        let class_id = u32::try_from(class_id)
            .map_err(|_| Error::source_at(root, "more than 2^32 classes"))?;
        samples.push(file_sample(root, f, Some(class_id))?);
    }
    Ok((samples, names))
}

/// The samples of every image below a local folder, unlabelled.
fn flat_samples(root: &Path, walker: &mut Walker) -> Result<Vec<Sample>> {
    let mut files = Vec::new();
    walker.walk(root, 0, 0, &mut files)?;
    walker.follow_links(&mut files)?;
    files
        .into_iter()
        .map(|(_, f)| file_sample(root, f, None))
        .collect()
}

/// What a local folder holds, for telling an image-folder tree from a flat folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// An image file lies directly in the folder.
    pub top_images: bool,
    /// An image file lies below one of its sub-folders (a class folder of
    /// [`image_folder`]), found by the walk [`image_folder`] makes.
    pub class_images: bool,
}

/// What `root` holds ([`Layout`]), walked by [`image_folder`]'s rules (default
/// [`WalkOptions`]) and stopping at the first image below the sub-folders.
pub fn layout(root: &Path) -> Result<Layout> {
    let options = WalkOptions::default();
    let mut walker = Walker::new(root, &options)?.first_only();
    let (classes, top_images) = class_folders(root, &mut walker)?;
    let mut found = Vec::new();
    for dir in &classes {
        walker.walk(dir, 1, 0, &mut found)?;
        if !found.is_empty() {
            break;
        }
    }
    walker.follow_links(&mut found)?;
    Ok(Layout {
        top_images,
        class_images: !found.is_empty(),
    })
}

/// Every image file below `root`, recursively, without labels. Other files and hidden
/// entries are left out and reported ([`Dataset::skipped`]), and so are the folders and
/// links the walk does not enter ([`WalkOptions`]: with its defaults).
pub fn flat(root: &Path) -> Result<Dataset> {
    flat_with(root, &WalkOptions::default())
}

/// [`flat`] with the walk's bounds and rules `options`.
pub fn flat_with(root: &Path, options: &WalkOptions) -> Result<Dataset> {
    tree(root, options, false)
}

/// [`image_folder`] (`labelled`) or [`flat`] of a folder in a store (a URL): the objects
/// the store lists under it, taken and left out by the same rules (a name part starting
/// with `.` is hidden; in an image-folder tree the first part is the class).
fn remote_tree(root: &Path, labelled: bool) -> Result<Dataset> {
    let s = root.to_string_lossy();
    let folder = if s.ends_with('/') {
        s.to_string()
    } else {
        format!("{s}/")
    };
    let objects = super::remote::list(&folder).map_err(|e| Error::io(root, e.into()))?;
    let mut skipped = Vec::new();
    let mut hidden = std::collections::BTreeSet::new();
    // (class, relative path, URL)
    let mut files: Vec<(Option<String>, String, String)> = Vec::new();
    for o in objects {
        let Some(rel) = o.url.strip_prefix(&folder) else {
            continue;
        };
        // A folder marker some tools write ("dir/", an empty object).
        if rel.is_empty() || rel.ends_with('/') {
            continue;
        }
        let parts: Vec<&str> = rel.split('/').collect();
        if let Some(k) = parts.iter().position(|p| p.starts_with('.')) {
            let mut at = parts[..=k].join("/");
            if k + 1 < parts.len() {
                at.push('/');
            }
            if hidden.insert(at.clone()) {
                skipped.push(Skipped {
                    path: at,
                    reason: SkipReason::Hidden,
                });
            }
            continue;
        }
        let ext = not_image(Path::new(rel));
        let class = labelled
            .then(|| parts.first().map(|c| c.to_string()))
            .flatten();
        match (ext, labelled && parts.len() < 2) {
            (Some(ext), _) => skipped.push(Skipped {
                path: rel.to_string(),
                reason: SkipReason::Extension(ext),
            }),
            (None, true) => skipped.push(Skipped {
                path: rel.to_string(),
                reason: SkipReason::OutsideClasses,
            }),
            (None, false) => files.push((class, rel.to_string(), o.url.clone())),
        }
    }
    let mut names: Vec<String> = files.iter().filter_map(|f| f.0.clone()).collect();
    names.sort();
    names.dedup();
    if labelled && names.is_empty() {
        return Err(Error::source_at(
            root,
            "no class folders (expected one sub-folder per class)",
        ));
    }
    let samples = files
        .into_iter()
        .map(|(class, rel, url)| {
            let label = match class {
                Some(c) => {
                    let i = names.binary_search(&c).unwrap_or(0);
                    Some(
                        u32::try_from(i)
                            .map_err(|_| Error::source_at(root, "more than 2^32 classes"))?,
                    )
                }
                None => None,
            };
            Ok(Sample::new(rel, Location::File(PathBuf::from(url)), label))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Dataset::from_samples(Some(root.to_path_buf()), samples, names)?.with_skipped(skipped))
}

/// The text of the file list `list`; bytes that are not UTF-8 are refused saying what
/// the file is instead: an image (given where a list was expected), or not text.
fn list_text(list: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    super::fsio::read_bounded(list, MAX_LIST_BYTES, &mut bytes)
        .map_err(|e| Error::source_at(list, e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| {
        let why = match crate::decode::Format::sniff(e.as_bytes()) {
            Some(f) => format!(
                "a {} image, not a file list (UTF-8 text, one `PATH [LABEL]` a line)",
                f.name().to_uppercase()
            ),
            None => format!("not a file list: not UTF-8 text ({})", e.utf8_error()),
        };
        Error::source_at(list, why)
    })
}

/// A file list, in the format documented at [`Dataset::files`], its paths checked by
/// `options`.
pub fn file_list(list: &Path, options: &super::ListingOptions) -> Result<Dataset> {
    let text = list_text(list)?;
    let root = list
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut samples = Vec::new();
    let mut max_label: Option<u32> = None;
    // The first line with a label, and the samples of the lines without one (each
    // reported if any line has a label).
    let mut labelled: Option<usize> = None;
    let mut unlabelled: Vec<(usize, usize)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let n = n + 1;
        let bad = |why: &dyn std::fmt::Display| {
            Error::source_at(
                list,
                format!("line {n}: {why}: {:?}", raw.trim_end_matches('\r')),
            )
        };
        let Some((path, label)) = parse_list_line(raw).map_err(|e| bad(&e))? else {
            continue;
        };
        match label {
            Some(_) => {
                labelled.get_or_insert(n);
            }
            None => unlabelled.push((samples.len(), n)),
        }
        options
            .check_path(path, "the list's folder")
            .map_err(|e| bad(&e))?;
        let rel = Path::new(path);
        // A label above MAX_LABEL is the sample's problem, reported every epoch, not the
        // list's: the rest of the list is still read.
        let label = label.map(|l| {
            let value = l.parse::<i128>().unwrap_or(i128::MAX);
            super::checked_label(value, l, &format!("{} line {n}", list.display()))
        });
        let mut sample = listed_sample(&root, path, rel)?;
        match label {
            Some(Ok(l)) => {
                max_label = Some(max_label.map_or(l, |m| m.max(l)));
                sample.label = Some(l);
            }
            Some(Err(refused)) => sample.location = refused,
            None => {}
        }
        samples.push(sample);
    }
    if let Some(has) = labelled {
        let missing = unlabelled
            .into_iter()
            .map(|(i, n)| {
                let why = format!(
                    "{} line {n}: no label, though line {has} has one (label every line, or none)",
                    list.display()
                );
                (i, why)
            })
            .collect();
        super::listing::report_unlabelled(&mut samples, missing);
    }
    Dataset::from_samples(Some(root), samples, super::numbered_classes(max_label))
}

/// The sample of a listed path: below the root, its path relative to it; else (a path
/// the options let out) the path as listed, with `/` separators.
fn listed_sample(root: &Path, path: &str, rel: &Path) -> Result<Sample> {
    let file = root.join(rel);
    if super::listing::stays_below(path) {
        return file_sample(root, file, None);
    }
    let listed = path.replace('\\', "/");
    Ok(Sample {
        id: sample_id(&listed),
        path: listed,
        location: Location::File(file),
        label: None,
        mask: None,
        group: None,
        targets: None,
        source: 0,
    })
}

/// The largest file list read (1 GiB: some ten million lines), so that a list that is
/// really a device or a runaway file cannot take all memory.
pub const MAX_LIST_BYTES: u64 = 1 << 30;

/// Why a line of a file list (see [`Dataset::files`]) is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ListLineError {
    /// The label field is not digits.
    #[error(
        "label {0:?} is not a non-negative integer (a path with spaces needs a tab before its label)"
    )]
    Label(String),
    /// More than one tab on the line.
    #[error("more than one tab (the form is PATH<TAB>LABEL)")]
    Tabs,
    /// Nothing before the tab.
    #[error("empty path before the tab")]
    EmptyPath,
    /// Neither one nor two fields separated by spaces.
    #[error(
        "{0} fields separated by spaces; the forms are PATH, PATH LABEL and PATH<TAB>LABEL (a path with spaces needs the tab form)"
    )]
    Fields(usize),
    /// `PATH,LABEL`: a comma where a tab or a space belongs.
    #[error("looks like PATH,LABEL: a comma does not separate the label, a tab or a space does")]
    Comma,
}

/// One line of a file list (see [`Dataset::files`]): `None` for a blank or comment line, else
/// the path and the label's digits; `Err` says what is malformed.
fn parse_list_line<'a>(
    raw: &'a str,
) -> std::result::Result<Option<(&'a str, Option<&'a str>)>, ListLineError> {
    let line = raw.strip_suffix('\r').unwrap_or(raw);
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let label_of = |l: &'a str| -> std::result::Result<&'a str, ListLineError> {
        if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) {
            Ok(l)
        } else {
            Err(ListLineError::Label(l.to_string()))
        }
    };
    if line.contains('\t') {
        let mut fields = line.split('\t');
        let (path, label) = match (fields.next(), fields.next(), fields.next()) {
            (Some(p), Some(l), None) => (p.trim_matches(' '), l.trim_matches(' ')),
            _ => return Err(ListLineError::Tabs),
        };
        if path.is_empty() {
            return Err(ListLineError::EmptyPath);
        }
        return Ok(Some((path, Some(label_of(label)?))));
    }
    let fields: Vec<&str> = trimmed.split(' ').filter(|f| !f.is_empty()).collect();
    let (path, label) = match fields.as_slice() {
        [p] => (*p, None),
        [p, l] => (*p, Some(label_of(l)?)),
        _ => return Err(ListLineError::Fields(fields.len())),
    };
    if let Some((_, tail)) = path.rsplit_once(',') {
        if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ListLineError::Comma);
        }
    }
    Ok(Some((path, label)))
}

/// Pairs every image with the mask of the same file stem in `mask_dir` (searched
/// recursively, any image extension). An image without a mask, or a stem with two masks,
/// is an error that names the files: a segmentation set with holes is not silently used.
pub fn with_masks(mut data: Dataset, mask_dir: &Path) -> Result<Dataset> {
    let mut files = Vec::new();
    if super::remote::is_url(mask_dir) {
        // A folder in a store: the image objects below it, hidden ones left out.
        let s = mask_dir.to_string_lossy();
        let folder = format!("{}/", s.trim_end_matches('/'));
        let objects = super::remote::list(&folder).map_err(|e| Error::io(mask_dir, e.into()))?;
        files.extend(
            objects
                .into_iter()
                .filter(|o| {
                    o.url.strip_prefix(&folder).is_some_and(|rel| {
                        !rel.split('/').any(|p| p.starts_with('.'))
                            && not_image(Path::new(rel)).is_none()
                    })
                })
                .map(|o| PathBuf::from(o.url)),
        );
    } else if !mask_dir.is_dir() {
        return Err(Error::source_at(
            mask_dir,
            "the mask folder is not a folder",
        ));
    } else {
        // Walked as a flat folder is; what it leaves out holds no masks.
        let options = WalkOptions::default();
        let mut walker = Walker::new(mask_dir, &options)?;
        let mut found = Vec::new();
        walker.walk(mask_dir, 0, 0, &mut found)?;
        walker.follow_links(&mut found)?;
        files.extend(found.into_iter().map(|(_, f)| f));
    }
    let mut by_stem: BTreeMap<String, PathBuf> = BTreeMap::new();
    for f in files {
        let stem = stem_of(&f);
        if let Some(prev) = by_stem.insert(stem.clone(), f.clone()) {
            return Err(Error::source_at(
                mask_dir,
                format!(
                    "two masks share the stem {stem:?}: {} and {}",
                    prev.display(),
                    f.display()
                ),
            ));
        }
    }
    let mut missing = Vec::new();
    for s in &mut data.samples {
        let stem = stem_of(Path::new(&s.path));
        match by_stem.get(&stem) {
            Some(m) => s.mask = Some(Location::File(m.clone())),
            None => missing.push(s.path.clone()),
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
        return Err(Error::source_at(
            mask_dir,
            format!(
                "{} image(s) have no mask with the same stem: {}{}",
                missing.len(),
                shown.join(", "),
                if missing.len() > 10 { ", ..." } else { "" }
            ),
        ));
    }
    Ok(data)
}

fn stem_of(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
