//! File sources: image-folder trees, file lists, flat folders, and masks paired by stem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{sample_id, Dataset, Location, Sample};
use crate::error::{Error, Result};

/// File extensions taken as images (case-insensitive).
pub const IMAGE_EXTENSIONS: &[&str] = &["jpg", "jpeg", "jpe", "jfif", "png"];

const MAX_DEPTH: usize = 64;

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| IMAGE_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
        .unwrap_or(false)
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

/// Sorted entries of a folder (files and folders), hidden ones left out.
fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let p = entry.path();
        if !is_hidden(&p) {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// All image files below `dir`, recursively, sorted.
fn images_below(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::source_at(
            dir,
            format!("folder nesting deeper than {MAX_DEPTH} (a symlink loop?)"),
        ));
    }
    for p in read_dir_sorted(dir)? {
        if p.is_dir() {
            images_below(&p, depth + 1, out)?;
        } else if is_image(&p) {
            out.push(p);
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
    })
}

/// An image-folder tree: each sub-folder of `root` is a class, class ids follow the sorted
/// folder names, and every image file below a class folder (recursively) is a sample.
pub fn image_folder(root: &Path) -> Result<Dataset> {
    if !root.is_dir() {
        return Err(Error::source_at(root, "not a folder"));
    }
    let classes: Vec<PathBuf> = read_dir_sorted(root)?
        .into_iter()
        .filter(|p| p.is_dir())
        .collect();
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
        images_below(dir, 1, &mut files)?;
        for f in files {
            samples.push(file_sample(root, f, Some(class_id))?);
        }
    }
    Dataset::from_samples(Some(root.to_path_buf()), samples, names)
}

/// Every image file below `root`, recursively, without labels.
pub fn flat(root: &Path) -> Result<Dataset> {
    if !root.is_dir() {
        return Err(Error::source_at(root, "not a folder"));
    }
    let mut files = Vec::new();
    images_below(root, 0, &mut files)?;
    let samples = files
        .into_iter()
        .map(|f| file_sample(root, f, None))
        .collect::<Result<Vec<_>>>()?;
    Dataset::from_samples(Some(root.to_path_buf()), samples, Vec::new())
}

/// A file list: UTF-8 text, one sample per line as `path` or `path<TAB or space>label`,
/// paths relative to the list's folder; blank lines and lines starting with `#` are skipped.
/// Labels are non-negative integers; the class names are their decimal strings.
pub fn file_list(list: &Path) -> Result<Dataset> {
    let text = std::fs::read_to_string(list).map_err(|e| Error::io(list, e))?;
    let root = list
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut samples = Vec::new();
    let mut max_label: Option<u32> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (path, label) = match line.rsplit_once(['\t', ' ']) {
            Some((p, l)) if l.trim().parse::<u32>().is_ok() => {
                (p.trim(), l.trim().parse::<u32>().ok())
            }
            _ => (line, None),
        };
        if let Some(l) = label {
            max_label = Some(max_label.map_or(l, |m| m.max(l)));
        }
        let rel = Path::new(path);
        if rel.is_absolute() || rel.components().any(|c| c.as_os_str() == "..") {
            return Err(Error::source_at(
                list,
                format!(
                    "line {}: path {path:?} must be relative and stay below the list's folder",
                    n + 1
                ),
            ));
        }
        samples.push(file_sample(&root, root.join(rel), label)?);
    }
    Dataset::from_samples(Some(root), samples, super::numbered_classes(max_label))
}

/// Pairs every image with the mask of the same file stem in `mask_dir` (searched
/// recursively, any image extension). An image without a mask, or a stem with two masks,
/// is an error that names the files: a segmentation set with holes is not silently used.
pub fn with_masks(mut data: Dataset, mask_dir: &Path) -> Result<Dataset> {
    if !mask_dir.is_dir() {
        return Err(Error::source_at(
            mask_dir,
            "the mask folder is not a folder",
        ));
    }
    let mut files = Vec::new();
    images_below(mask_dir, 0, &mut files)?;
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
