//! The synthetic image set the training examples write on first run and then read through
//! stoker like any dataset on disk: one shape per image (a class of [`CLASSES`]) of random
//! colour, size, position, tilt (up to 20 degrees) and stripe texture, on a background of a
//! random colour gradient with noise, saved as a JPEG in a folder per class, with a PNG
//! label mask of the same stem (0 background, `1 + class` on the shape's pixels).
//!
//! Telling the classes apart takes the shape's outline, not its colour or size, and a model
//! fed masks or labels that do not belong to their images learns nothing above chance.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The shape classes, in label order (stoker's image folders sort class folders by name,
/// so the names sort in this order too).
pub const CLASSES: [&str; 4] = ["a_disc", "b_square", "c_triangle", "d_cross"];

/// What to write: `count` images of `size` x `size` pixels, from `seed`.
#[derive(Debug, Clone, Copy)]
pub struct SynthSpec {
    /// Images in all (spread evenly over the classes).
    pub count: usize,
    /// Side of each image, in pixels.
    pub size: u32,
    /// Seed of every random choice: the same spec writes the same files.
    pub seed: u64,
}

/// Where a written set lies.
#[derive(Debug, Clone)]
pub struct SynthSet {
    /// `images/<class>/<stem>.jpg`: an image folder stoker reads with labels.
    pub images: PathBuf,
    /// `masks/<stem>.png`: the label mask of each image, paired by stem.
    pub masks: PathBuf,
}

/// Writes the set under `root` unless a complete one of the same spec is already there
/// (a stamp file records the spec), and says where it lies.
pub fn ensure(root: &Path, spec: SynthSpec) -> io::Result<SynthSet> {
    let set = SynthSet {
        images: root.join("images"),
        masks: root.join("masks"),
    };
    let stamp = root.join("spec.txt");
    let want = format!("{} {} {} v5\n", spec.count, spec.size, spec.seed);
    if fs::read_to_string(&stamp).ok().as_deref() == Some(want.as_str()) {
        return Ok(set);
    }
    for dir in [&set.images, &set.masks] {
        if dir.exists() {
            fs::remove_dir_all(dir)?;
        }
    }
    fs::create_dir_all(&set.masks)?;
    for class in CLASSES {
        fs::create_dir_all(set.images.join(class))?;
    }
    for i in 0..spec.count {
        let class = i % CLASSES.len();
        let (rgb, mask) = draw(spec.size, class, mix(spec.seed, i as u64));
        let stem = format!("{}_{i:05}", CLASSES[class]);
        let jpeg = turbojpeg::compress(
            turbojpeg::Image {
                pixels: rgb.as_slice(),
                width: spec.size as usize,
                pitch: 3 * spec.size as usize,
                height: spec.size as usize,
                format: turbojpeg::PixelFormat::RGB,
            },
            90,
            turbojpeg::Subsamp::Sub2x2,
        )
        .map_err(io::Error::other)?;
        fs::write(
            set.images.join(CLASSES[class]).join(format!("{stem}.jpg")),
            &*jpeg,
        )?;
        write_mask(&set.masks.join(format!("{stem}.png")), spec.size, &mask)?;
    }
    fs::write(&stamp, want)?;
    Ok(set)
}

fn write_mask(path: &Path, size: u32, mask: &[u8]) -> io::Result<()> {
    let file = io::BufWriter::new(fs::File::create(path)?);
    let mut enc = png::Encoder::new(file, size, size);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(io::Error::other)?;
    w.write_image_data(mask).map_err(io::Error::other)?;
    w.finish().map_err(io::Error::other)
}

/// SplitMix64: the set's only source of randomness, so a spec always writes the same set.
fn mix(seed: u64, i: u64) -> u64 {
    let mut z = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f32 {
        self.0 = mix(self.0, 1);
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
    fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }
    fn colour(&mut self) -> [f32; 3] {
        [self.unit(), self.unit(), self.unit()].map(|c| 255.0 * c)
    }
}

/// Whether `(x, y)`, in the shape's own frame (centred, unrotated, unit radius), lies
/// inside a shape of `class`.
fn inside(class: usize, x: f32, y: f32) -> bool {
    match class {
        0 => x * x + y * y <= 1.0,
        1 => x.abs() <= 0.8 && y.abs() <= 0.8,
        // An equilateral triangle pointing up, its vertices on the unit circle.
        2 => y <= 0.5 && y >= -1.0 + 1.732 * x.abs(),
        _ => (x.abs() <= 0.3 && y.abs() <= 1.0) || (y.abs() <= 0.3 && x.abs() <= 1.0),
    }
}

/// One image (RGB, row-major) and its mask.
fn draw(size: u32, class: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut r = Rng(seed);
    let n = size as f32;
    let (bg0, bg1) = (r.colour(), r.colour());
    let angle = r.range(0.0, std::f32::consts::TAU);
    let (gx, gy) = (angle.cos(), angle.sin());
    // The shape's colour differs from both background colours by at least a third of the
    // range in some channel, so it is always visible.
    let fg = loop {
        let c = r.colour();
        let far = |b: &[f32; 3]| c.iter().zip(b).any(|(a, b)| (a - b).abs() > 85.0);
        if far(&bg0) && far(&bg1) {
            break c;
        }
    };
    let radius = r.range(0.26, 0.4) * n;
    let (cx, cy) = (r.range(radius, n - radius), r.range(radius, n - radius));
    // A tilt of up to 20 degrees either way: the classes stay told apart by outline.
    let rot = r.range(-0.35, 0.35);
    let (rc, rs) = (rot.cos(), rot.sin());
    let stripe = r.range(3.0, 7.0);
    let stripe_dir = r.range(0.0, std::f32::consts::PI);
    let (sc, ss) = (stripe_dir.cos(), stripe_dir.sin());
    let mut rgb = vec![0u8; (3 * size * size) as usize];
    let mut mask = vec![0u8; (size * size) as usize];
    for y in 0..size {
        for x in 0..size {
            let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
            let t = ((px / n - 0.5) * gx + (py / n - 0.5) * gy + 0.5).clamp(0.0, 1.0);
            let noise = r.range(-10.0, 10.0);
            let mut c = [0.0f32; 3];
            for k in 0..3 {
                c[k] = bg0[k] * (1.0 - t) + bg1[k] * t + noise;
            }
            let (dx, dy) = ((px - cx) / radius, (py - cy) / radius);
            let (ux, uy) = (dx * rc + dy * rs, -dx * rs + dy * rc);
            let i = (y * size + x) as usize;
            if inside(class, ux, uy) {
                mask[i] = 1 + class as u8;
                let band = ((px * sc + py * ss) / stripe).floor() as i64 % 2 == 0;
                let shade = if band { 1.0 } else { 0.9 };
                for k in 0..3 {
                    c[k] = fg[k] * shade + noise * 0.5;
                }
            }
            for k in 0..3 {
                rgb[3 * i + k] = c[k].clamp(0.0, 255.0) as u8;
            }
        }
    }
    (rgb, mask)
}
