//! Line charts as inline SVG, rendered on the server from the data.
//!
//! plotters' SVG backend lays text out with a font it must load at run time; here the
//! browser draws the text, so a chart is a few polylines, grid lines and labels in a
//! `viewBox` that scales to the screen's width. Names and labels go through maud, which
//! escapes them.

use maud::{Markup, html};

/// Colours of the series, in order (a colour-blind-safe categorical palette).
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000",
];

/// One line.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points, by x.
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) of a shaded band behind the line (a 95 % interval per point), by
    /// x; empty for none.
    pub band: Vec<(f64, f64, f64)>,
}

/// A chart: its series, the y range (`None`: from 0 to the data's maximum), and how
/// tick values print.
pub struct LineChart<'a> {
    /// CSS class and accessible title.
    pub title: &'a str,
    /// The lines.
    pub series: Vec<Series>,
    /// Fixed x range (`None`: the data's).
    pub x_range: Option<(f64, f64)>,
    /// Fixed y range.
    pub y_range: Option<(f64, f64)>,
    /// x axis label.
    pub x_label: &'a str,
    /// y axis label.
    pub y_label: &'a str,
    /// Formats an x tick.
    pub x_fmt: &'a dyn Fn(f64) -> String,
    /// Formats a y tick.
    pub y_fmt: &'a dyn Fn(f64) -> String,
    /// Fill the area under a single series.
    pub area: bool,
}

const W: f64 = 640.0;
const H: f64 = 240.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 38.0;

/// About `n` round tick values covering `[lo, hi]` (steps of 1, 2 or 5 × 10^k).
pub fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) || n == 0 {
        return vec![lo];
    }
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    (0..=n * 2 + 1)
        .map(|i| first + i as f64 * step)
        .take_while(|v| *v <= hi + step * 1e-9)
        .collect()
}

impl LineChart<'_> {
    /// The chart's SVG, followed by its legend when it has more than one series.
    pub fn render(&self) -> Markup {
        let xs = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let (mut x0, mut x1) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        if let Some(r) = self.x_range {
            (x0, x1) = r;
        }
        if !(x0.is_finite() && x1.is_finite()) {
            (x0, x1) = (0.0, 1.0);
        }
        if x1 - x0 < 1e-9 {
            x1 = x0 + 1.0;
        }
        let (y0, y1) = self.y_range.unwrap_or_else(|| {
            let top = self
                .series
                .iter()
                .flat_map(|s| s.points.iter().map(|p| p.1))
                .fold(0.0f64, f64::max);
            (0.0, if top > 0.0 { top * 1.1 } else { 1.0 })
        });
        let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - RIGHT);
        let py = |y: f64| TOP + (1.0 - (y - y0) / (y1 - y0)) * (H - TOP - BOTTOM);
        let xt = ticks(x0, x1, 6);
        let yt = ticks(y0, y1, 4);
        let single = self.series.len() == 1;
        html! {
            svg class="chart" viewBox=(format!("0 0 {W} {H}")) role="img"
                aria-label=(self.title) xmlns="http://www.w3.org/2000/svg" {
                title { (self.title) }
                @for y in &yt {
                    line class="grid" x1=(LEFT) x2=(W - RIGHT) y1=(f1(py(*y))) y2=(f1(py(*y))) {}
                    text class="tick" x=(LEFT - 6.0) y=(f1(py(*y) + 4.0)) text-anchor="end" { ((self.y_fmt)(*y)) }
                }
                @for x in &xt {
                    line class="grid" x1=(f1(px(*x))) x2=(f1(px(*x))) y1=(TOP) y2=(H - BOTTOM) {}
                    text class="tick" x=(f1(px(*x))) y=(H - BOTTOM + 15.0) text-anchor="middle" { ((self.x_fmt)(*x)) }
                }
                line class="axis" x1=(LEFT) x2=(W - RIGHT) y1=(H - BOTTOM) y2=(H - BOTTOM) {}
                line class="axis" x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(H - BOTTOM) {}
                text class="label" x=(f1((LEFT + W - RIGHT) / 2.0)) y=(H - 4.0) text-anchor="middle" { (self.x_label) }
                text class="label" x="12" y=(f1((TOP + H - BOTTOM) / 2.0)) text-anchor="middle"
                    transform=(format!("rotate(-90 12 {})", f1((TOP + H - BOTTOM) / 2.0))) { (self.y_label) }
                @for (i, s) in self.series.iter().enumerate() {
                    @let colour = PALETTE[i % PALETTE.len()];
                    @let pts = s.points.iter().map(|(x, y)| format!("{},{}", f1(px(*x)), f1(py(*y)))).collect::<Vec<_>>().join(" ");
                    g class="series" data-name=(s.name) {
                        title { (s.name) }
                        @if self.area && single && s.points.len() > 1 {
                            @let (first, last) = (s.points[0].0, s.points[s.points.len() - 1].0);
                            polygon class="area" fill=(colour) points=(format!("{},{} {} {},{}", f1(px(first)), f1(py(y0)), pts, f1(px(last)), f1(py(y0)))) {}
                        }
                        @if s.band.len() > 1 {
                            @let upper = s.band.iter().map(|(x, _, hi)| format!("{},{}", f1(px(*x)), f1(py(*hi))));
                            @let lower = s.band.iter().rev().map(|(x, lo, _)| format!("{},{}", f1(px(*x)), f1(py(*lo))));
                            polygon class="band" fill=(colour) fill-opacity="0.15" stroke="none" points=(upper.chain(lower).collect::<Vec<_>>().join(" ")) {}
                        }
                        polyline fill="none" stroke=(colour) stroke-width="2" points=(pts) {}
                        @if let Some((x, y)) = s.points.last() {
                            circle cx=(f1(px(*x))) cy=(f1(py(*y))) r="3" fill=(colour) {}
                        }
                    }
                }
            }
            @if !single {
                ul class="legend" {
                    @for (i, s) in self.series.iter().enumerate() {
                        li { span class="swatch" style=(format!("background:{}", PALETTE[i % PALETTE.len()])) {} (s.name) }
                    }
                }
            }
        }
    }
}

/// One decimal: short attributes.
fn f1(v: f64) -> String {
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.5, 1.0]);
        assert_eq!(ticks(3.0, 97.0, 6), vec![20.0, 40.0, 60.0, 80.0]);
        assert_eq!(ticks(0.0, 7.0, 6), vec![0.0, 2.0, 4.0, 6.0]);
        assert_eq!(ticks(5.0, 5.0, 4), vec![5.0]);
    }

    #[test]
    fn names_are_escaped_and_each_series_is_a_line() {
        let fmt = |v: f64| format!("{v}");
        let c = LineChart {
            title: "t",
            series: vec![
                Series {
                    name: "<script>".into(),
                    points: vec![(0.0, 0.1), (1.0, 0.5)],
                    band: vec![(0.0, 0.05, 0.15), (1.0, 0.45, 0.55)],
                },
                Series {
                    name: "b".into(),
                    points: vec![(0.5, 0.2)],
                    band: Vec::new(),
                },
            ],
            x_range: None,
            y_range: Some((0.0, 1.0)),
            x_label: "x",
            y_label: "y",
            x_fmt: &fmt,
            y_fmt: &fmt,
            area: false,
        }
        .render()
        .into_string();
        assert!(!c.contains("<script>"), "{c}");
        assert!(c.contains("&lt;script&gt;"));
        assert_eq!(c.matches("<polyline").count(), 2);
        // The first series' interval is one shaded band; the second has none.
        assert_eq!(c.matches("class=\"band\"").count(), 1);
        assert!(c.contains("class=\"legend\""));
    }
}
