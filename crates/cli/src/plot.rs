//! SVG plots (plotters, SVG backend: no font files needed, text is SVG
//! text).

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use schedlab_scenarios::suite::{range, RowResult};

use crate::Failure;

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A drawing step's error, as text.
fn text<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// `(lo, hi)` of `values` and 1, the finite ones.
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values
        .filter(|v| v.is_finite())
        .fold((1.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// `r`'s head range and head/base, each over the base's median.
fn head_scaled(r: &RowResult) -> (f64, f64, f64) {
    let b = r.base_median();
    let d = if b == 0.0 { 1.0 } else { b };
    let (hl, hh) = range(&r.head);
    (hl / d, hh / d, r.ratio())
}

/// The frame every suite plot shares: one line per row (`rows`, top
/// first), the ratio on x over `span`, a line at `mark` (1, or 0 on a
/// log axis), `draw`'s series, and the legend of the series it labelled.
#[allow(clippy::too_many_arguments)]
fn rows_chart(
    path: &Path,
    height: u32,
    caption: &str,
    x_desc: &str,
    rows: &[&str],
    span: (f64, f64),
    mark: f64,
    draw: impl FnOnce(&mut Chart<'_, '_>) -> Result<(), String>,
) -> Result<(), Failure> {
    let frame = || -> Result<(), String> {
        let (lo, hi) = span;
        let pad = (hi - lo).max(0.02) * 0.08;
        let n = rows.len();
        let root = SVGBackend::new(path, (900, height)).into_drawing_area();
        root.fill(&WHITE).map_err(text)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(210)
            .build_cartesian_2d((lo - pad)..(hi + pad), -0.5f64..(n as f64 - 0.5))
            .map_err(text)?;
        chart
            .configure_mesh()
            // Only the bold lines: with many rows the light ones fill the
            // chart.
            .light_line_style(WHITE)
            .y_labels(n)
            .y_label_formatter(&|y| {
                let i = y.round();
                if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                    rows[n - 1 - i as usize].to_string()
                } else {
                    String::new()
                }
            })
            .x_desc(x_desc)
            .draw()
            .map_err(text)?;
        chart
            .draw_series(LineSeries::new(
                [(mark, -0.5), (mark, n as f64 - 0.5)],
                BLACK.mix(0.4),
            ))
            .map_err(text)?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(text)?;
        root.present().map_err(text)
    };
    frame().map_err(|e| Failure::Input(format!("{}: cannot plot: {e}", path.display())))
}

/// A legend entry only: an empty series with its label.
fn legend(chart: &mut Chart<'_, '_>, colour: RGBColor, label: String) -> Result<(), String> {
    let none: [(f64, f64); 0] = [];
    chart
        .draw_series(LineSeries::new(none, colour.stroke_width(3)))
        .map_err(text)?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(3)));
    Ok(())
}

/// A range bar at `y` and, when finite, the ratio's dot (solid when the
/// row resolves).
fn bar_and_dot(
    chart: &mut Chart<'_, '_>,
    colour: RGBColor,
    y: f64,
    (lo, hi, ratio): (f64, f64, f64),
    resolves: bool,
) -> Result<(), String> {
    chart
        .draw_series(LineSeries::new([(lo, y), (hi, y)], colour.stroke_width(3)))
        .map_err(text)?;
    if ratio.is_finite() {
        let style = if resolves {
            colour.filled()
        } else {
            colour.mix(0.5).filled()
        };
        chart
            .draw_series([Circle::new((ratio, y), 4, style)])
            .map_err(text)?;
    }
    Ok(())
}

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
    let base_scaled = |r: &RowResult| {
        let b = r.base_median();
        let d = if b == 0.0 { 1.0 } else { b };
        let (bl, bh) = range(&r.base);
        (bl / d, bh / d)
    };
    let span = bounds(results.iter().flat_map(|r| {
        let ((bl, bh), (hl, hh, ratio)) = (base_scaled(r), head_scaled(r));
        [bl, bh, hl, hh, ratio]
    }));
    let n = results.len();
    let rows: Vec<&str> = results.iter().map(|r| r.row.name).collect();
    rows_chart(
        path,
        120 + 26 * n as u32,
        &format!("{head} / {base} on {topology}: medians and each side's range"),
        "head / base (the base's median is 1)",
        &rows,
        span,
        1.0,
        |chart| {
            for (i, r) in results.iter().enumerate() {
                let y = (n - 1 - i) as f64;
                let (bl, bh) = base_scaled(r);
                chart
                    .draw_series(LineSeries::new(
                        [(bl, y + 0.15), (bh, y + 0.15)],
                        BLUE.stroke_width(3),
                    ))
                    .map_err(text)?;
                bar_and_dot(chart, RED, y - 0.15, head_scaled(r), r.resolves())?;
            }
            legend(chart, BLUE, format!("{base}: range over seeds"))?;
            legend(
                chart,
                RED,
                format!("{head}: range; dot: head/base of medians (solid: resolves)"),
            )
        },
    )
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
    let span = bounds(pairs.iter().flatten().flat_map(|r| {
        let (a, b, c) = head_scaled(r);
        [a, b, c]
    }));
    let n = pairs.len();
    let k = names.len() - 1;
    let colour = |j: usize| {
        let (r, g, b) = Palette99::pick(j).rgb();
        RGBColor(r, g, b)
    };
    let rows: Vec<&str> = pairs.iter().map(|p| p[0].row.name).collect();
    rows_chart(
        path,
        120 + (14 + 10 * k as u32) * n as u32,
        &format!(
            "each policy / {} on {topology}: medians and ranges",
            names[0]
        ),
        &format!("policy / {} (the base's median is 1)", names[0]),
        &rows,
        span,
        1.0,
        |chart| {
            for (i, p) in pairs.iter().enumerate() {
                for (j, r) in p.iter().enumerate() {
                    let y = (n - 1 - i) as f64 + 0.3 - 0.6 * (j as f64 + 0.5) / k as f64;
                    bar_and_dot(chart, colour(j), y, head_scaled(r), r.resolves())?;
                }
            }
            for (j, name) in names[1..].iter().enumerate() {
                legend(chart, colour(j), name.clone())?;
            }
            Ok(())
        },
    )
}

/// `validate`'s plot: per figure (`label`, sim/real, band low, band high,
/// all over the real median), the band as a bar and sim/real as a dot
/// (green inside its band, red outside), on a log10 axis.
pub fn validate_svg(
    path: &Path,
    dots: &[(String, f64, f64, f64)],
    caption: &str,
) -> Result<(), Failure> {
    let l = |v: f64| if v > 0.0 { v.log10() } else { f64::NAN };
    let span = bounds(
        dots.iter()
            .flat_map(|d| [l(d.1), l(d.2), l(d.3)])
            .map(|v| v + 1.0),
    );
    let span = (span.0 - 1.0, span.1 - 1.0);
    let n = dots.len();
    let rows: Vec<&str> = dots.iter().map(|d| d.0.as_str()).collect();
    rows_chart(
        path,
        120 + 18 * n as u32,
        caption,
        "log10(sim / real): 0 is the real median; bar: the tolerance band",
        &rows,
        span,
        0.0,
        |chart| {
            for (i, &(_, ratio, lo, hi)) in dots.iter().enumerate() {
                let y = (n - 1 - i) as f64;
                let inside = lo <= ratio && ratio <= hi;
                let colour = if inside { GREEN } else { RED };
                chart
                    .draw_series(LineSeries::new(
                        [(l(lo), y), (l(hi), y)],
                        BLUE.mix(0.5).stroke_width(3),
                    ))
                    .map_err(text)?;
                if ratio.is_finite() && ratio > 0.0 {
                    chart
                        .draw_series([Circle::new((l(ratio), y), 4, colour.filled())])
                        .map_err(text)?;
                }
            }
            legend(
                chart,
                BLUE,
                "tolerance band (real p25 / 1.25 to p75 * 1.25)".into(),
            )?;
            legend(chart, GREEN, "sim / real, within".into())?;
            legend(chart, RED, "sim / real, outside".into())
        },
    )
}
