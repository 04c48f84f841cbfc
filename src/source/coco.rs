//! COCO-style annotation files (`images`, `annotations`, `categories`) as a source: one
//! sample per image entry, with its boxes and keypoints ([`super::Targets`]).
//!
//! Nothing in the file is dropped without a word. The file is refused, naming what, when
//! it is not JSON, when an image entry has no id or file name, when two image entries
//! share an id (their annotations could not be told apart), when a category has no
//! usable id or two categories share one, when an annotation has no `image_id`, or when a
//! file name points outside the image folder (unless
//! [`ListingOptions::allow_outside_root`]). An image with an annotation that cannot be
//! used (a `category_id` no category has, an id another annotation also has, a malformed
//! box or keypoints) is listed and reported every epoch with the annotation's id and why
//! ([`SampleErrorKind::Label`]), never delivered with some of its boxes. Annotations whose
//! `image_id` no image entry has are listed as one reported sample per such image id,
//! `<annotation file name>/@image_id=<id>`, naming the annotations.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::target::{
    bounded, class_id, finite, keypoint, read_text, Bad, BoundingBox, Targets, MAX_TARGETS,
};
use super::{sample_id, Dataset, ListingOptions, Location, Sample, MAX_LABEL};
use crate::error::{Error, Result, SampleErrorKind};

/// An annotation's id as the file writes it, for messages.
fn annotation_id(a: &Value) -> String {
    a.get("id")
        .filter(|v| !v.is_null())
        .map_or_else(|| "(without an id)".to_string(), Value::to_string)
}

/// Class names by category id, and the ids `categories` lists; a category without a
/// usable id, or an id listed twice, refuses the file.
fn categories(list: &[Value], at: &str) -> Result<(Vec<String>, BTreeSet<u32>)> {
    let mut classes: Vec<String> = Vec::new();
    let mut names: BTreeMap<u32, &str> = BTreeMap::new();
    for c in list {
        let id = c
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i <= MAX_LABEL)
            .ok_or_else(|| Error::dataset(format!("{at}: category {c} has no usable id")))?;
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        if let Some(first) = names.insert(id, name) {
            return Err(Error::dataset(format!(
                "{at}: category id {id} is listed twice ({first:?} and {name:?})"
            )));
        }
        if classes.len() <= id as usize {
            classes.resize(id as usize + 1, String::new());
        }
        classes[id as usize] = name.to_string();
    }
    Ok((classes, names.into_keys().collect()))
}

/// The image entries as (id, file name), checked: each has both, no id is listed twice,
/// and each file name stays below the image folder unless `options` allow otherwise.
fn image_entries<'a>(
    list: &'a [Value],
    at: &str,
    options: &ListingOptions,
) -> Result<Vec<(u64, &'a str)>> {
    let mut seen: HashMap<u64, &str> = HashMap::with_capacity(list.len());
    let mut out = Vec::with_capacity(list.len());
    for im in list {
        let (Some(id), Some(file)) = (
            im.get("id").and_then(Value::as_u64),
            im.get("file_name").and_then(Value::as_str),
        ) else {
            return Err(Error::dataset(format!(
                "{at}: image entry {im} has no id or file_name"
            )));
        };
        if let Some(first) = seen.insert(id, file) {
            return Err(Error::dataset(format!(
                "{at}: image id {id} is listed twice ({first:?} and {file:?}): its \
                 annotations cannot be told apart"
            )));
        }
        options
            .check_path(file, "the image folder")
            .map_err(|why| Error::dataset(format!("{at}: image {id}: {why}")))?;
        out.push((id, file));
    }
    Ok(out)
}

/// The ids (as JSON text) that more than one annotation has.
fn shared_ids(annotations: &[Value]) -> BTreeSet<String> {
    let mut count: HashMap<String, usize> = HashMap::new();
    for id in annotations
        .iter()
        .filter_map(|a| a.get("id").filter(|v| !v.is_null()))
    {
        *count.entry(id.to_string()).or_default() += 1;
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| id)
        .collect()
}

/// Adds the box and keypoints of annotation `a` (the image's `object`-th) to `t`.
fn annotation_targets(
    a: &Value,
    object: usize,
    known: &BTreeSet<u32>,
    t: &mut Targets,
) -> std::result::Result<(), Bad> {
    let class = class_id(a.get("category_id").unwrap_or(&Value::Null), "category_id")?;
    if !known.contains(&class) {
        return Err(Bad::from(format!(
            "category_id {class} is not the id of any entry of \"categories\""
        )));
    }
    if let Some(bb) = a.get("bbox") {
        let b = bounded(bb, "bbox")?;
        if b.len() != 4 {
            return Err(Bad::from(format!("bbox {bb} is not [x, y, w, h]")));
        }
        let c = |i: usize| finite(&b[i], "bbox value");
        let (x, y, w, h) = (c(0)?, c(1)?, c(2)?, c(3)?);
        if w < 0.0 || h < 0.0 {
            return Err(Bad::from(format!(
                "bbox {bb} has a negative width or height"
            )));
        }
        t.boxes.push(BoundingBox {
            x0: x,
            y0: y,
            x1: x + w,
            y1: y + h,
            class,
        });
    }
    if let Some(kp) = a.get("keypoints") {
        let k = bounded(kp, "keypoints")?;
        if k.len() % 3 != 0 {
            return Err(Bad::from("keypoints are not x, y, v triples".to_string()));
        }
        for p in k.chunks_exact(3) {
            t.keypoints
                .push(keypoint(&Value::Array(p.to_vec()), object as u32)?);
        }
    }
    Ok(())
}

/// The targets of one image from its annotations (file order), or why they cannot be
/// used, naming the annotation. Crowd annotations are left out.
fn image_targets(
    anns: &[&Value],
    known: &BTreeSet<u32>,
    shared: &BTreeSet<String>,
) -> std::result::Result<Targets, Bad> {
    if anns.len() > MAX_TARGETS {
        return Err(Bad::from(format!(
            "{} annotations: more than {MAX_TARGETS}",
            anns.len()
        )));
    }
    let mut t = Targets::default();
    for (object, a) in anns.iter().enumerate() {
        if a.get("iscrowd").and_then(Value::as_u64) == Some(1) {
            continue;
        }
        let id = annotation_id(a);
        if shared.contains(&id) {
            return Err(Bad::from(format!(
                "annotation id {id} is used by more than one annotation (its boxes would be \
                 duplicated)"
            )));
        }
        annotation_targets(a, object, known, &mut t)
            .map_err(|why| format!("annotation {id}: {why}"))?;
    }
    if t.keypoints.len() > MAX_TARGETS {
        return Err(Bad::from(format!(
            "{} keypoints: more than {MAX_TARGETS}",
            t.keypoints.len()
        )));
    }
    Ok(t)
}

/// The reported sample that stands for annotations whose `image_id` no image entry has.
fn orphans(file_name: &str, at: &str, image_id: u64, anns: &[&Value]) -> Sample {
    let ids: Vec<String> = anns.iter().take(8).map(|&a| annotation_id(a)).collect();
    let more = if anns.len() > ids.len() { ", ..." } else { "" };
    let path = format!("{file_name}/@image_id={image_id}");
    Sample::new(
        path,
        Location::Refused {
            kind: SampleErrorKind::Label,
            reason: format!(
                "{at}: {} annotation(s) (id {}{more}) refer to image id {image_id}, which no \
                 entry of \"images\" has",
                anns.len(),
                ids.join(", ")
            )
            .into(),
        },
        None,
    )
}

/// A COCO-style annotation file (`images`, `annotations`, `categories`) over the images
/// in `images`: one sample per image entry, its boxes (`bbox` `[x, y, w, h]` made
/// `[x0, y0, x1, y1]`) with their `category_id`, and their keypoints (`object` = the
/// annotation's order within the image). Crowd annotations (`iscrowd: 1`) are left out,
/// as detection training does; images without annotations are samples with no boxes.
/// Class ids are COCO's category ids; class names come from `categories` (empty for ids
/// no category names). File names are relative to `images` and stay below it unless
/// `options` allow otherwise. What is refused and what is reported: see the module docs.
pub fn coco(annotations: &Path, images: &Path, options: &ListingOptions) -> Result<Dataset> {
    let text = read_text(annotations)?;
    let at = annotations.display().to_string();
    let v: Value =
        serde_json::from_str(&text).map_err(|e| Error::dataset(format!("{at}: not JSON: {e}")))?;
    let list = |key: &str| -> Result<&[Value]> {
        match v.get(key) {
            None => Ok(&[]),
            Some(a) => a
                .as_array()
                .map(Vec::as_slice)
                .ok_or_else(|| Error::dataset(format!("{at}: \"{key}\" is not a list"))),
        }
    };
    let (classes, known) = categories(list("categories")?, &at)?;
    let anns = list("annotations")?;
    let shared = shared_ids(anns);
    // Annotations by image id, in file order.
    let mut by_image: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for a in anns {
        let Some(img) = a.get("image_id").and_then(Value::as_u64) else {
            return Err(Error::dataset(format!(
                "{at}: annotation {a} has no image_id"
            )));
        };
        by_image.entry(img).or_default().push(a);
    }
    let entries = image_entries(list("images")?, &at, options)?;
    let mut samples = Vec::with_capacity(entries.len());
    for (id, file) in entries {
        let rel = file.replace('\\', "/");
        let anns = by_image.remove(&id).unwrap_or_default();
        let (location, targets) = match image_targets(&anns, &known, &shared) {
            Ok(t) => (Location::File(images.join(file)), t),
            Err(why) => (
                Location::Refused {
                    kind: SampleErrorKind::Label,
                    reason: format!("{at}: image {id} ({rel}): {why}").into(),
                },
                Targets::default(),
            ),
        };
        samples.push(Sample {
            id: sample_id(&rel),
            path: rel,
            location,
            label: None,
            mask: None,
            group: None,
            targets: Some(Arc::new(targets)),
            source: 0,
        });
    }
    let name = annotations
        .file_name()
        .map_or_else(|| "annotations".into(), |n| n.to_string_lossy());
    for (image_id, anns) in &by_image {
        samples.push(orphans(&name, &at, *image_id, anns));
    }
    Dataset::from_samples(Some(images.to_path_buf()), samples, classes)
}
