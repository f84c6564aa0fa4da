//! Charts as hand-written SVG: line charts and grouped bar charts.
//!
//! The report must open from disk in any browser with no network, and the
//! same charts must stand alone as `.svg` files, so they are plain SVG text
//! with inline styles: no scripts, no fonts to fetch, no external
//! stylesheet. A chart is data ([`LineChart`], [`BarChart`]) and one
//! function that draws it; [`Svg::inline`] drops the XML namespace that only
//! a standalone file needs (HTML5 knows `<svg>` without it).

use std::fmt::Write;

/// Colours that stay apart for most kinds of colour blindness (Tableau 10).
const PALETTE: [&str; 10] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
/// Past ten series the colours repeat with another dash pattern.
const DASHES: [&str; 3] = ["", "6 3", "2 2"];

const WIDTH: f64 = 960.0;
const PLOT_LEFT: f64 = 78.0;
const PLOT_TOP: f64 = 44.0;
const PLOT_WIDTH: f64 = 600.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEGEND_LEFT: f64 = PLOT_LEFT + PLOT_WIDTH + 24.0;
const LEGEND_ROW: f64 = 18.0;
const FONT: &str = "font-family=\"sans-serif\"";
/// About how wide one character of the 11 px labels is.
const CHAR_WIDTH: f64 = 6.5;

/// A finished chart: standalone SVG text.
#[derive(Debug, Clone, PartialEq)]
pub struct Svg(pub String);

impl Svg {
    /// For embedding in HTML: no XML namespace (and so no URL) needed.
    pub fn inline(&self) -> String {
        self.0.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
    }
}

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Vertical lines across the plot at an x value, each labelled (the
    /// phases of a migration on a time axis).
    pub markers: Vec<(f64, String)>,
}

/// Bars grouped by category (one group per cell), one bar per series.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// Series name and one value per category.
    pub series: Vec<(String, Vec<f64>)>,
}

/// Escapes text for SVG and HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Round axis steps (1, 2 or 5 times a power of ten) from 0 up past `max`.
pub fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let rough = max / target.max(1) as f64;
    let power = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= rough).unwrap_or(10.0 * power);
    let n = (max / step).ceil() as usize;
    (0..=n.max(1)).map(|i| i as f64 * step).collect()
}

/// `1.5M`, `250K`, `12`: short numbers for axes.
pub fn short_number(v: f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "K")
    } else {
        (v, "")
    };
    let text = if scaled.fract().abs() < 1e-9 { format!("{scaled:.0}") } else { format!("{scaled:.1}") };
    let text = text.strip_suffix(".0").map(str::to_owned).unwrap_or(text);
    format!("{text}{suffix}")
}

fn style(i: usize) -> (&'static str, &'static str) {
    (PALETTE[i % PALETTE.len()], DASHES[(i / PALETTE.len()) % DASHES.len()])
}

fn height_for(entries: usize) -> f64 {
    let legend = PLOT_TOP + entries as f64 * LEGEND_ROW + 10.0;
    (PLOT_TOP + PLOT_HEIGHT + 110.0).max(legend)
}

fn open(out: &mut String, title: &str, height: f64) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"{t}\">\
         <rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\
         <text x=\"{PLOT_LEFT}\" y=\"24\" {FONT} font-size=\"16\" font-weight=\"bold\">{t}</text>",
        t = escape(title)
    );
}

/// Horizontal grid lines and labels of the value axis.
fn y_axis(out: &mut String, ticks: &[f64], label: &str) -> f64 {
    let top = *ticks.last().unwrap_or(&1.0);
    for &t in ticks {
        let y = PLOT_TOP + PLOT_HEIGHT - t / top * PLOT_HEIGHT;
        let _ = write!(
            out,
            "<line x1=\"{PLOT_LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e0e0e0\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" {FONT} font-size=\"11\" text-anchor=\"end\">{}</text>",
            PLOT_LEFT + PLOT_WIDTH,
            PLOT_LEFT - 6.0,
            y + 4.0,
            short_number(t)
        );
    }
    let mid = PLOT_TOP + PLOT_HEIGHT / 2.0;
    let _ = write!(
        out,
        "<text x=\"16\" y=\"{mid:.1}\" {FONT} font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 {mid:.1})\">{}</text>\
         <line x1=\"{PLOT_LEFT}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\" stroke=\"#333333\"/>\
         <line x1=\"{PLOT_LEFT}\" y1=\"{PLOT_TOP}\" x2=\"{PLOT_LEFT}\" y2=\"{b:.1}\" stroke=\"#333333\"/>",
        escape(label),
        b = PLOT_TOP + PLOT_HEIGHT,
        r = PLOT_LEFT + PLOT_WIDTH,
    );
    top
}

fn legend(out: &mut String, names: &[&str]) {
    for (i, name) in names.iter().enumerate() {
        let (colour, dash) = style(i);
        let y = PLOT_TOP + i as f64 * LEGEND_ROW;
        let _ = write!(
            out,
            "<line x1=\"{LEGEND_LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"3\" stroke-dasharray=\"{dash}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" {FONT} font-size=\"12\">{}</text>",
            LEGEND_LEFT + 22.0,
            LEGEND_LEFT + 28.0,
            y + 4.0,
            escape(name)
        );
    }
}

impl LineChart {
    pub fn to_svg(&self) -> Svg {
        let points = || self.series.iter().flat_map(|s| s.points.iter());
        let x_max = points().map(|p| p.0).chain(self.markers.iter().map(|m| m.0)).fold(0.0, f64::max);
        let y_max = points().map(|p| p.1).fold(0.0, f64::max);
        let mut out = String::new();
        open(&mut out, &self.title, height_for(self.series.len()));
        let y_top = y_axis(&mut out, &nice_ticks(y_max, 5), &self.y_label);
        let x_ticks = nice_ticks(x_max, 6);
        let x_top = *x_ticks.last().unwrap_or(&1.0);
        let (sx, sy) = (|x: f64| PLOT_LEFT + x / x_top * PLOT_WIDTH, |y: f64| PLOT_TOP + PLOT_HEIGHT - y / y_top * PLOT_HEIGHT);
        let bottom = PLOT_TOP + PLOT_HEIGHT;
        for &t in &x_ticks {
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{bottom:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333333\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" {FONT} font-size=\"11\" text-anchor=\"middle\">{}</text>",
                bottom + 5.0,
                bottom + 18.0,
                short_number(t),
                x = sx(t)
            );
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" {FONT} font-size=\"12\" text-anchor=\"middle\">{}</text>",
            PLOT_LEFT + PLOT_WIDTH / 2.0,
            bottom + 40.0,
            escape(&self.x_label)
        );
        for (i, (x, label)) in self.markers.iter().enumerate() {
            // Labels step down in turn so that markers close together stay readable.
            let (x, y) = (sx(*x), PLOT_TOP + 12.0 + (i % 8) as f64 * 12.0);
            let _ = write!(
                out,
                "<g class=\"marker\"><line x1=\"{x:.1}\" y1=\"{PLOT_TOP}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#777777\" stroke-dasharray=\"3 3\"/>\
                 <text x=\"{:.1}\" y=\"{y:.1}\" {FONT} font-size=\"10\" fill=\"#555555\">{}</text></g>",
                x + 3.0,
                escape(label)
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let (colour, dash) = style(i);
            let _ = write!(out, "<g class=\"series\" data-name=\"{}\">", escape(&s.name));
            if s.points.len() > 1 {
                let path: Vec<String> = s.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
                let _ = write!(
                    out,
                    "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\" points=\"{}\"/>",
                    path.join(" ")
                );
            }
            for &(x, y) in &s.points {
                let _ = write!(out, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>", sx(x), sy(y));
            }
            out.push_str("</g>");
        }
        legend(&mut out, &self.series.iter().map(|s| s.name.as_str()).collect::<Vec<_>>());
        out.push_str("</svg>\n");
        Svg(out)
    }
}

impl BarChart {
    pub fn to_svg(&self) -> Svg {
        let y_max = self.series.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.0, f64::max);
        let mut out = String::new();
        let names: Vec<&str> = self.series.iter().map(|(n, _)| n.as_str()).collect();
        let groups = self.categories.len().max(1) as f64;
        let slot = PLOT_WIDTH / groups;
        // Long or many labels are turned steeply to fit under narrow slots,
        // and the picture grows downwards to hold them.
        let longest = self.categories.iter().map(|c| c.chars().count()).max().unwrap_or(0) as f64;
        let turn = longest * CHAR_WIDTH > slot;
        let label_room = if turn { longest * CHAR_WIDTH * 0.87 + 30.0 } else { 40.0 };
        open(&mut out, &self.title, height_for(names.len()).max(PLOT_TOP + PLOT_HEIGHT + label_room));
        let y_top = y_axis(&mut out, &nice_ticks(y_max, 5), &self.y_label);
        let bar = (slot * 0.8 / self.series.len().max(1) as f64).min(60.0);
        let bottom = PLOT_TOP + PLOT_HEIGHT;
        for (g, category) in self.categories.iter().enumerate() {
            let centre = PLOT_LEFT + slot * (g as f64 + 0.5);
            let left = centre - bar * self.series.len() as f64 / 2.0;
            for (i, (_, values)) in self.series.iter().enumerate() {
                let v = values.get(g).copied().unwrap_or(0.0).max(0.0);
                let h = v / y_top * PLOT_HEIGHT;
                let _ = write!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"><title>{}: {}</title></rect>",
                    left + bar * i as f64,
                    bottom - h,
                    (bar - 1.0).max(1.0),
                    style(i).0,
                    escape(category),
                    short_number(v)
                );
            }
            let y = bottom + 16.0;
            let anchor = if turn { format!("end\" transform=\"rotate(-60 {centre:.1} {y:.1})") } else { "middle".to_owned() };
            let _ = write!(
                out,
                "<text x=\"{centre:.1}\" y=\"{y:.1}\" {FONT} font-size=\"11\" text-anchor=\"{anchor}\">{}</text>",
                escape(category)
            );
        }
        if names.len() > 1 {
            legend(&mut out, &names);
        }
        out.push_str("</svg>\n");
        Svg(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tag closes, in order: the SVG is well-formed XML as far as its tags go.
    fn assert_balanced(svg: &str) {
        let mut stack = Vec::new();
        let mut rest = svg;
        while let Some(at) = rest.find('<') {
            let end = rest[at..].find('>').expect("unclosed tag") + at;
            let tag = &rest[at + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name.to_owned()), "mismatched </{name}>");
            } else if !tag.ends_with('/') {
                stack.push(tag.split_whitespace().next().unwrap().to_owned());
            }
            rest = &rest[end + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
    }

    fn line() -> LineChart {
        LineChart {
            title: "rate <vs> rows & more".into(),
            x_label: "rows loaded".into(),
            y_label: "rows/s".into(),
            series: vec![
                Series { name: "single".into(), points: vec![(0.0, 100_000.0), (500_000.0, 90_000.0), (1_000_000.0, 60_000.0)] },
                Series { name: "hourly\"x".into(), points: vec![(1_000_000.0, 200_000.0)] },
            ],
            markers: vec![],
        }
    }

    #[test]
    fn line_chart_draws_one_group_per_series_and_escapes_text() {
        let svg = line().to_svg();
        assert_balanced(&svg.0);
        assert_eq!(svg.0.matches("<svg").count(), 1);
        assert_eq!(svg.0.matches("class=\"series\"").count(), 2);
        assert_eq!(svg.0.matches("<polyline").count(), 1, "a one-point series is a dot, not a line");
        assert_eq!(svg.0.matches("<circle").count(), 4);
        assert!(svg.0.contains("rate &lt;vs&gt; rows &amp; more"));
        assert!(svg.0.contains("hourly&quot;x"));
        assert!(svg.0.contains(">1M<"), "x axis reaches the last row");
        assert!(svg.0.contains(">200K<"), "y axis reaches the highest rate");
    }

    #[test]
    fn points_stay_inside_the_plot() {
        let svg = line().to_svg().0;
        for c in svg.split("<circle ").skip(1) {
            let num = |attr: &str| -> f64 {
                let at = c.find(attr).unwrap() + attr.len();
                c[at..].split('"').next().unwrap().parse().unwrap()
            };
            let (x, y) = (num("cx=\""), num("cy=\""));
            assert!((PLOT_LEFT..=PLOT_LEFT + PLOT_WIDTH).contains(&x), "{x}");
            assert!((PLOT_TOP..=PLOT_TOP + PLOT_HEIGHT).contains(&y), "{y}");
        }
    }

    #[test]
    fn markers_are_labelled_vertical_lines_inside_the_plot() {
        let chart = LineChart { markers: vec![(2_000_000.0, "swap <1>".into()), (0.0, "start".into())], ..line() };
        let svg = chart.to_svg().0;
        assert_balanced(&svg);
        assert_eq!(svg.matches("class=\"marker\"").count(), 2);
        assert!(svg.contains(">swap &lt;1&gt;</text>"));
        assert!(svg.contains(">2M<"), "the x axis reaches the last marker");
        let x = |label: &str| -> f64 {
            let at = svg.find(label).unwrap();
            let line = svg[..at].rfind("<line x1=\"").unwrap() + 10;
            svg[line..].split('"').next().unwrap().parse().unwrap()
        };
        assert_eq!(x(">start<"), PLOT_LEFT);
        assert!(x(">swap") <= PLOT_LEFT + PLOT_WIDTH);
    }

    #[test]
    fn inline_svg_has_no_url() {
        let svg = line().to_svg();
        assert!(svg.0.contains("http://www.w3.org/2000/svg"), "a standalone file names its namespace");
        assert!(!svg.inline().contains("http"));
    }

    #[test]
    fn bar_chart_draws_a_bar_per_value() {
        let chart = BarChart {
            title: "rows/s".into(),
            y_label: "rows/s".into(),
            categories: vec!["plain".into(), "weekly".into(), "monthly".into()],
            series: vec![("rows/s".into(), vec![325_000.0, 265_000.0, 0.0])],
        };
        let svg = chart.to_svg().0;
        assert_balanced(&svg);
        assert_eq!(svg.matches("<rect").count(), 1 + 3, "background and three bars");
        assert!(svg.contains("<title>weekly: 265K</title>"));
        let grouped = BarChart { series: vec![("a".into(), vec![1.0, 2.0, 3.0]), ("b".into(), vec![3.0, 2.0, 1.0])], ..chart };
        let svg = grouped.to_svg().0;
        assert_balanced(&svg);
        assert_eq!(svg.matches("<rect").count(), 1 + 6);
        assert!(svg.contains(">b</text>"), "a legend for several series");
    }

    #[test]
    fn many_long_labels_are_turned_and_the_picture_grows_to_hold_them() {
        let categories: Vec<String> = (0..20).map(|i| format!("range800-shuffled-chute-{i}")).collect();
        let chart = BarChart {
            title: "rows/s".into(),
            y_label: "rows/s".into(),
            series: vec![("rows/s".into(), vec![1.0; categories.len()])],
            categories: categories.clone(),
        };
        let svg = chart.to_svg().0;
        assert_eq!(svg.matches("rotate(-60").count(), 20);
        let height: f64 = svg.split("height=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        let label = categories[0].len() as f64 * CHAR_WIDTH * 0.87;
        assert!(height >= PLOT_TOP + PLOT_HEIGHT + label, "{height} leaves no room for {label} px of label");
        let short = BarChart { categories: vec!["a".into(), "b".into()], series: vec![("x".into(), vec![1.0, 2.0])], ..chart };
        assert!(!short.to_svg().0.contains("rotate(-60"), "short labels stay level");
    }

    #[test]
    fn empty_charts_still_draw() {
        let svg = LineChart { title: "t".into(), x_label: "x".into(), y_label: "y".into(), series: vec![], markers: vec![] }.to_svg();
        assert_balanced(&svg.0);
        let svg = BarChart { title: "t".into(), y_label: "y".into(), categories: vec![], series: vec![] }.to_svg();
        assert_balanced(&svg.0);
    }

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(nice_ticks(1.0, 5), [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        let t = nice_ticks(227_590.0, 5);
        assert_eq!(t[1], 50_000.0);
        assert!(*t.last().unwrap() >= 227_590.0);
        assert_eq!(nice_ticks(0.0, 5), [0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(nice_ticks(f64::NAN, 4), [0.0, 0.5, 1.0]);
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short_number(0.0), "0");
        assert_eq!(short_number(250_000.0), "250K");
        assert_eq!(short_number(1_500_000.0), "1.5M");
        assert_eq!(short_number(12.0), "12");
        assert_eq!(short_number(0.5), "0.5");
        assert_eq!(short_number(3e9), "3G");
    }
}
