//! The one font rule of every plot: `plotters` draws text through `ab_glyph`, which needs a
//! font registered from bytes. No font is embedded in the repository; a TrueType font is
//! looked for in the usual system places (or `$VENN_PLOT_FONT`), and machines without one
//! (some CI images) still get the chart, drawn without captions, axis labels or legend.

use std::sync::OnceLock;

use plotters::style::FontStyle;

/// Where we look for a font after `$VENN_PLOT_FONT`, first hit wins.
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

/// Registers a system font as "sans-serif" once per process; returns whether text can be
/// drawn.
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
