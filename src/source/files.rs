//! File sources: image-folder trees, file lists, flat folders, and masks paired by stem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{sample_id, Dataset, Location, Sample, SkipReason, Skipped};
use crate::error::{Error, Result};

/// File extensions taken as images (case-insensitive): JPEG, PNG, WebP, BMP, TIFF, GIF.
/// Listing a folder skips other files and reports them ([`Dataset::skipped`]).
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "jpg", "jpeg", "jpe", "jfif", "png", "webp", "bmp", "dib", "tif", "tiff", "gif",
];

const MAX_DEPTH: usize = 64;

/// `None` for an image file; else the lower-cased extension (empty when none).
fn not_image(path: &Path) -> Option<String> {
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

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.starts_with('.'))
        .unwrap_or(false)
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

/// What listing left out, relative to the root it lists.
struct Skips<'a> {
    root: &'a Path,
    list: Vec<Skipped>,
}

impl Skips<'_> {
    fn add(&mut self, path: &Path, reason: SkipReason) -> Result<()> {
        let mut rel = relative(self.root, path)?;
        if path.is_dir() {
            rel.push('/');
        }
        self.list.push(Skipped { path: rel, reason });
        Ok(())
    }
}

/// Sorted entries of a folder (files and folders); hidden ones are left out and, with
/// `skips`, reported.
fn read_dir_sorted(dir: &Path, mut skips: Option<&mut Skips>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let p = entry.path();
        if !is_hidden(&p) {
            out.push(p);
        } else if let Some(s) = skips.as_deref_mut() {
            s.add(&p, SkipReason::Hidden)?;
        }
    }
    out.sort();
    Ok(out)
}

/// What a folder entry is, following symlinks: only folders and regular files are
/// entered or taken.
enum Entry {
    Folder,
    File,
    /// Neither: why it is skipped.
    Other(SkipReason),
}

fn entry_kind(p: &Path) -> Entry {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Entry::Folder,
        Ok(m) if m.is_file() => Entry::File,
        Ok(m) => Entry::Other(SkipReason::NotAFile(
            super::fsio::kind_of(&m.file_type()).to_string(),
        )),
        Err(e) => Entry::Other(SkipReason::Unreadable(e.to_string())),
    }
}

/// All image files below `dir`, recursively, sorted; with `skips`, the other files (and
/// hidden folders) are reported there.
fn images_below(
    dir: &Path,
    depth: usize,
    out: &mut Vec<PathBuf>,
    mut skips: Option<&mut Skips>,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::source_at(
            dir,
            format!("folder nesting deeper than {MAX_DEPTH} (a symlink loop?)"),
        ));
    }
    let entries = match (
        read_dir_sorted(dir, skips.as_deref_mut()),
        skips.as_deref_mut(),
    ) {
        (Ok(e), _) => e,
        // A sub-folder that cannot be read is reported and the rest listed; the folder
        // asked for must be readable.
        (Err(Error::Io { source, .. }), Some(s)) if depth > 0 => {
            return s.add(dir, SkipReason::Unreadable(source.to_string()));
        }
        (Err(e), _) => return Err(e),
    };
    for p in entries {
        match (entry_kind(&p), skips.as_deref_mut()) {
            (Entry::Folder, skips) => images_below(&p, depth + 1, out, skips)?,
            (Entry::File, skips) => match (not_image(&p), skips) {
                (None, _) => out.push(p),
                (Some(ext), Some(s)) => s.add(&p, SkipReason::Extension(ext))?,
                (Some(_), None) => {}
            },
            (Entry::Other(reason), Some(s)) => s.add(&p, reason)?,
            (Entry::Other(_), None) => {}
        }
    }
    Ok(())
}

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
    })
}

/// An image-folder tree: each sub-folder of `root` is a class, class ids follow the sorted
/// folder names, and every image file below a class folder (recursively) is a sample.
/// Other files, hidden entries and files directly in `root` are left out and reported
/// ([`Dataset::skipped`]).
pub fn image_folder(root: &Path) -> Result<Dataset> {
    if super::remote::is_url(root) {
        return remote_tree(root, true);
    }
    if !root.is_dir() {
        return Err(Error::source_at(root, "not a folder"));
    }
    let mut skips = Skips {
        root,
        list: Vec::new(),
    };
    let mut classes = Vec::new();
    for p in read_dir_sorted(root, Some(&mut skips))? {
        match entry_kind(&p) {
            Entry::Folder => classes.push(p),
            Entry::File => {
                let reason =
                    not_image(&p).map_or(SkipReason::OutsideClasses, SkipReason::Extension);
                skips.add(&p, reason)?;
            }
            Entry::Other(reason) => skips.add(&p, reason)?,
        }
    }
    if classes.is_empty() {
        return Err(Error::source_at(
            root,
            "no class folders (expected one sub-folder per class)",
        ));
    }
    let mut samples = Vec::new();
    let mut names = Vec::new();
    for (class_id, dir) in classes.iter().enumerate() {
        let class_id = u32::try_from(class_id)
            .map_err(|_| Error::source_at(root, "more than 2^32 classes"))?;
        names.push(relative(root, dir)?);
        let mut files = Vec::new();
        images_below(dir, 1, &mut files, Some(&mut skips))?;
        for f in files {
            samples.push(file_sample(root, f, Some(class_id))?);
        }
    }
    Ok(Dataset::from_samples(Some(root.to_path_buf()), samples, names)?.with_skipped(skips.list))
}

/// Every image file below `root`, recursively, without labels. Other files and hidden
/// entries are left out and reported ([`Dataset::skipped`]).
pub fn flat(root: &Path) -> Result<Dataset> {
    if super::remote::is_url(root) {
        return remote_tree(root, false);
    }
    if !root.is_dir() {
        return Err(Error::source_at(root, "not a folder"));
    }
    let mut skips = Skips {
        root,
        list: Vec::new(),
    };
    let mut files = Vec::new();
    images_below(root, 0, &mut files, Some(&mut skips))?;
    let samples = files
        .into_iter()
        .map(|f| file_sample(root, f, None))
        .collect::<Result<Vec<_>>>()?;
    Ok(
        Dataset::from_samples(Some(root.to_path_buf()), samples, Vec::new())?
            .with_skipped(skips.list),
    )
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

/// A file list, in the format documented at [`Dataset::files`].
pub fn file_list(list: &Path) -> Result<Dataset> {
    let text = list_text(list)?;
    let root = list
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut samples = Vec::new();
    let mut max_label: Option<u32> = None;
    // The first line with a label and the first without, to refuse a mix.
    let (mut labelled, mut unlabelled): (Option<usize>, Option<usize>) = (None, None);
    for (n, raw) in text.lines().enumerate() {
        let n = n + 1;
        let bad = |why: String| {
            Error::source_at(
                list,
                format!("line {n}: {why}: {:?}", raw.trim_end_matches('\r')),
            )
        };
        let Some((path, label)) = parse_list_line(raw).map_err(bad)? else {
            continue;
        };
        match label {
            Some(_) => {
                labelled.get_or_insert(n);
            }
            None => {
                unlabelled.get_or_insert(n);
            }
        }
        if let (Some(a), Some(b)) = (labelled, unlabelled) {
            let (has, lacks) = if label.is_some() { (n, b) } else { (a, n) };
            return Err(bad(format!(
                "line {lacks} has no label but line {has} has one (label every line, or none)"
            )));
        }
        let rel = Path::new(path);
        if rel.is_absolute() || rel.components().any(|c| c.as_os_str() == "..") {
            return Err(bad(format!(
                "path {path:?} must be relative and stay below the list's folder"
            )));
        }
        // A label above MAX_LABEL is the sample's problem, reported every epoch, not the
        // list's: the rest of the list is still read.
        let label = label.map(|l| {
            let value = l.parse::<i128>().unwrap_or(i128::MAX);
            super::checked_label(value, l, &format!("{} line {n}", list.display()))
        });
        let mut sample = file_sample(&root, root.join(rel), None)?;
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
    Dataset::from_samples(Some(root), samples, super::numbered_classes(max_label))
}

/// The largest file list read (1 GiB: some ten million lines), so that a list that is
/// really a device or a runaway file cannot take all memory.
pub const MAX_LIST_BYTES: u64 = 1 << 30;

/// One line of a file list (see [`Dataset::files`]): `None` for a blank or comment line, else
/// the path and the label's digits; `Err` says what is malformed.
fn parse_list_line<'a>(
    raw: &'a str,
) -> std::result::Result<Option<(&'a str, Option<&'a str>)>, String> {
    let line = raw.strip_suffix('\r').unwrap_or(raw);
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let label_of = |l: &'a str| -> std::result::Result<&'a str, String> {
        if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) {
            Ok(l)
        } else {
            Err(format!(
                "label {l:?} is not a non-negative integer (a path with spaces needs a tab before its label)"
            ))
        }
    };
    if line.contains('\t') {
        let mut fields = line.split('\t');
        let (path, label) = match (fields.next(), fields.next(), fields.next()) {
            (Some(p), Some(l), None) => (p.trim_matches(' '), l.trim_matches(' ')),
            _ => return Err("more than one tab (the form is PATH<TAB>LABEL)".into()),
        };
        if path.is_empty() {
            return Err("empty path before the tab".into());
        }
        return Ok(Some((path, Some(label_of(label)?))));
    }
    let fields: Vec<&str> = trimmed.split(' ').filter(|f| !f.is_empty()).collect();
    let (path, label) = match fields.as_slice() {
        [p] => (*p, None),
        [p, l] => (*p, Some(label_of(l)?)),
        _ => {
            return Err(format!(
                "{} fields separated by spaces; the forms are PATH, PATH LABEL and PATH<TAB>LABEL (a path with spaces needs the tab form)",
                fields.len()
            ))
        }
    };
    if let Some((_, tail)) = path.rsplit_once(',') {
        if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
            return Err(
                "looks like PATH,LABEL: a comma does not separate the label, a tab or a space does"
                    .into(),
            );
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
        images_below(mask_dir, 0, &mut files, None)?;
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
