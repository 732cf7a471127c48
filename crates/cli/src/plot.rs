//! SVG plots (plotters, SVG backend: no font files needed, text is SVG
//! text).

use std::path::Path;

use plotters::prelude::*;
use schedlab_scenarios::suite::{range, RowResult};

use crate::Failure;

/// The suite as one line per row: head/base of the medians (a dot), the
/// head's range (red bar) and the base's (blue bar), both divided by the
/// base's median, so 1 is the base and the bars show how far seeds spread.
pub fn suite_svg(
    path: &Path,
    results: &[RowResult],
    base: &str,
    head: &str,
    topology: &str,
) -> Result<(), Failure> {
    let err = |e: String| Failure::Input(format!("{}: cannot plot: {e}", path.display()));
    let scaled = |r: &RowResult| {
        let b = r.base_median();
        let (bl, bh) = range(&r.base);
        let (hl, hh) = range(&r.head);
        let d = if b == 0.0 { 1.0 } else { b };
        (bl / d, bh / d, hl / d, hh / d, r.ratio())
    };
    let (lo, hi) = results
        .iter()
        .map(scaled)
        .flat_map(|(a, b, c, d, e)| [a, b, c, d, e])
        .filter(|v| v.is_finite())
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = (hi - lo).max(0.02) * 0.08;
    let n = results.len();
    let height = 120 + 26 * n as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let names: Vec<&str> = results.iter().map(|r| r.row.name).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{head} / {base} on {topology}: medians and each side's range"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(210)
        .build_cartesian_2d((lo - pad)..(hi + pad), -0.5f64..(n as f64 - 0.5))
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .y_labels(n)
        .y_label_formatter(&|y| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                names[n - 1 - i as usize].to_string()
            } else {
                String::new()
            }
        })
        .x_desc("head / base (the base's median is 1)")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(LineSeries::new(
            [(1.0, -0.5), (1.0, n as f64 - 0.5)],
            BLACK.mix(0.4),
        ))
        .map_err(|e| err(e.to_string()))?;
    for (i, r) in results.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        let (bl, bh, hl, hh, ratio) = scaled(r);
        chart
            .draw_series(LineSeries::new(
                [(bl, y + 0.15), (bh, y + 0.15)],
                BLUE.stroke_width(3),
            ))
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(LineSeries::new(
                [(hl, y - 0.15), (hh, y - 0.15)],
                RED.stroke_width(3),
            ))
            .map_err(|e| err(e.to_string()))?;
        if ratio.is_finite() {
            let style = if r.resolves() {
                RED.filled()
            } else {
                RED.mix(0.5).filled()
            };
            chart
                .draw_series([Circle::new((ratio, y - 0.15), 4, style)])
                .map_err(|e| err(e.to_string()))?;
        }
    }
    // The legend: empty series that only carry labels.
    let none: [(f64, f64); 0] = [];
    chart
        .draw_series(LineSeries::new(none, BLUE.stroke_width(3)))
        .map_err(|e| err(e.to_string()))?
        .label(format!("{base}: range over seeds"))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLUE.stroke_width(3)));
    chart
        .draw_series(LineSeries::new(none, RED.stroke_width(3)))
        .map_err(|e| err(e.to_string()))?
        .label(format!(
            "{head}: range; dot: head/base of medians (solid: resolves)"
        ))
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], RED.stroke_width(3)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The several-policy suite: per row, each policy's median over the
/// base's (a dot, solid when it resolves) and its range over the seeds,
/// one colour per policy.
pub fn several_svg(
    path: &Path,
    pairs: &[Vec<RowResult>],
    names: &[String],
    topology: &str,
) -> Result<(), Failure> {
    let err = |e: String| Failure::Input(format!("{}: cannot plot: {e}", path.display()));
    let scaled = |r: &RowResult| {
        let b = r.base_median();
        let d = if b == 0.0 { 1.0 } else { b };
        let (hl, hh) = range(&r.head);
        (hl / d, hh / d, r.ratio())
    };
    let (lo, hi) = pairs
        .iter()
        .flatten()
        .map(scaled)
        .flat_map(|(a, b, c)| [a, b, c])
        .filter(|v| v.is_finite())
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = (hi - lo).max(0.02) * 0.08;
    let n = pairs.len();
    let k = names.len() - 1;
    let height = 120 + (14 + 10 * k as u32) * n as u32;
    let root = SVGBackend::new(path, (900, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let rows: Vec<&str> = pairs.iter().map(|p| p[0].row.name).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "each policy / {} on {topology}: medians and ranges",
                names[0]
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(210)
        .build_cartesian_2d((lo - pad)..(hi + pad), -0.5f64..(n as f64 - 0.5))
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .y_labels(n)
        .y_label_formatter(&|y| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                rows[n - 1 - i as usize].to_string()
            } else {
                String::new()
            }
        })
        .x_desc(format!("policy / {} (the base's median is 1)", names[0]))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    chart
        .draw_series(LineSeries::new(
            [(1.0, -0.5), (1.0, n as f64 - 0.5)],
            BLACK.mix(0.4),
        ))
        .map_err(|e| err(e.to_string()))?;
    for (i, p) in pairs.iter().enumerate() {
        for (j, r) in p.iter().enumerate() {
            let c = Palette99::pick(j);
            let y = (n - 1 - i) as f64 + 0.3 - 0.6 * (j as f64 + 0.5) / k as f64;
            let (hl, hh, ratio) = scaled(r);
            chart
                .draw_series(LineSeries::new([(hl, y), (hh, y)], c.stroke_width(2)))
                .map_err(|e| err(e.to_string()))?;
            if ratio.is_finite() {
                let style = if r.resolves() {
                    c.filled()
                } else {
                    c.mix(0.4).filled()
                };
                chart
                    .draw_series([Circle::new((ratio, y), 4, style)])
                    .map_err(|e| err(e.to_string()))?;
            }
        }
    }
    let none: [(f64, f64); 0] = [];
    for (j, name) in names[1..].iter().enumerate() {
        let c = Palette99::pick(j);
        chart
            .draw_series(LineSeries::new(none, c.stroke_width(3)))
            .map_err(|e| err(e.to_string()))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], c.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}
