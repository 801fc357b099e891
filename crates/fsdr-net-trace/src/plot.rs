//! PNG plots: latency distributions (CDF) and one-line-per-series charts such as loss against
//! offered rate.
//!
//! Text is drawn with a TrueType font read at run time (DejaVu Sans from Debian's
//! `fonts-dejavu-core`, or the file named by `FSDR_NET_FONT`), so building needs no system
//! library.
//!
//! ```no_run
//! use fsdr_net_trace::plot::{Chart, Series, line_chart};
//!
//! let series = vec![Series::new("mio", vec![(100.0, 100.0), (800.0, 99.5)])];
//! let chart = Chart::new("Delivered", "offered MB/s", "delivered %");
//! line_chart("loss.png".as_ref(), &chart, &series).unwrap();
//! ```

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;
use plotters::style::FontStyle;

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlotError {
    /// No usable font file was found.
    #[error(
        "no TrueType font found (install Debian's fonts-dejavu-core or set FSDR_NET_FONT to a .ttf file)"
    )]
    NoFont,
    /// Nothing to draw.
    #[error("no data to plot")]
    Empty,
    /// The drawing backend failed (for example, the file could not be written).
    #[error("drawing {path}: {message}")]
    Draw {
        /// The output file.
        path: String,
        /// What the backend said.
        message: String,
    },
}

/// Where a font is looked for, after `FSDR_NET_FONT`.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers the font as plotters' "sans-serif" once per process.
fn ensure_font() -> Result<(), PlotError> {
    static FONT: OnceLock<bool> = OnceLock::new();
    let ok = *FONT.get_or_init(|| {
        let env = std::env::var("FSDR_NET_FONT").ok();
        let bytes = env
            .iter()
            .map(String::as_str)
            .chain(FONT_PATHS.iter().copied())
            .find_map(|p| std::fs::read(p).ok());
        bytes.is_some_and(|b| {
            // plotters keeps fonts for the life of the process.
            let leaked: &'static [u8] = Box::leak(b.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok()
        })
    });
    if ok { Ok(()) } else { Err(PlotError::NoFont) }
}

/// One named line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points, drawn in the order given.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from a name and its points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// Title and axis labels of a chart, and optional fixed axis ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Caption above the plot.
    pub title: String,
    /// Label of the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// Fixed y range; by default the data's range with a margin.
    pub y_range: Option<(f64, f64)>,
    /// Logarithmic x axis (for latency distributions spanning decades).
    pub log_x: bool,
    /// Legend in the upper left corner (where a CDF leaves room) instead of the lower left.
    pub legend_upper_left: bool,
}

impl Chart {
    /// A chart with automatic ranges and a linear x axis.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Self {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            y_range: None,
            log_x: false,
            legend_upper_left: false,
        }
    }
}

fn draw_err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// Draws `series` as lines with point markers into a 1000×600 PNG at `path`.
pub fn line_chart(path: &Path, chart: &Chart, series: &[Series]) -> Result<(), PlotError> {
    ensure_font()?;
    let pts = || series.iter().flat_map(|s| s.points.iter().copied());
    let (x0, x1) = span(pts().map(|p| p.0)).ok_or(PlotError::Empty)?;
    let (y0, y1) = chart
        .y_range
        .or_else(|| span(pts().map(|p| p.1)))
        .ok_or(PlotError::Empty)?;
    let pad = |lo: f64, hi: f64| {
        let d = if hi > lo {
            (hi - lo) * 0.05
        } else {
            lo.abs().max(1.0) * 0.05
        };
        (lo - d, hi + d)
    };
    let (y0, y1) = if chart.y_range.is_some() {
        (y0, y1)
    } else {
        pad(y0, y1)
    };
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(path, e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&chart.title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    macro_rules! body {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_desc(chart.x_label.as_str())
                .y_desc(chart.y_label.as_str())
                .label_style(("sans-serif", 15))
                .draw()
                .map_err(|e| draw_err(path, e))?;
            for (i, s) in series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let style = color.stroke_width(2);
                ctx.draw_series(LineSeries::new(s.points.iter().copied(), style))
                    .map_err(|e| draw_err(path, e))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
                ctx.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| draw_err(path, e))?;
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .position(if chart.legend_upper_left {
                    SeriesLabelPosition::UpperLeft
                } else {
                    SeriesLabelPosition::LowerLeft
                })
                .draw()
                .map_err(|e| draw_err(path, e))?;
        }};
    }
    if chart.log_x {
        let (x0, x1) = (x0.max(f64::MIN_POSITIVE), x1.max(x0 * 1.01));
        body!(
            builder
                .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), y0..y1)
                .map_err(|e| draw_err(path, e))?
        );
    } else {
        let (x0, x1) = pad(x0, x1);
        body!(
            builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| draw_err(path, e))?
        );
    }
    root.present().map_err(|e| draw_err(path, e))?;
    Ok(())
}

/// Points of the empirical CDF of `sorted` (ascending), thinned to at most `max_points`.
///
/// ```
/// let cdf = fsdr_net_trace::plot::cdf_points(&[1.0, 2.0, 3.0, 4.0], 100);
/// assert_eq!(cdf.last(), Some(&(4.0, 1.0)));
/// ```
pub fn cdf_points(sorted: &[f64], max_points: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 || max_points == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(max_points).max(1);
    let mut out: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (sorted[i], (i + 1) as f64 / n as f64))
        .collect();
    if out.last().is_some_and(|&(_, f)| f < 1.0) {
        out.push((sorted[n - 1], 1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_monotone_and_ends_at_one() {
        let v: Vec<f64> = (0..10_000).map(f64::from).collect();
        let c = cdf_points(&v, 500);
        assert!(c.len() <= 501);
        assert!(c.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(c.last(), Some(&(9999.0, 1.0)));
        assert!(cdf_points(&[], 10).is_empty());
    }

    #[test]
    fn writes_a_png_or_says_which_font_is_missing() {
        let dir = std::env::temp_dir().join(format!("fsdr-net-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.png");
        let s = vec![
            Series::new("a", vec![(1.0, 100.0), (2.0, 90.0)]),
            Series::new("b", vec![(1.0, 50.0), (2.0, 10.0)]),
        ];
        match line_chart(&path, &Chart::new("t", "x", "y"), &s) {
            Ok(()) => {
                let png = std::fs::read(&path).unwrap();
                assert_eq!(&png[1..4], b"PNG");
            }
            Err(PlotError::NoFont) => {
                assert!(
                    std::env::var_os("FSDR_NET_REQUIRE_FONT").is_none(),
                    "FSDR_NET_REQUIRE_FONT is set, but no font is installed"
                );
                eprintln!(
                    "no font installed; PNG not checked (FSDR_NET_REQUIRE_FONT makes it fail)"
                );
            }
            Err(e) => panic!("{e}"),
        }
        assert!(matches!(
            line_chart(&path, &Chart::new("t", "x", "y"), &[]),
            Err(PlotError::Empty | PlotError::NoFont)
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
