//! SVG line charts for `bench` (throughput by threads) and `replay`
//! (hit ratio by capacity), drawn with `plotters`.

use anyhow::Context;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

/// One line of a chart: a name for the legend and its (x, y) points.
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points in increasing x.
    pub points: Vec<(f64, f64)>,
}

/// Draws `series` as lines with markers into an SVG file at `path`.
/// `log_x` uses a logarithmic x axis (thread counts, cache sizes).
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> anyhow::Result<()> {
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in pts {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    anyhow::ensure!(x_min.is_finite(), "nothing to plot");
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    let labels = (x_label, y_label);
    if log_x {
        let chart = builder
            .build_cartesian_2d((x_min..x_max).log_scale(), 0.0..y_max)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        draw_series(chart, labels, series)?;
    } else {
        let chart = builder
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        draw_series(chart, labels, series)?;
    }
    root.present()
        .with_context(|| format!("writing plot {}", path.display()))?;
    Ok(())
}

/// Draws the mesh, one line with markers per series, and the legend, on a
/// chart with either kind of x axis.
fn draw_series<'a, X>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    (x_label, y_label): (&str, &str),
    series: &[Series],
) -> anyhow::Result<()>
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    let style = |i: usize| Palette99::pick(i).stroke_width(2);
    for (i, s) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), style(i)))
            .map_err(|e| err(&e))?
            .label(s.name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style(i)));
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, style(i).filled())),
            )
            .map_err(|e| err(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    Ok(())
}
