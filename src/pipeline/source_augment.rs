//! Each source of a [`Mixture`](crate::Mixture) with an augmentation of its own
//! ([`PipelineBuilder::augment_source`](super::PipelineBuilder::augment_source)).

use crate::augment::Augment;
use crate::error::{Error, Result};
use crate::source::{Sample, Subset};

/// The pipeline's augmentation `main` and each mixture source's own (from `given`; see
/// [`resolve`]), ready to plan with: crop-aware decoding is turned off where a user
/// `transform` may read any pixel, or where decoded samples are kept (`keeps`) so that
/// any later crop can be served from them.
pub(super) fn prepare(
    subset: &Subset,
    main: Augment,
    given: Vec<(usize, Augment)>,
    transform: bool,
    keeps: bool,
) -> Result<(Augment, Vec<Option<Augment>>)> {
    let ready = |mut a: Augment| {
        if transform && a.is_crop_aware() {
            // The transform may read (and move) any pixel: it gets whole images.
            a = a.crop_aware(false);
        }
        if keeps && a.is_crop_aware() {
            // The cache keeps whole images so any later crop can be served from it.
            log::info!("decoded-sample cache on: crop-aware decode off");
            a = a.crop_aware(false);
        }
        a
    };
    let per_source = resolve(subset, &main, given, ready)?;
    Ok((ready(main), per_source))
}

/// The augmentation of each source of `subset`'s mixture (`None`: the pipeline's
/// `main`), from the `(source, augmentation)` pairs given, each made ready by `ready` as
/// the pipeline's own is. Empty when none was given. Refused: a subset that is not a
/// mixture, a source it does not have or named twice, an augmentation that does not
/// validate, or one whose batches would differ from `main`'s in shape or kind (output
/// size, dtype, layout, batch mixing, box rule): a batch holds samples of every source.
fn resolve(
    subset: &Subset,
    main: &Augment,
    given: Vec<(usize, Augment)>,
    ready: impl Fn(Augment) -> Augment,
) -> Result<Vec<Option<Augment>>> {
    if given.is_empty() {
        return Ok(Vec::new());
    }
    let Some(sources) = subset.inner.mixing.as_ref().map(|m| m.sources()) else {
        return Err(Error::config(
            "augment_source",
            "an augmentation per source needs a Mixture: this subset reads one dataset \
             (use augment)",
        ));
    };
    let mut out: Vec<Option<Augment>> = vec![None; sources];
    for (k, a) in given {
        let Some(slot) = out.get_mut(k) else {
            return Err(Error::config(
                "augment_source",
                format!("source {k}: the mixture has {sources} sources"),
            ));
        };
        if slot.is_some() {
            return Err(Error::config(
                "augment_source",
                format!("source {k} is given two augmentations"),
            ));
        }
        a.validate()?;
        let same = a.get_output_size() == main.get_output_size()
            && a.get_dtype() == main.get_dtype()
            && a.get_layout() == main.get_layout()
            && a.get_mixing() == main.get_mixing()
            && a.get_box_rule() == main.get_box_rule();
        if !same {
            return Err(Error::config(
                "augment_source",
                format!(
                    "source {k}: a batch holds samples of every source, so each source's \
                     augmentation gives what the pipeline's does: the same output size, \
                     dtype, layout, batch mixing (MixUp, CutMix) and box rule"
                ),
            ));
        }
        *slot = Some(ready(a));
    }
    Ok(out)
}

/// The augmentation of sample `s`: its mixture source's own where it has one, else `main`.
pub(super) fn of<'a>(
    per_source: &'a [Option<Augment>],
    main: &'a Augment,
    s: &Sample,
) -> &'a Augment {
    per_source
        .get(s.source)
        .and_then(Option::as_ref)
        .unwrap_or(main)
}
