//! Boxes and keypoints through a sample's geometry, on the host, from the same plan the
//! pixels follow: the crop box resized to the output, the affine warp (the plan's own
//! fixed-point map, inverted, so a point lands where its pixel does), then the flips.
//!
//! Coordinates are corner-based pixels in and out (see [`crate::source::target`]). A box
//! is clipped to the crop, warped as a quadrilateral, clipped to the output, and becomes
//! the bounding box of what is left: the tight box of the visible part of its rectangle.
//! [`BoxRule`] then drops what is too small, as torchvision's `SanitizeBoundingBoxes`
//! does. A
//! keypoint outside the crop or moved outside the output keeps its coordinates and gets
//! visibility 0.
#![doc(hidden)]

use super::plan::{SamplePlan, AFFINE, AFFINE_FRAC_BITS, FLIP_H, FLIP_V};
use crate::source::target::{BoundingBox, Keypoint, Targets};

/// Which boxes survive a sample's geometry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxRule {
    /// A box narrower or lower than this many output pixels after clipping, to the crop
    /// or to the output, is dropped (torchvision's `SanitizeBoundingBoxes(min_size=1)`
    /// default).
    pub min_size: f32,
    /// A box keeping less than this fraction of its moved area inside the output is
    /// dropped (0: any part is enough).
    pub min_visible: f32,
}

impl Default for BoxRule {
    fn default() -> Self {
        BoxRule {
            min_size: 1.0,
            min_visible: 0.0,
        }
    }
}

/// The plan's geometry as a map of points, from source pixels to output pixels.
#[derive(Debug, Clone, Copy)]
pub struct PointMap {
    sx: f64,
    sy: f64,
    x0: f64,
    y0: f64,
    /// The forward affine map in pixel-index coordinates: `[x; y] = inv * ([u; v] - c)`.
    affine: Option<([f64; 4], [f64; 2])>,
    width: f64,
    height: f64,
    /// The part of the resized frame holding the image: `[x0, y0, x1, y1]`.
    valid: [f64; 4],
    flip_h: bool,
    flip_v: bool,
}

impl PointMap {
    /// The map of `plan`.
    pub fn new(plan: &SamplePlan) -> PointMap {
        let (ow, oh) = (f64::from(plan.out_width), f64::from(plan.out_height));
        let affine = plan.has(AFFINE).then(|| {
            let one = f64::from(1u32 << AFFINE_FRAC_BITS);
            let [a, b, ci, d, e, fi] = plan.affine.map(f64::from);
            let (a, b, d, e) = (a / one, b / one, d / one, e / one);
            let c = ci + f64::from(plan.affine_frac[0]) / one;
            let f = fi + f64::from(plan.affine_frac[1]) / one;
            let det = a * e - b * d;
            // A map stoker makes has |det| >= 1/64^2; guard the division all the same.
            let det = if det.abs() < 1e-12 { 1e-12 } else { det };
            ([e / det, -b / det, -d / det, a / det], [c, f])
        });
        let ((vx0, vx1), (vy0, vy1)) = plan.valid_rect();
        PointMap {
            sx: f64::from(vx1.saturating_sub(vx0)) / f64::from(plan.crop_w).max(1e-9),
            sy: f64::from(vy1.saturating_sub(vy0)) / f64::from(plan.crop_h).max(1e-9),
            x0: f64::from(plan.crop_x)
                - f64::from(vx0) * f64::from(plan.crop_w)
                    / f64::from(vx1.saturating_sub(vx0).max(1)),
            y0: f64::from(plan.crop_y)
                - f64::from(vy0) * f64::from(plan.crop_h)
                    / f64::from(vy1.saturating_sub(vy0).max(1)),
            affine,
            width: ow,
            height: oh,
            valid: [vx0, vy0, vx1, vy1].map(f64::from),
            flip_h: plan.has(FLIP_H),
            flip_v: plan.has(FLIP_V),
        }
    }

    /// Where the source point `(x, y)` lands after the crop and resize alone: in the frame
    /// the affine warp reads.
    fn resized(&self, x: f64, y: f64) -> (f64, f64) {
        ((x - self.x0) * self.sx, (y - self.y0) * self.sy)
    }

    /// Where a point of the resized frame lands in the output: the affine warp, then the
    /// flips.
    fn warped(&self, (mut x, mut y): (f64, f64)) -> (f64, f64) {
        if let Some((m, c)) = self.affine {
            // Index coordinates (pixel i's centre at i) on both sides of the warp.
            let (u, v) = (x - 0.5 - c[0], y - 0.5 - c[1]);
            x = m[0] * u + m[1] * v + 0.5;
            y = m[2] * u + m[3] * v + 0.5;
        }
        if self.flip_h {
            x = self.width - x;
        }
        if self.flip_v {
            y = self.height - y;
        }
        (x, y)
    }

    /// Where the source point `(x, y)` lands in the output.
    pub fn point(&self, x: f64, y: f64) -> (f64, f64) {
        self.warped(self.resized(x, y))
    }

    fn inside(&self, (x, y): (f64, f64)) -> bool {
        (0.0..self.width).contains(&x) && (0.0..self.height).contains(&y)
    }

    fn in_image(&self, (x, y): (f64, f64)) -> bool {
        let v = self.valid;
        (v[0]..v[2]).contains(&x) && (v[1]..v[3]).contains(&y)
    }

    /// The moved box, or `None` where `rule` drops it: the box clipped to the crop (the
    /// image's part of the resized frame: what the warp can show; the rest is fill), its four corners warped and
    /// flipped, that quadrilateral clipped to the output, and the bounding box of what
    /// is left. (torchvision takes the bounding box of the warped corners before
    /// clipping, which under rotation can keep a box whose object is wholly outside.)
    pub fn bounding_box(&self, b: &BoundingBox, rule: &BoxRule) -> Option<BoundingBox> {
        let (x0, y0) = self.resized(f64::from(b.x0), f64::from(b.y0));
        let (x1, y1) = self.resized(f64::from(b.x1), f64::from(b.y1));
        let quad = |[x0, y0, x1, y1]: [f64; 4]| {
            [(x0, y0), (x1, y0), (x1, y1), (x0, y1)].map(|c| self.warped(c))
        };
        let full = polygon_area(&quad([x0, y0, x1, y1]));
        let v = self.valid;
        let cropped = [
            x0.clamp(v[0], v[2]),
            y0.clamp(v[1], v[3]),
            x1.clamp(v[0], v[2]),
            y1.clamp(v[1], v[3]),
        ];
        // Narrower than the rule in the crop (in output pixels, before the warp, which
        // can turn a sliver into a wide diagonal box): gone.
        let min = f64::from(rule.min_size);
        let (cw, ch) = (cropped[2] - cropped[0], cropped[3] - cropped[1]);
        if !(cw >= min && ch >= min && cw > 0.0 && ch > 0.0) {
            return None;
        }
        let visible = clip_to_rect(quad(cropped).to_vec(), self.width, self.height);
        let mut r = [
            f64::INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NEG_INFINITY,
        ];
        for &(x, y) in &visible {
            r = [r[0].min(x), r[1].min(y), r[2].max(x), r[3].max(y)];
        }
        let (w, h) = (r[2] - r[0], r[3] - r[1]);
        if !(w >= min && h >= min && w > 0.0 && h > 0.0) {
            return None;
        }
        if full > 0.0 && polygon_area(&visible) < f64::from(rule.min_visible) * full {
            return None;
        }
        Some(BoundingBox {
            x0: r[0] as f32,
            y0: r[1] as f32,
            x1: r[2] as f32,
            y1: r[3] as f32,
            class: b.class,
        })
    }

    /// The moved keypoint; visibility 0 when it lands outside the output, or outside the
    /// crop (where the output shows fill).
    pub fn keypoint(&self, k: &Keypoint) -> Keypoint {
        let r = self.resized(f64::from(k.x), f64::from(k.y));
        let (x, y) = self.warped(r);
        let seen = self.in_image(r) && self.inside((x, y));
        Keypoint {
            x: x as f32,
            y: y as f32,
            visibility: if seen { k.visibility } else { 0 },
            object: k.object,
        }
    }
}

/// The part of a convex polygon inside `[0, w] x [0, h]` (Sutherland-Hodgman).
fn clip_to_rect(mut poly: Vec<(f64, f64)>, w: f64, h: f64) -> Vec<(f64, f64)> {
    // Each edge of the rectangle as (coordinate, bound, keep values above the bound).
    for (axis, bound, above) in [(0, 0.0, true), (0, w, false), (1, 0.0, true), (1, h, false)] {
        let coord = |p: (f64, f64)| if axis == 0 { p.0 } else { p.1 };
        let keep = |p: (f64, f64)| {
            if above {
                coord(p) >= bound
            } else {
                coord(p) <= bound
            }
        };
        let mut out = Vec::with_capacity(poly.len() + 2);
        for i in 0..poly.len() {
            let (a, b) = (poly[i], poly[(i + 1) % poly.len()]);
            if keep(a) {
                out.push(a);
            }
            if keep(a) != keep(b) {
                let t = (bound - coord(a)) / (coord(b) - coord(a));
                out.push((a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1)));
            }
        }
        poly = out;
        if poly.is_empty() {
            break;
        }
    }
    poly
}

/// The area of a simple polygon (shoelace formula).
fn polygon_area(poly: &[(f64, f64)]) -> f64 {
    let n = poly.len();
    (0..n)
        .map(|i| {
            let (a, b) = (poly[i], poly[(i + 1) % n]);
            a.0 * b.1 - b.0 * a.1
        })
        .sum::<f64>()
        .abs()
        / 2.0
}

/// `targets` through `plan`'s geometry: boxes moved and sanitised by `rule`, keypoints
/// moved; class ids and values as they are.
pub fn transform(plan: &SamplePlan, targets: &Targets, rule: &BoxRule) -> Targets {
    let map = PointMap::new(plan);
    Targets {
        classes: targets.classes.clone(),
        values: targets.values.clone(),
        boxes: targets
            .boxes
            .iter()
            .filter_map(|b| map.bounding_box(b, rule))
            .collect(),
        keypoints: targets.keypoints.iter().map(|k| map.keypoint(k)).collect(),
    }
}
