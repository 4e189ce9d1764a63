//! A small SVG chart writer: line and point series on linear or log-10 axes, with vertical
//! event markers and labelled points. Output is plain SVG 1.1 text with no external
//! references (fonts are generic families), so it embeds in HTML and renders anywhere.

use std::fmt::Write as _;

/// Colours for series, chosen to stay distinct for the first eight.
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
];

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SeriesStyle {
    /// A polyline through the points.
    Line,
    /// A step line (value held until the next point) with dots at the points.
    StepWithDots,
    /// A step line without dots.
    Step,
    /// Dots only.
    Dots,
}

/// One data series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// CSS colour.
    pub color: String,
    /// Stroke width, px.
    pub width: f64,
    /// Drawing style.
    pub style: SeriesStyle,
    /// (x, y) points in data units, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A vertical marker at an x value (a retransmission burst, say).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Position in data units.
    pub x: f64,
    /// Short label drawn at the top.
    pub label: String,
    /// CSS colour.
    pub color: String,
}

/// A highlighted point with a label (this run on the history chart).
#[derive(Debug, Clone, PartialEq)]
pub struct Callout {
    /// Position in data units.
    pub x: f64,
    /// Position in data units.
    pub y: f64,
    /// Label text.
    pub label: String,
    /// CSS colour.
    pub color: String,
}

/// A chart: axes, series, markers and callouts.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Log-10 y axis (values <= 0 are left out).
    pub y_log: bool,
    /// Force the y range to include 0 (linear axes only).
    pub y_from_zero: bool,
    /// Extra room on both ends of the x axis, as a fraction of the data's x range.
    pub x_pad: f64,
    /// Series in drawing order.
    pub series: Vec<Series>,
    /// Vertical markers.
    pub markers: Vec<Marker>,
    /// Labelled points.
    pub callouts: Vec<Callout>,
    /// Outer width, px.
    pub width: f64,
    /// Outer height, px.
    pub height: f64,
}

const LEFT: f64 = 72.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;
/// Most legend entries drawn; the rest are summarised.
const MAX_LEGEND: usize = 10;
/// Most marker labels drawn (markers beyond still get their line).
const MAX_MARKER_LABELS: usize = 24;

impl Chart {
    /// An empty chart with the given title and axis labels, 760 x 280 px, linear from zero.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Self {
        Self {
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            y_log: false,
            y_from_zero: true,
            x_pad: 0.0,
            series: Vec::new(),
            markers: Vec::new(),
            callouts: Vec::new(),
            width: 760.0,
            height: 280.0,
        }
    }

    /// The chart as a standalone `<svg>` element.
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#,
            w = self.width,
            h = self.height
        );
        self.draw_into(&mut out);
        out.push_str("</svg>");
        out
    }

    /// Draws the chart's elements (without the `<svg>` wrapper) into `out`.
    pub fn draw_into(&self, out: &mut String) {
        let (pw, ph) = (self.width - LEFT - RIGHT, self.height - TOP - BOTTOM);
        let _ = write!(
            out,
            r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
            self.width, self.height
        );
        let _ = write!(
            out,
            r##"<text x="{}" y="20" font-size="14" font-weight="bold" fill="#222">{}</text>"##,
            LEFT,
            escape(&self.title)
        );
        let xs = self
            .points()
            .map(|p| p.0)
            .chain(self.markers.iter().map(|m| m.x));
        let ys = self
            .points()
            .map(|p| p.1)
            .filter(|y| !self.y_log || *y > 0.0);
        let (Some(xr), Some(yr)) = (range(xs), range(ys)) else {
            let _ = write!(
                out,
                r##"<text x="{}" y="{}" fill="#888">no data</text>"##,
                LEFT + pw / 2.0 - 25.0,
                TOP + ph / 2.0
            );
            return;
        };
        let pad = (xr.1 - xr.0) * self.x_pad.clamp(0.0, 1.0);
        let x_axis = Axis::tight((xr.0 - pad, xr.1 + pad));
        let y_axis = if self.y_log {
            Axis::log10(yr)
        } else {
            Axis::linear(yr, self.y_from_zero)
        };
        let sx = |x: f64| LEFT + x_axis.frac(x) * pw;
        let sy = |y: f64| TOP + ph - y_axis.frac(y) * ph;

        // Grid and ticks.
        for t in &y_axis.ticks {
            let y = sy(*t);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#444">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                tick_label(*t)
            );
        }
        for t in &x_axis.ticks {
            let x = sx(*t);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" fill="#444">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                tick_label(*t)
            );
        }
        let _ = write!(
            out,
            r##"<rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#888"/>"##
        );
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222">{}</text>"##,
            LEFT + pw / 2.0,
            self.height - 8.0,
            escape(&self.x_label)
        );
        let _ = write!(
            out,
            r##"<text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle" fill="#222">{}</text>"##,
            TOP + ph / 2.0,
            escape(&self.y_label)
        );

        // Markers under the data.
        for (i, m) in self.markers.iter().enumerate() {
            let x = sx(m.x);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="{}" stroke-dasharray="4 3" stroke-width="1.2"/>"##,
                TOP + ph,
                escape(&m.color)
            );
            if i < MAX_MARKER_LABELS && !m.label.is_empty() {
                let _ = write!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="{}">{}</text>"##,
                    x + 2.0,
                    TOP + 11.0 + (i % 2) as f64 * 11.0,
                    escape(&m.color),
                    escape(&m.label)
                );
            }
        }

        // Series.
        for s in &self.series {
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite() && (!self.y_log || p.1 > 0.0))
                .map(|&(x, y)| (sx(x), sy(y)))
                .collect();
            let color = escape(&s.color);
            let stepped = matches!(s.style, SeriesStyle::StepWithDots | SeriesStyle::Step);
            if (stepped || s.style == SeriesStyle::Line) && pts.len() > 1 {
                let mut d = String::new();
                for (i, (x, y)) in pts.iter().enumerate() {
                    if i == 0 {
                        let _ = write!(d, "M{x:.1},{y:.1}");
                    } else if stepped {
                        let _ = write!(d, " H{x:.1} V{y:.1}");
                    } else {
                        let _ = write!(d, " L{x:.1},{y:.1}");
                    }
                }
                let _ = write!(
                    out,
                    r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="{}" stroke-linejoin="round"/>"#,
                    s.width
                );
            }
            if matches!(s.style, SeriesStyle::Dots | SeriesStyle::StepWithDots) || pts.len() == 1 {
                for (x, y) in &pts {
                    let _ = write!(
                        out,
                        r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
                    );
                }
            }
        }

        // Callouts on top.
        for c in &self.callouts {
            if self.y_log && c.y <= 0.0 {
                continue;
            }
            let (x, y) = (sx(c.x), sy(c.y));
            let color = escape(&c.color);
            let _ = write!(
                out,
                r##"<path d="M{:.1},{:.1} l7,7 l-7,7 l-7,-7 z" fill="{color}" stroke="#000" stroke-width="0.8"/>"##,
                x,
                y - 7.0
            );
            let anchor = if x > LEFT + pw * 0.6 { "end" } else { "start" };
            let dx = if anchor == "end" { -10.0 } else { 10.0 };
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="{anchor}" font-weight="bold" fill="{color}">{}</text>"#,
                x + dx,
                y - 8.0,
                escape(&c.label)
            );
        }

        // Legend.
        let lx = LEFT + pw + 14.0;
        for (i, s) in self.series.iter().take(MAX_LEGEND).enumerate() {
            let ly = TOP + 8.0 + i as f64 * 18.0;
            if s.style == SeriesStyle::Dots {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{ly:.1}" r="3.5" fill="{}"/>"#,
                    lx + 9.0,
                    escape(&s.color)
                );
            } else {
                let _ = write!(
                    out,
                    r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{}" stroke-width="{}"/>"#,
                    lx + 18.0,
                    escape(&s.color),
                    s.width.max(2.0)
                );
            }
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" fill="#222">{}</text>"##,
                lx + 24.0,
                ly + 4.0,
                escape(&truncate(&s.name, 20))
            );
        }
        if self.series.len() > MAX_LEGEND {
            let _ = write!(
                out,
                r##"<text x="{lx:.1}" y="{:.1}" fill="#666">+{} more</text>"##,
                TOP + 8.0 + MAX_LEGEND as f64 * 18.0 + 4.0,
                self.series.len() - MAX_LEGEND
            );
        }
    }

    fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .chain(self.callouts.iter().map(|c| (c.x, c.y)))
            .filter(|p| p.0.is_finite() && p.1.is_finite())
    }
}

/// Stacks charts vertically into one `<svg>` (as `longhaul plot` writes them).
pub fn stack(charts: &[Chart]) -> String {
    let width = charts.iter().map(|c| c.width).fold(0.0, f64::max);
    let height: f64 = charts.iter().map(|c| c.height).sum();
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let mut y = 0.0;
    for c in charts {
        let _ = write!(out, r#"<g transform="translate(0,{y})">"#);
        c.draw_into(&mut out);
        out.push_str("</g>");
        y += c.height;
    }
    out.push_str("</svg>");
    out
}

/// Escapes text for SVG/HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    ticks: Vec<f64>,
}

impl Axis {
    fn linear((mut lo, mut hi): (f64, f64), from_zero: bool) -> Self {
        if from_zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            lo -= 1.0_f64.max(lo.abs() * 0.1);
            hi += 1.0_f64.max(hi.abs() * 0.1);
            if from_zero && lo < 0.0 && hi > 0.0 {
                lo = 0.0;
            }
        }
        let step = nice_step((hi - lo) / 5.0);
        let lo = (lo / step).floor() * step;
        let hi = (hi / step).ceil() * step;
        let n = ((hi - lo) / step).round() as usize;
        let ticks = (0..=n.min(50)).map(|i| lo + i as f64 * step).collect();
        Self {
            lo,
            hi,
            log: false,
            ticks,
        }
    }

    /// Exactly the data's range (time axes), with nice ticks inside it.
    fn tight((lo, hi): (f64, f64)) -> Self {
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            return Self::linear((lo, hi), false);
        }
        let step = nice_step((hi - lo) / 6.0);
        let first = (lo / step).ceil() as i64;
        let last = (hi / step).floor() as i64;
        let ticks = (first..=last).take(60).map(|i| i as f64 * step).collect();
        Self {
            lo,
            hi,
            log: false,
            ticks,
        }
    }

    fn log10((lo, hi): (f64, f64)) -> Self {
        let lo = lo.log10().floor();
        let hi = hi.log10().ceil().max(lo + 1.0);
        let ticks = (lo as i32..=hi as i32)
            .take(40)
            .map(|e| 10f64.powi(e))
            .collect();
        Self {
            lo,
            hi,
            log: true,
            ticks,
        }
    }

    fn frac(&self, v: f64) -> f64 {
        let v = if self.log { v.log10() } else { v };
        if self.hi > self.lo {
            (v - self.lo) / (self.hi - self.lo)
        } else {
            0.5
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// A tick value without needless digits: `0`, `2.5`, `1000`, `100,000`, `1e13`.
fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if !(1e-3..1e12).contains(&a) {
        format!("{v:e}")
    } else if a >= 1e4 && v.fract() == 0.0 {
        let digits = format!("{:.0}", a);
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        if v < 0.0 {
            grouped.insert(0, '-');
        }
        grouped
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart() -> Chart {
        let mut c = Chart::new("Throughput <total>", "time (s)", "Mbit/s");
        c.series.push(Series {
            name: "total".into(),
            color: "#000".into(),
            width: 2.5,
            style: SeriesStyle::Line,
            points: vec![(0.0, 10.0), (1.0, 400.0), (2.0, 735.5)],
        });
        c.markers.push(Marker {
            x: 1.5,
            label: "37 retr".into(),
            color: "#d62728".into(),
        });
        c
    }

    #[test]
    fn writes_escaped_svg_with_data_and_labels() {
        let svg = chart().to_svg();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>"));
        assert!(svg.contains("Throughput &lt;total&gt;"));
        assert!(svg.contains("37 retr"));
        assert!(svg.contains("<path d=\"M"));
        // Axis from 0 to 800 in steps of 200.
        assert!(
            svg.contains(">800</text>") && svg.contains(">200</text>"),
            "{svg}"
        );
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn log_axis_has_decade_ticks_and_skips_non_positive() {
        let mut c = chart();
        c.y_log = true;
        c.series[0].points.push((3.0, 0.0));
        let svg = c.to_svg();
        assert!(
            svg.contains(">10</text>") && svg.contains(">1000</text>"),
            "{svg}"
        );
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn empty_and_flat_charts_still_render() {
        let empty = Chart::new("nothing", "x", "y").to_svg();
        assert!(empty.contains("no data"));
        let mut flat = chart();
        flat.series[0].points = vec![(0.0, 5.0), (1.0, 5.0)];
        flat.markers.clear();
        assert!(!flat.to_svg().contains("NaN"));
        let stacked = stack(&[chart(), flat]);
        assert!(stacked.contains("translate(0,280)"));
    }

    #[test]
    fn nice_steps_and_labels() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(160.0), 200.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(1000.0), "1000");
        assert_eq!(tick_label(1e6), "1,000,000");
        assert_eq!(tick_label(-250_000.0), "-250,000");
        assert_eq!(tick_label(1e13), "1e13");
        assert_eq!(escape("a&b\"<"), "a&amp;b&quot;&lt;");
    }
}
