//! SVG line charts for `bench` (throughput by threads) and `replay`
//! (hit ratio by capacity), drawn with `plotters`.

use anyhow::Context;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::path::Path;

/// Whether `--plot PATH` can draw, checked before a long run: with the
/// `plot` feature, when the directory it goes into exists.
pub fn available(path: &Path) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "--plot {}: {} is not a directory",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        anyhow::bail!("--plot {}: is a directory", path.display());
    }
    Ok(())
}

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

/// One panel of [`panel_chart`]: its title and its lines.
pub struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// The lines; a name in several panels keeps one colour.
    pub series: Vec<Series>,
}

/// Strong colours for the emphasised lines (ours), in order.
const STRONG: [RGBColor; 5] = [
    RGBColor(214, 39, 40),   // red
    RGBColor(31, 119, 180),  // blue
    RGBColor(44, 160, 44),   // green
    RGBColor(148, 103, 189), // purple
    RGBColor(255, 127, 14),  // orange
];

/// Muted colours for the other lines (peers), in order: distinct hues,
/// low saturation.
const MUTED: [RGBColor; 10] = [
    RGBColor(140, 160, 190),
    RGBColor(190, 160, 120),
    RGBColor(150, 185, 150),
    RGBColor(200, 150, 175),
    RGBColor(170, 150, 200),
    RGBColor(120, 180, 185),
    RGBColor(200, 185, 120),
    RGBColor(160, 130, 130),
    RGBColor(130, 130, 160),
    RGBColor(175, 175, 175),
];

/// Draws one panel per entry of `panels`, side by side, each with its own
/// y axis and a log2 x axis (thread counts), sharing one legend placed to the right of all of them (outside
/// the data). Lines whose name `emphasise` accepts are drawn thick in strong
/// colours, the others thin in muted ones; no two names share a colour.
pub fn panel_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    panels: &[Panel],
    emphasise: &dyn Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    anyhow::ensure!(!panels.is_empty(), "nothing to plot");
    // One colour per distinct name, in first-seen order.
    let mut names: Vec<&str> = Vec::new();
    for p in panels {
        for s in &p.series {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
    }
    let (mut strong, mut muted) = (0, 0);
    let styles: Vec<(RGBColor, u32, bool)> = names
        .iter()
        .map(|n| {
            if emphasise(n) {
                strong += 1;
                (STRONG[(strong - 1) % STRONG.len()], 3, true)
            } else {
                muted += 1;
                (MUTED[(muted - 1) % MUTED.len()], 2, false)
            }
        })
        .collect();
    let style_of = |name: &str| styles[names.iter().position(|n| *n == name).unwrap()];

    let legend_width = 210;
    let panel_width = 520;
    let width = panel_width * panels.len() as u32 + legend_width;
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(&e))?;
    let (plots, legend) = root.split_horizontally(panel_width * panels.len() as u32);
    let areas = plots.split_evenly((1, panels.len()));
    // x is drawn in log2 space (thread counts 1, 2, 4, ...), one label per
    // power of two and no minor grid lines.
    for (area, panel) in areas.iter().zip(panels) {
        let pts = panel.series.iter().flat_map(|s| s.points.iter());
        let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        for &(x, y) in pts {
            x_min = x_min.min(x.log2());
            x_max = x_max.max(x.log2());
            y_max = y_max.max(y);
        }
        if !x_min.is_finite() {
            continue;
        }
        let (x_min, x_max) = (x_min.floor(), x_max.ceil().max(x_min.floor() + 1.0));
        let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x_min - 0.1..x_max + 0.1, 0.0..y_max)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_labels((x_max - x_min) as usize + 1)
            .x_label_formatter(&|x| format!("{:.0}", x.exp2()))
            .light_line_style(WHITE.mix(0.0))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()
            .map_err(|e| err(&e))?;
        // Muted lines first, so ours are drawn on top.
        let mut order: Vec<&Series> = panel.series.iter().collect();
        order.sort_by_key(|s| style_of(&s.name).2);
        for s in order {
            let (color, width, strong) = style_of(&s.name);
            let line = color.stroke_width(width);
            let points: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x.log2(), y)).collect();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), line))
                .map_err(|e| err(&e))?;
            let r = if strong { 4 } else { 3 };
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, r, color.filled())))
                .map_err(|e| err(&e))?;
        }
    }
    // The legend, outside every panel.
    let font = ("sans-serif", 15).into_font();
    for (i, name) in names.iter().enumerate() {
        let (color, width, strong) = styles[i];
        let y = 60 + 24 * i as i32;
        legend
            .draw(&PathElement::new(
                vec![(10, y), (40, y)],
                color.stroke_width(width),
            ))
            .map_err(|e| err(&e))?;
        legend
            .draw(&Circle::new(
                (25, y),
                if strong { 4 } else { 3 },
                color.filled(),
            ))
            .map_err(|e| err(&e))?;
        let text_style = if strong {
            font.clone().style(FontStyle::Bold).color(&BLACK)
        } else {
            font.clone().color(&RGBColor(90, 90, 90))
        };
        legend
            .draw(&Text::new(name.to_string(), (48, y - 8), text_style))
            .map_err(|e| err(&e))?;
    }
    root.present()
        .with_context(|| format!("writing plot {}", path.display()))?;
    Ok(())
}
