//! Why the targets of a `tf.train.Example` cannot be used: a float or int64 list feature
//! that cannot be read as one, or lists that do not describe whole boxes and keypoints.
//! The text is the reason a listing records for the sample.

use super::{WireError, LIST_LIMIT};
use crate::source::target::MAX_TARGETS;
use crate::source::MAX_LABEL;

/// A target feature of an example that cannot be read or used (`key`: the feature).
#[derive(Debug, thiserror::Error)]
pub(super) enum ListFault {
    /// The feature holds a list of the other kind (float for int64 or the reverse).
    #[error("feature {key:?} is not a{} list", if *.float { " float" } else { "n int64" })]
    NotAList { key: String, float: bool },
    /// The list's protobuf encoding is broken.
    #[error("feature {key:?}: {source}")]
    Wire {
        key: String,
        #[source]
        source: WireError,
    },
    /// A packed float list whose length is not a multiple of 4 bytes.
    #[error("feature {key:?}: packed floats cut short")]
    PackedFloatsCutShort { key: String },
    /// More values than [`LIST_LIMIT`].
    #[error("feature {key:?}: more than {LIST_LIMIT} values")]
    TooManyValues { key: String },
    /// More targets than [`MAX_TARGETS`].
    #[error(
        "feature {key:?}: {n} values, more than {MAX_TARGETS} (stoker::source::target::MAX_TARGETS)"
    )]
    TooManyTargets { key: String, n: usize },
    /// A class id outside `0..=MAX_LABEL`.
    #[error("feature {key:?}: {value} is not a class id from 0 to {MAX_LABEL}")]
    NotAClassId { key: String, value: i64 },
    /// A value vector entry that is NaN or infinite.
    #[error("feature {key:?}: {value} is not a finite value")]
    NotFinite { key: String, value: f32 },
    /// A coordinate that is not finite (or absurdly large) in pixels.
    #[error("feature {key:?}: {value} is not a finite coordinate")]
    NotFiniteCoordinate { key: String, value: f32 },
    /// Normalised coordinates without the image's size.
    #[error(
        "coordinates are fractions of the image's size, but feature {key:?} is not a positive int64"
    )]
    NoImageSize { key: String },
    /// The four box edge lists differ in length.
    #[error(
        "boxes: {} {:?}, {} {:?}, {} {:?} and {} {:?} values, not the same number",
        .lens[0], .keys[0], .lens[1], .keys[1], .lens[2], .keys[2], .lens[3], .keys[3]
    )]
    BoxLengths {
        lens: [usize; 4],
        keys: Box<[String; 4]>,
    },
    /// Box class ids that are not one per box.
    #[error("{boxes} boxes but {classes} class ids in feature {key:?}")]
    BoxClasses {
        boxes: usize,
        classes: usize,
        key: String,
    },
    /// A box whose far edge is before its near one.
    #[error(
        "box {index} [{}, {}, {}, {}] has xmax < xmin or ymax < ymin",
        .edges[0], .edges[1], .edges[2], .edges[3]
    )]
    InvertedBox { index: usize, edges: [f32; 4] },
    /// Some but not all of the four box edge lists.
    #[error(
        "boxes need all four of {:?}, {:?}, {:?} and {:?}",
        .keys[0], .keys[1], .keys[2], .keys[3]
    )]
    IncompleteBoxes { keys: Box<[String; 4]> },
    /// Keypoint x and y lists of different lengths.
    #[error("keypoints: {n} x ({x_key:?}) but {ny} y ({y_key:?})")]
    KeypointLengths {
        n: usize,
        x_key: String,
        ny: usize,
        y_key: String,
    },
    /// Visibilities that are not one per keypoint.
    #[error("{n} keypoints but {visibilities} visibilities ({key:?})")]
    Visibilities {
        n: usize,
        visibilities: usize,
        key: String,
    },
    /// Keypoints that do not split evenly among the boxes.
    #[error("{n} keypoints for {boxes} boxes: not the same number for every box")]
    KeypointsPerBox { n: usize, boxes: usize },
    /// A visibility other than 0, 1 or 2.
    #[error("keypoint visibility {value} ({key:?}) is not 0, 1 or 2")]
    Visibility { value: i64, key: String },
    /// One of the keypoint coordinate lists without the other.
    #[error("keypoints need both {x_key:?} and {y_key:?}")]
    IncompleteKeypoints { x_key: String, y_key: String },
}
