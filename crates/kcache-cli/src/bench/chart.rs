//! The PNG chart: per configuration, the median sync wall time (with its min–max) and the
//! memory (peak RSS, RSS after sync), as horizontal bars; the limit lines (the server's cost
//! alone) in grey.
//!
//! Drawn with plotters' bitmap backend only. Text needs a TrueType font, which plotters gets
//! through `ab_glyph` from bytes we hand it: the first of a few usual system paths that exists
//! (DejaVu, Liberation). Without one the bars are drawn without text; the numbers are in
//! results.md either way.

use std::{path::Path, sync::OnceLock};

use anyhow::Context as _;
use plotters::prelude::*;

use super::row::Row;

const FONT_PATHS: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Registers a system font with plotters once; `true` when text can be drawn.
fn font_available() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        FONT_PATHS.iter().any(|path| {
            std::fs::read(path).ok().is_some_and(|bytes| {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok()
            })
        })
    })
}

/// The bar colour: one per peer, grey for the limit line (the server's cost alone).
fn color(row: &Row) -> RGBColor {
    if row.is_limit() {
        return RGBColor(140, 140, 140);
    }
    match row.peer.as_str() {
        "kcache" => RGBColor(230, 120, 20),
        "client-go" => RGBColor(40, 110, 200),
        _ => RGBColor(60, 160, 80),
    }
}

const ROW_H: i32 = 30;
const TOP: i32 = 70;
const LABEL_W: i32 = 300;
const PANEL_W: i32 = 480;
const GAP: i32 = 120;

/// Draws `chart-N.png` for the rows of one N.
///
/// # Errors
/// When the PNG cannot be written or drawing fails.
pub(super) fn draw(path: &Path, n: usize, rows: &[&Row]) -> anyhow::Result<()> {
    let text = font_available();
    let height = (TOP + ROW_H * rows.len() as i32 + 50).max(200);
    let width = LABEL_W + 2 * PANEL_W + GAP + 40;
    let root = BitMapBackend::new(path, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE).context("filling the background")?;
    let median = |row: &Row, key: &str| row.figures.get(key).map(|s| (s.median, s.min, s.max));
    let max_of = |key: &str| {
        rows.iter()
            .filter_map(|r| median(r, key).map(|m| m.2))
            .fold(0.0_f64, f64::max)
            .max(1e-9)
    };
    let sync_max = max_of("sync_ms");
    let mem_max = max_of("vmhwm_mb").max(max_of("rss_after_sync_mb"));
    let x1 = LABEL_W;
    let x2 = LABEL_W + PANEL_W + GAP;
    let scale = |v: f64, max: f64| (v / max * f64::from(PANEL_W - 70)) as i32;
    let style = |size: u32| ("sans-serif", size).into_font().color(&BLACK);
    if text {
        let title = format!("kcache bench, {n} pods: sync wall time and memory (medians)");
        root.draw(&Text::new(title, (10, 10), style(20)))?;
        root.draw(&Text::new(
            "sync wall (ms), whisker = min–max",
            (x1, 45),
            style(14),
        ))?;
        root.draw(&Text::new(
            "peak RSS (light) and RSS after sync (dark), MB",
            (x2, 45),
            style(14),
        ))?;
    }
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as i32;
        let c = color(row);
        if text {
            root.draw(&Text::new(row.label.clone(), (10, y + 6), style(14)))?;
        }
        if let Some((m, lo, hi)) = median(row, "sync_ms") {
            let w = scale(m, sync_max);
            root.draw(&Rectangle::new(
                [(x1, y + 4), (x1 + w, y + ROW_H - 4)],
                c.filled(),
            ))?;
            let (a, b) = (x1 + scale(lo, sync_max), x1 + scale(hi, sync_max));
            let mid = y + ROW_H / 2;
            root.draw(&PathElement::new(
                vec![(a, mid), (b, mid)],
                BLACK.stroke_width(1),
            ))?;
            if text {
                root.draw(&Text::new(
                    format!("{m:.0}"),
                    (x1 + w.max(scale(hi, sync_max)) + 6, y + 6),
                    style(13),
                ))?;
            }
        }
        if let Some((peak, _, _)) = median(row, "vmhwm_mb") {
            let w = scale(peak, mem_max);
            root.draw(&Rectangle::new(
                [(x2, y + 4), (x2 + w, y + ROW_H - 4)],
                c.mix(0.35).filled(),
            ))?;
            if let Some((after, _, _)) = median(row, "rss_after_sync_mb") {
                let w2 = scale(after, mem_max);
                root.draw(&Rectangle::new(
                    [(x2, y + 9), (x2 + w2, y + ROW_H - 9)],
                    c.filled(),
                ))?;
                if text {
                    root.draw(&Text::new(
                        format!("{peak:.0} / {after:.0}"),
                        (x2 + w + 6, y + 6),
                        style(13),
                    ))?;
                }
            }
        }
    }
    root.present().context("writing the PNG")?;
    Ok(())
}
