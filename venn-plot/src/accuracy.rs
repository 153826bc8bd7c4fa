//! Accuracy-versus-time curves as PNG: single charts, grids of panels, and estimates with
//! their intervals. Text only where a font exists (`font.rs`).

use std::path::Path;

use plotters::prelude::*;

use crate::PlotError;
use crate::font::fonts_available;

/// One curve: a name and (minutes, accuracy %) points, with an optional band (a 95 %
/// interval per point, drawn as a shaded area behind the curve).
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) of the band, in x order; empty for none. Points whose ends are not
    /// finite are skipped (the band is drawn in pieces between them).
    pub band: Vec<(f64, f64, f64)>,
}

impl Series {
    /// A curve without a band.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            band: Vec::new(),
        }
    }

    /// The same curve with `band` ((x, low, high) per point).
    pub fn with_band(mut self, band: Vec<(f64, f64, f64)>) -> Self {
        self.band = band;
        self
    }
}

/// The band's finite stretches as closed polygons (upper edge forward, lower edge back).
fn band_polygons(band: &[(f64, f64, f64)]) -> Vec<Vec<(f64, f64)>> {
    band.split(|&(x, lo, hi)| !(x.is_finite() && lo.is_finite() && hi.is_finite()))
        .filter(|run| run.len() >= 2)
        .map(|run| {
            run.iter()
                .map(|&(x, _, hi)| (x, hi))
                .chain(run.iter().rev().map(|&(x, lo, _)| (x, lo)))
                .collect()
        })
        .collect()
}

/// Draw test accuracy (%) against wall time (minutes) for `series` into `path`.
pub fn accuracy_png(path: &Path, title: &str, series: &[Series]) -> Result<(), PlotError> {
    accuracy_png_with(path, title, "wall time (minutes)", series)
}

/// [`accuracy_png`] with another x axis, named `x_desc` (e.g. virtual hours).
pub fn accuracy_png_with(
    path: &Path,
    title: &str,
    x_desc: &str,
    series: &[Series],
) -> Result<(), PlotError> {
    let err = |what: String| PlotError {
        path: path.display().to_string(),
        what,
    };
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let panel = Panel {
        title: title.to_string(),
        series: series.to_vec(),
    };
    draw_panel(&root, &panel, x_desc, x_max(series), &LARGE).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))
}

/// One panel of a grid: a title and its curves.
pub struct Panel {
    /// Panel caption.
    pub title: String,
    /// Its curves.
    pub series: Vec<Series>,
}

/// Draw `panels` side by side (`columns` per row) into one PNG, each as test accuracy (%)
/// against `x_desc`, all panels sharing the x range so they compare at a glance.
pub fn accuracy_grid_png(
    path: &Path,
    x_desc: &str,
    columns: usize,
    panels: &[Panel],
) -> Result<(), PlotError> {
    let err = |what: String| PlotError {
        path: path.display().to_string(),
        what,
    };
    let columns = columns.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(columns).max(1);
    let all: Vec<Series> = panels.iter().flat_map(|p| p.series.clone()).collect();
    let x_max = x_max(&all);
    let root =
        BitMapBackend::new(path, (420 * columns as u32, 300 * rows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    for (area, panel) in root.split_evenly((rows, columns)).iter().zip(panels) {
        draw_panel(area, panel, x_desc, x_max, &SMALL).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

/// Sizes of a plot's parts: one large figure or a panel of a grid.
struct Style {
    margin: u32,
    x_label_area: u32,
    y_label_area: u32,
    caption: u32,
    legend_font: u32,
    legend_line: i32,
    y_desc: &'static str,
    /// Circles on the points (a panel of a grid is too small for them).
    markers: bool,
}

const LARGE: Style = Style {
    margin: 20,
    x_label_area: 45,
    y_label_area: 55,
    caption: 22,
    legend_font: 15,
    legend_line: 20,
    y_desc: "test accuracy (%)",
    markers: true,
};

const SMALL: Style = Style {
    margin: 10,
    x_label_area: 35,
    y_label_area: 40,
    caption: 15,
    legend_font: 12,
    legend_line: 15,
    y_desc: "accuracy (%)",
    markers: false,
};

/// The largest x over `series` (at least 1, so an empty plot still has an axis).
fn x_max(series: &[Series]) -> f64 {
    series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| x.is_finite())
        .fold(1.0f64, f64::max)
}

/// Axes, curves and legend of `panel` on `area`, x from 0 to `x_max`.
fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    panel: &Panel,
    x_desc: &str,
    x_max: f64,
    style: &Style,
) -> Result<(), String> {
    let text = fonts_available();
    let mut builder = ChartBuilder::on(area);
    builder
        .margin(style.margin)
        .x_label_area_size(style.x_label_area)
        .y_label_area_size(style.y_label_area);
    if text {
        builder.caption(&panel.title, ("sans-serif", style.caption));
    }
    let mut chart = builder
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..100.0)
        .map_err(|e| e.to_string())?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc(x_desc).y_desc(style.y_desc);
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| e.to_string())?;
    let colors = [BLUE, RED, GREEN, MAGENTA, BLACK, CYAN];
    for (i, s) in panel.series.iter().enumerate() {
        let color = colors[i % colors.len()];
        let len = style.legend_line;
        chart
            .draw_series(
                band_polygons(&s.band)
                    .into_iter()
                    .map(|poly| Polygon::new(poly, color.mix(0.15).filled())),
            )
            .map_err(|e| e.to_string())?;
        let line = chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        if text {
            line.label(s.name.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + len, y)], color.stroke_width(2))
            });
        }
        if style.markers {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| e.to_string())?;
        }
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", style.legend_font))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_is_cut_at_gaps_and_closed() {
        let band = [
            (0.0, 1.0, 3.0),
            (1.0, 2.0, 4.0),
            (2.0, f64::NAN, f64::NAN),
            (3.0, 1.0, 2.0),
            (4.0, 1.0, 2.0),
            (5.0, 0.0, 1.0),
        ];
        let polys = band_polygons(&band);
        assert_eq!(polys.len(), 2);
        assert_eq!(
            polys[0],
            vec![(0.0, 3.0), (1.0, 4.0), (1.0, 2.0), (0.0, 1.0)]
        );
        assert_eq!(polys[1].len(), 6);
        // A lone finite point has no area.
        assert!(band_polygons(&[(0.0, 1.0, 2.0)]).is_empty());
    }
}

/// One column of an [`estimates_png`]: a label, the mean with its interval, and the
/// values it summarises (one per seed).
#[derive(Debug, Clone, Default)]
pub struct IntervalColumn {
    /// Column label (a policy).
    pub label: String,
    /// Mean over the values.
    pub mean: f64,
    /// Interval around the mean (the mean itself for one value).
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
    /// The values, drawn as small dots beside the mean.
    pub values: Vec<f64>,
}

/// Means with their intervals, one column per [`IntervalColumn`] (e.g. each policy's average JCT
/// over seeds): a filled dot at the mean, a whisker over the interval, the seeds' own
/// values as small dots. The y axis starts at 0 so that ratios read off the picture.
pub fn estimates_png(
    path: &Path,
    title: &str,
    y_desc: &str,
    columns: &[IntervalColumn],
) -> Result<(), PlotError> {
    let err = |what: String| PlotError {
        path: path.display().to_string(),
        what,
    };
    let y_max = columns
        .iter()
        .flat_map(|c| c.values.iter().copied().chain([c.hi, c.mean]))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.1;
    let n = columns.len().max(1);
    let root = BitMapBackend::new(path, ((140 * n as u32).max(420), 360)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let text = fonts_available();
    let mut builder = ChartBuilder::on(&root);
    builder
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(60);
    if text {
        builder.caption(title, ("sans-serif", 20));
    }
    let mut chart = builder
        .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..y_max)
        .map_err(|e| err(e.to_string()))?;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            columns
                .get(i as usize)
                .map_or(String::new(), |c| c.label.clone())
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&label);
    if text {
        mesh.y_desc(y_desc);
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| err(e.to_string()))?;
    for (i, c) in columns.iter().enumerate() {
        let x = i as f64;
        let whisker = [
            (x - 0.12, c.lo),
            (x + 0.12, c.lo),
            (x, c.lo),
            (x, c.hi),
            (x - 0.12, c.hi),
            (x + 0.12, c.hi),
        ];
        chart
            .draw_series([
                PathElement::new(whisker[0..2].to_vec(), BLUE.stroke_width(2)),
                PathElement::new(whisker[2..4].to_vec(), BLUE.stroke_width(2)),
                PathElement::new(whisker[4..6].to_vec(), BLUE.stroke_width(2)),
            ])
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series([Circle::new((x, c.mean), 6, BLUE.filled())])
            .map_err(|e| err(e.to_string()))?;
        let k = c.values.len().max(1) as f64;
        chart
            .draw_series(c.values.iter().enumerate().map(|(j, &v)| {
                // Spread side by side to the right of the whisker, so equal values stay visible.
                Circle::new((x + 0.2 + 0.15 * j as f64 / k, v), 3, BLACK.filled())
            }))
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))
}
