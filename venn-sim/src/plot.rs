//! PNG line charts via `plotters`, with text only when a system font exists.
//!
//! `plotters` draws text through `ab_glyph`, which needs a font registered
//! from bytes. We look for a TrueType font in the usual system places (or
//! `$VENN_PLOT_FONT`); machines without one (some CI images) still get the
//! chart, drawn without captions, axis labels or legend.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// Where we look for a font, first hit wins.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// Registers a system font once per process; returns whether text can be drawn.
pub fn fonts_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let env = std::env::var("VENN_PLOT_FONT").ok();
        let paths = env
            .iter()
            .map(String::as_str)
            .chain(FONT_CANDIDATES.iter().copied());
        for p in paths {
            if let Ok(bytes) = std::fs::read(p) {
                // The registry wants 'static bytes; one font per process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    tracing::debug!(font = p, "registered plot font");
                    return true;
                }
            }
        }
        tracing::warn!("no TrueType font found; plots are drawn without text (set VENN_PLOT_FONT)");
        false
    })
}

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {what}")]
pub struct PlotError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub what: String,
}

fn span(v: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi - lo < 1e-12 {
        return (lo - 0.5, hi + 0.5);
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// Draws a line chart with points to `path` (PNG, 800×500).
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), PlotError> {
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        what: e,
    };
    let text = fonts_available();
    let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (x0, x1) = span(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (y0, y1) = span(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let mut b = ChartBuilder::on(&root);
    b.margin(15);
    if text {
        b.caption(title, ("sans-serif", 22))
            .x_label_area_size(45)
            .y_label_area_size(70);
    }
    let mut chart = b
        .build_cartesian_2d(x0..x1, y0.min(0.0)..y1)
        .map_err(|e| err(e.to_string()))?;
    let mut mesh = chart.configure_mesh();
    if text {
        mesh.x_desc(x_label).y_desc(y_label);
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| err(e.to_string()))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let drawn = chart
            .draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| err(e.to_string()))?;
        if text {
            drawn
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| err(e.to_string()))?;
    }
    if text && series.len() > 1 {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_with_or_without_fonts() {
        let dir = std::env::temp_dir().join(format!("venn-sim-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.png");
        let s = vec![
            Series {
                name: "a".into(),
                points: vec![(1.0, 2.0), (2.0, 3.0), (3.0, 2.5)],
            },
            Series {
                name: "b".into(),
                points: vec![(1.0, 1.0), (3.0, 1.0)],
            },
        ];
        line_chart(&p, "title", "x", "y", &s).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
        std::fs::remove_dir_all(&dir).ok();
    }
}
