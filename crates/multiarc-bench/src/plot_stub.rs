//! `plot` for a build without the `plot` feature (no `plotters`): the
//! types `bench` and `replay` fill, and a `--plot` that is one clear error.

use std::path::Path;

/// One line of a chart: a name for the legend and its (x, y) points.
#[allow(dead_code)] // filled by the commands, never drawn in this build
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points in increasing x.
    pub points: Vec<(f64, f64)>,
}

/// One panel of [`panel_chart`]: its title and its lines.
#[allow(dead_code)] // filled by the commands, never drawn in this build
pub struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// The lines; a name in several panels keeps one colour.
    pub series: Vec<Series>,
}

/// Whether `--plot` can draw: never, in this build. The commands call it
/// before their work, so a lean build fails at once, not after the run.
pub fn available(_path: &Path) -> anyhow::Result<()> {
    anyhow::bail!(
        "--plot: this multiarc was built without the `plot` feature (no charts); \
         rebuild with default features to draw them"
    )
}

/// Drawing needs the `plot` feature: an error.
pub fn line_chart(
    path: &Path,
    _title: &str,
    _x_label: &str,
    _y_label: &str,
    _series: &[Series],
    _log_x: bool,
) -> anyhow::Result<()> {
    available(path)
}

/// Drawing needs the `plot` feature: an error.
pub fn panel_chart(
    path: &Path,
    _title: &str,
    _x_label: &str,
    _y_label: &str,
    _panels: &[Panel],
    _emphasise: &dyn Fn(&str) -> bool,
) -> anyhow::Result<()> {
    available(path)
}
