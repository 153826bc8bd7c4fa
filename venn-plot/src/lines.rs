//! Line charts (several named series against one x axis) as PNG: the simulator's sweeps,
//! overhead and admission plots.

use std::path::Path;

use plotters::prelude::*;

use crate::PlotError;
use crate::font::fonts_available;

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
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
