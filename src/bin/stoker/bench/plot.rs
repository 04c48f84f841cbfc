//! `--plot FILE` of the bench commands: SVG charts drawn with plotters.
//!
//! Three kinds, one per command: lanes of time spans (`overlap`: loading and training,
//! naive against pipelined), lines of points over time (`pipeline`: each batch's input
//! wait, one line per backend) and bars (`decode`: images/s per backend and path).
//!
//! SVG only: the SVG backend writes text as `<text>` elements for the viewer to draw, so
//! no font library is needed. The file extension chooses the format; any other is refused
//! when the arguments are parsed, before a benchmark runs.

use crate::args::ArgError;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::common::Res;

/// The colours of the lanes, lines and bars, in order (a colour-blind-safe palette).
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0x4E, 0x79, 0xA7),
    RGBColor(0xF2, 0x8E, 0x2B),
    RGBColor(0x59, 0xA1, 0x4F),
    RGBColor(0xE1, 0x57, 0x59),
    RGBColor(0x76, 0xB7, 0xB2),
    RGBColor(0xB0, 0x7A, 0xA1),
];

/// The chart size in pixels.
const SIZE: (u32, u32) = (960, 420);

/// The value parser of `--plot`: a path ending in `.svg` (any case).
pub fn plot_file(s: &str) -> Result<PathBuf, ArgError> {
    let p = PathBuf::from(s);
    match p.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(p),
        Some(e) => Err(ArgError::PlotFormat(e.to_string())),
        None => Err(ArgError::NoPlotExtension),
    }
}

/// Draws a plot to `path` with `draw`; an error (exit status `Output`) says which file
/// it could not write.
pub fn save(path: &Path, draw: impl FnOnce(&Path) -> Res<()>) -> Res<()> {
    draw(path).map_err(|e| {
        crate::common::fail(
            crate::common::Cause::Output,
            format!("cannot write the plot {}: {e}", path.display()),
        )
    })
}

/// One colour of [`PALETTE`], wrapping around.
fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// `n` category rows (at least one): an integer range is inclusive, so `0..=n - 1`.
fn rows(
    n: usize,
) -> plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize> {
    (0..n.saturating_sub(1)).into_segmented()
}

/// A chart's SVG drawing area on `path` (its folder must exist), the background white.
fn area(path: &Path) -> Res<DrawingArea<SVGBackend<'_>, plotters::coord::Shift>> {
    crate::ensure_parent(path)?;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root)
}

/// Draws the legend of `chart` (upper right, framed, on a light ground) and writes
/// `root` out.
fn legend_and_present<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    root: &DrawingArea<DB, plotters::coord::Shift>,
) -> Res<()>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}

/// A lane of a timeline chart: its name and its spans (start, end) in seconds.
#[derive(Debug, Clone)]
pub struct Lane {
    pub name: String,
    pub spans: Vec<(f64, f64)>,
}

/// A timeline chart: one row per lane, top to bottom, each span a bar from its start to
/// its end, so what a lane did not do shows as a gap. Lane `i` has colour `i`, every
/// other span lighter so that spans end to end stay apart.
pub fn timelines(path: &Path, title: &str, lanes: &[Lane]) -> Res<()> {
    let root = area(path)?;
    let end = lanes
        .iter()
        .flat_map(|l| l.spans.iter().map(|s| s.1))
        .fold(0.0f64, f64::max);
    let n = lanes.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(150)
        .build_cartesian_2d(0.0..end.max(1e-3) * 1.02, rows(n))?;
    // Row 0 is at the bottom: lane `i` goes in row `n - 1 - i`.
    let name = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(r) if *r < n => lanes[n - 1 - r].name.clone(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&name)
        .x_desc("seconds since the start of the run")
        .draw()?;
    for (i, lane) in lanes.iter().enumerate() {
        let row = n - 1 - i;
        let c = colour(i);
        chart.draw_series(lane.spans.iter().enumerate().map(|(k, &(s, e))| {
            let style = if k % 2 == 0 {
                c.filled()
            } else {
                c.mix(0.6).filled()
            };
            let mut r = Rectangle::new(
                [
                    (s, SegmentValue::Exact(row)),
                    (e, SegmentValue::Exact(row + 1)),
                ],
                style,
            );
            r.set_margin(6, 6, 0, 0);
            r
        }))?;
    }
    root.present()?;
    Ok(())
}

/// A line of a points chart: its name and its points (x, y).
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A points chart: each line drawn through its points, each point a dot, with a legend.
/// Line `i` has colour `i`.
pub fn lines(path: &Path, title: &str, x_desc: &str, y_desc: &str, lines: &[Line]) -> Res<()> {
    let root = area(path)?;
    let pts = || lines.iter().flat_map(|l| l.points.iter());
    let x_end = pts().map(|p| p.0).fold(0.0f64, f64::max);
    let y_end = pts().map(|p| p.1).fold(0.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end.max(1e-3) * 1.02, 0.0..y_end.max(1e-3) * 1.1)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    for (i, line) in lines.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                c.stroke_width(1),
            ))?
            .label(line.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(line.points.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
    }
    legend_and_present(&mut chart, &root)
}

/// A bar of a bar chart: its label under the axis, its value (`None`: no bar, the label
/// says why) and the colour index of its kind.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: Option<f64>,
    pub kind: usize,
}

/// A bar chart, one bar per entry of `bars` left to right, its value written above it;
/// a legend names the kinds (`kinds[k]` for colour `k`).
pub fn bars(path: &Path, title: &str, y_desc: &str, kinds: &[&str], bars: &[Bar]) -> Res<()> {
    let root = area(path)?;
    let n = bars.len();
    let top = bars.iter().filter_map(|b| b.value).fold(0.0f64, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(rows(n), 0.0..top.max(1e-3) * 1.15)?;
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) if *i < n => bars[*i].label.clone(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label)
        .y_desc(y_desc)
        .draw()?;
    let gap = (SIZE.0 / (4 * n.max(1) as u32)).min(60);
    for (k, name) in kinds.iter().enumerate() {
        let c = colour(k);
        let mine: Vec<(usize, f64)> = bars
            .iter()
            .enumerate()
            .filter(|(_, b)| b.kind == k)
            .filter_map(|(i, b)| b.value.map(|v| (i, v)))
            .collect();
        if mine.is_empty() {
            continue;
        }
        chart
            .draw_series(mine.iter().map(|&(i, v)| {
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), v),
                    ],
                    c.filled(),
                );
                r.set_margin(0, 0, gap, gap);
                r
            }))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(10)));
        chart.draw_series(mine.iter().map(|&(i, v)| {
            Text::new(
                format!("{v:.1}"),
                (SegmentValue::CenterOf(i), v),
                ("sans-serif", 14).into_font().color(&BLACK).pos(
                    plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Bottom,
                    ),
                ),
            )
        }))?;
    }
    legend_and_present(&mut chart, &root)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(x, width)` of the `<rect>`s filled with `c`, in drawing order.
    fn rects(svg: &str, c: RGBColor) -> Vec<(f64, f64)> {
        let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        let attr = |e: &str, k: &str| -> f64 {
            let i = e.find(&format!(" {k}=\"")).unwrap() + k.len() + 3;
            e[i..i + e[i..].find('"').unwrap()].parse().unwrap()
        };
        svg.split("<rect")
            .skip(1)
            .map(|e| &e[..e.find("/>").unwrap()])
            .filter(|e| e.contains(&fill))
            .map(|e| (attr(e, "x"), attr(e, "width")))
            .collect()
    }

    #[test]
    fn timeline_spans_are_drawn_to_scale() {
        // Spans of random lengths and gaps (a seed from the clock, printed on failure).
        let mut x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        let seed = x;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1000) as f64 / 1000.0
        };
        let lanes: Vec<Lane> = (0..3)
            .map(|l| {
                let mut t = 0.0;
                let spans = (0..5 + l)
                    .map(|_| {
                        let s = t + next();
                        t = s + 0.05 + next();
                        (s, t)
                    })
                    .collect();
                Lane {
                    name: format!("lane {l}"),
                    spans,
                }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.svg");
        timelines(&path, "test", &lanes).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for l in &lanes {
            assert!(svg.contains(&l.name), "seed {seed}");
        }
        // Pixels per second, from the earliest start to the latest end of all spans.
        let px: Vec<Vec<(f64, f64)>> = (0..lanes.len()).map(|i| rects(&svg, colour(i))).collect();
        let all = || {
            lanes
                .iter()
                .zip(&px)
                .flat_map(|(l, d)| l.spans.iter().zip(d))
        };
        let first = all().min_by(|a, b| a.0 .0.total_cmp(&b.0 .0)).unwrap();
        let last = all().max_by(|a, b| a.0 .1.total_cmp(&b.0 .1)).unwrap();
        let scale = (last.1 .0 + last.1 .1 - first.1 .0) / (last.0 .1 - first.0 .0);
        let origin = first.1 .0 - first.0 .0 * scale;
        for (lane, drawn) in lanes.iter().zip(&px) {
            assert_eq!(drawn.len(), lane.spans.len(), "seed {seed}");
            for (&(s, e), &(x, w)) in lane.spans.iter().zip(drawn) {
                assert!(
                    (origin + s * scale - x).abs() <= 2.0,
                    "seed {seed}: {s} at {x}"
                );
                assert!(
                    ((e - s) * scale - w).abs() <= 2.0,
                    "seed {seed}: {e}-{s} as {w}"
                );
            }
        }
    }

    #[test]
    fn a_bar_without_a_value_keeps_its_label_and_draws_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.svg");
        let b = |label: &str, value, kind| Bar {
            label: label.into(),
            value,
            kind,
        };
        bars(
            &path,
            "test",
            "images/s",
            &["one", "two"],
            &[
                b("a", Some(10.0), 0),
                b("b", None, 0),
                b("c", Some(40.0), 1),
            ],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let (a, c) = (rects(&svg, colour(0)), rects(&svg, colour(1)));
        assert_eq!((a.len(), c.len()), (1, 1));
        // Same widths, `c` two slots right of `a`.
        assert!((a[0].1 - c[0].1).abs() <= 1.0);
        assert!(c[0].0 > a[0].0 + 2.0 * a[0].1);
        for t in [
            ">\na\n<", ">\nb\n<", ">\nc\n<", "10.0", "40.0", "one", "two",
        ] {
            assert!(svg.contains(t), "{t:?} missing");
        }
    }

    #[test]
    fn only_svg_is_accepted() {
        assert!(plot_file("out/a.svg").is_ok());
        assert!(plot_file("A.SVG").is_ok());
        let e = plot_file("a.png").unwrap_err().to_string();
        assert!(e.contains(".png") && e.contains(".svg"), "{e}");
        assert!(plot_file("plot").is_err());
    }
}
