//! Horizontal stacked bars as PNG: what a job's completion time is made of (scheduling
//! delay, response collection, aborted attempts) per job and policy, for runs without
//! evaluations, where an accuracy chart would have nothing to show.

use std::path::Path;

use plotters::prelude::*;

use crate::PlotError;
use crate::font::fonts_available;

/// One bar: its label and its segments' lengths, in the order of the chart's segment names.
#[derive(Clone, Debug)]
pub struct Bar {
    /// Row label (a job, or a job and a policy).
    pub label: String,
    /// Segment lengths (non-finite or negative ones are drawn as 0).
    pub segments: Vec<f64>,
}

/// Draws `bars`, one row each from the top, their segments stacked left to right in the
/// colours of `segment_names` (the legend), to `path`.
pub fn stacked_bars_png(
    path: &Path,
    title: &str,
    x_desc: &str,
    segment_names: &[&str],
    bars: &[Bar],
) -> Result<(), PlotError> {
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        what: e,
    };
    let len = |v: f64| if v.is_finite() { v.max(0.0) } else { 0.0 };
    let x_max = bars
        .iter()
        .map(|b| b.segments.iter().copied().map(len).sum::<f64>())
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.05;
    let n = bars.len().max(1);
    let text = fonts_available();
    let height = (60 + 18 * n as u32).max(300);
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut b = ChartBuilder::on(&root);
    b.margin(15);
    if text {
        b.caption(title, ("sans-serif", 20))
            .x_label_area_size(40)
            .y_label_area_size(260);
    }
    let mut chart = b
        .build_cartesian_2d(0.0..x_max, 0.0..n as f64)
        .map_err(|e| err(e.to_string()))?;
    // Row i is drawn from the top: y = n - i - 1 .. n - i.
    let label = |y: &f64| {
        let i = n as f64 - y.floor() - 1.0;
        if (y - y.floor() - 0.5).abs() < 1e-6 && i >= 0.0 {
            bars.get(i as usize)
                .map_or(String::new(), |b| b.label.clone())
        } else {
            String::new()
        }
    };
    let mut mesh = chart.configure_mesh();
    mesh.disable_y_mesh()
        .y_labels(2 * n + 1)
        .y_label_formatter(&label);
    if text {
        mesh.x_desc(x_desc);
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(|e| err(e.to_string()))?;
    for (k, name) in segment_names.iter().enumerate() {
        let colour = Palette99::pick(k).to_rgba();
        let rects = bars.iter().enumerate().map(|(i, b)| {
            let x0: f64 = b.segments[..k.min(b.segments.len())]
                .iter()
                .copied()
                .map(len)
                .sum();
            let x1 = x0 + b.segments.get(k).copied().map_or(0.0, len);
            let y = (n - i - 1) as f64;
            Rectangle::new([(x0, y + 0.15), (x1, y + 0.85)], colour.filled())
        });
        let drawn = chart.draw_series(rects).map_err(|e| err(e.to_string()))?;
        if text {
            drawn.label(*name).legend(move |(x, y)| {
                Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled())
            });
        }
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_png_and_tolerates_odd_segments() {
        let path = std::env::temp_dir().join(format!("venn-bars-{}.png", std::process::id()));
        let bars = [
            Bar {
                label: "a · venn".into(),
                segments: vec![2.0, 1.0, 0.5],
            },
            Bar {
                label: "b · venn".into(),
                segments: vec![f64::NAN, -1.0],
            },
        ];
        stacked_bars_png(&path, "t", "hours", &["x", "y", "z"], &bars).unwrap();
        let png = std::fs::read(&path).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        std::fs::remove_file(&path).unwrap();
    }
}
