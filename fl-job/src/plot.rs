//! Accuracy-versus-time curves as PNG.
//!
//! Text needs a font registered from bytes (plotters' `ab_glyph`). No font is embedded in
//! the repository; DejaVu Sans is loaded from the system when present, otherwise the plot
//! is drawn with axes, grid and curves but no text.

use std::path::Path;

use plotters::prelude::*;

use crate::error::FlError;

/// Where DejaVu Sans usually lives on Debian/Ubuntu.
const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Register a system font as "sans-serif" once; whether text can be drawn.
fn font_available() -> bool {
    static FONT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FONT.get_or_init(|| {
        FONT_PATHS.iter().any(|p| {
            std::fs::read(p).is_ok_and(|bytes| {
                // Leaked once per process: plotters keeps fonts for the program's lifetime.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            })
        })
    })
}

/// One curve: a name and (minutes, accuracy %) points.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
}

/// Draw test accuracy (%) against wall time (minutes) for `series` into `path`.
pub fn accuracy_png(path: &Path, title: &str, series: &[Series]) -> Result<(), FlError> {
    accuracy_png_with(path, title, "wall time (minutes)", series)
}

/// [`accuracy_png`] with another x axis, named `x_desc` (e.g. virtual hours).
pub fn accuracy_png_with(
    path: &Path,
    title: &str,
    x_desc: &str,
    series: &[Series],
) -> Result<(), FlError> {
    let err = |e: String| FlError::Config(format!("plot {}: {e}", path.display()));
    let text = font_available();
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(55);
    if text {
        builder.caption(title, ("sans-serif", 22));
    }
    let mut chart = builder
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..100.0)
        .map_err(|e| err(e.to_string()))?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc(x_desc).y_desc("test accuracy (%)");
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| err(e.to_string()))?;
    let colors = [BLUE, RED, GREEN, MAGENTA, BLACK, CYAN];
    for (i, s) in series.iter().enumerate() {
        let color = colors[i % colors.len()];
        let line = chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(e.to_string()))?;
        if text {
            line.label(s.name.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        }
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
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
) -> Result<(), FlError> {
    let err = |e: String| FlError::Config(format!("plot {}: {e}", path.display()));
    let text = font_available();
    let columns = columns.clamp(1, panels.len().max(1));
    let rows = panels.len().div_ceil(columns).max(1);
    let x_max = panels
        .iter()
        .flat_map(|p| p.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)))
        .fold(1e-9f64, f64::max);
    let (w, h) = (420 * columns as u32, 300 * rows as u32);
    let root = BitMapBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let colors = [BLUE, RED, GREEN, MAGENTA, BLACK, CYAN];
    for (area, panel) in root.split_evenly((rows, columns)).iter().zip(panels) {
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(40);
        if text {
            builder.caption(&panel.title, ("sans-serif", 15));
        }
        let mut chart = builder
            .build_cartesian_2d(0.0..x_max * 1.02, 0.0..100.0)
            .map_err(|e| err(e.to_string()))?;
        let mut mesh = chart.configure_mesh();
        if text {
            mesh.x_desc(x_desc).y_desc("accuracy (%)");
        } else {
            mesh.x_labels(0).y_labels(0);
        }
        mesh.draw().map_err(|e| err(e.to_string()))?;
        for (i, s) in panel.series.iter().enumerate() {
            let color = colors[i % colors.len()];
            let line = chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| err(e.to_string()))?;
            if text {
                line.label(s.name.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 15, y)], color.stroke_width(2))
                });
            }
        }
        if text {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .position(SeriesLabelPosition::LowerRight)
                .draw()
                .map_err(|e| err(e.to_string()))?;
        }
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}
