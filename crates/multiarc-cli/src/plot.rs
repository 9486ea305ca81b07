//! SVG line charts for `bench` (throughput by threads) and `replay`
//! (hit ratio by capacity), drawn with `plotters`.

use anyhow::Context;
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
    let draw = |chart_result: Result<(), String>| chart_result.map_err(|e| anyhow::anyhow!(e));
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    let styles = |i: usize| Palette99::pick(i).stroke_width(2);
    if log_x {
        let mut chart = builder
            .build_cartesian_2d((x_min..x_max).log_scale(), 0.0..y_max)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (i, s) in series.iter().enumerate() {
            draw(
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), styles(i)))
                    .map(|a| {
                        a.label(s.name.as_str()).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], styles(i))
                        });
                    })
                    .map_err(|e| e.to_string()),
            )?;
            draw(
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .map(|&p| Circle::new(p, 3, styles(i).filled())),
                    )
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            )?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    } else {
        let mut chart = builder
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        for (i, s) in series.iter().enumerate() {
            draw(
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), styles(i)))
                    .map(|a| {
                        a.label(s.name.as_str()).legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], styles(i))
                        });
                    })
                    .map_err(|e| e.to_string()),
            )?;
            draw(
                chart
                    .draw_series(
                        s.points
                            .iter()
                            .map(|&p| Circle::new(p, 3, styles(i).filled())),
                    )
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
            )?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    root.present()
        .with_context(|| format!("writing plot {}", path.display()))?;
    Ok(())
}
