//! The report drawn, by hand, as SVG: line charts of the utilisation
//! spread and of empty hosts over time, one line per policy, and a bar
//! chart of placements per host. [`html`] is a self-contained page (the
//! charts inline, the styles in the page, no script, no external asset)
//! that opens anywhere and can be mailed; [`svg`] is the charts alone as
//! one SVG document. Both are deterministic, like the report: every
//! number is printed with a fixed precision.

use std::fmt::Write;

use super::report::{PolicyReport, Report, Sample, Spread};

/// One colour per policy, in the order named (at most
/// [`super::MAX_POLICIES`]): Tableau's ten minus the two greys, readable
/// on white and apart from each other.
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// A chart's size, pixels.
const WIDTH: f64 = 1080.0;
const HEIGHT: f64 = 300.0;
/// Room for the axes' labels and the title.
const LEFT: f64 = 64.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 42.0;
/// The plotting area inside those margins.
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

/// A chart's vertical scale: from 0 to the first round step at or above
/// its largest value.
struct YScale {
    step: f64,
    top: f64,
}

impl YScale {
    fn new(max: f64) -> YScale {
        let step = step(max);
        YScale {
            step,
            top: (max / step).ceil().max(1.0) * step,
        }
    }

    /// Where `value` stands, pixels from the chart's top.
    fn y(&self, value: f64) -> f64 {
        TOP + PLOT_H - value / self.top * PLOT_H
    }

    /// The horizontal grid lines, each labelled with its value.
    fn grid(&self, out: &mut String) {
        let mut v = 0.0;
        while v <= self.top + self.step / 2.0 {
            let yy = self.y(v);
            let _ = write!(
                out,
                r##"<line x1="{LEFT:.0}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + PLOT_W,
                LEFT - 6.0,
                yy + 4.0,
                tick_label(v, self.step)
            );
            v += self.step;
        }
    }
}

/// Opens a chart's `<svg>` placed at `y`, on white, with its title.
fn open_chart(y: f64, title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" y="{y:.0}" width="{WIDTH:.0}" height="{HEIGHT:.0}" viewBox="0 0 {WIDTH:.0} {HEIGHT:.0}" font-family="sans-serif" font-size="12"><rect width="{WIDTH:.0}" height="{HEIGHT:.0}" fill="white"/><text x="{LEFT:.0}" y="20" font-size="15" font-weight="bold">{}</text>"#,
        escape(title)
    )
}

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

/// One line of a chart.
struct Series {
    label: String,
    colour: &'static str,
    /// SVG `stroke-dasharray`, for the second and third line of a policy.
    dash: Option<&'static str>,
    points: Vec<(f64, f64)>,
}

fn series(
    label: String,
    colour: &'static str,
    dash: Option<&'static str>,
    points: Vec<(f64, f64)>,
) -> Series {
    Series {
        label,
        colour,
        dash,
        points,
    }
}

/// Time on the x axis: hours past two hours of trace, else minutes.
fn time_unit(duration_s: u64) -> (f64, &'static str) {
    if duration_s > 2 * 3600 {
        (3600.0, "hours")
    } else {
        (60.0, "minutes")
    }
}

/// Text made safe inside HTML and SVG.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step for about five ticks up to `max`.
fn step(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn tick_label(value: f64, step: f64) -> String {
    if step >= 1.0 {
        format!("{value:.0}")
    } else if step >= 0.1 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// A line chart as an `<svg>` element placed at `y` (for [`svg`]).
fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    x_max: f64,
    y_max: f64,
    lines: &[Series],
    y: f64,
) -> String {
    let x_max = if x_max > 0.0 { x_max } else { 1.0 };
    let scale = YScale::new(y_max);
    let px = |x: f64| LEFT + x / x_max * PLOT_W;
    let py = |v: f64| scale.y(v);
    let mut out = open_chart(y, title);
    scale.grid(&mut out);
    // X ticks.
    let x_step = step(x_max);
    let mut x = 0.0;
    while x <= x_max + x_step / 1000.0 {
        let xx = px(x);
        let _ = write!(
            out,
            r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="#999"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + PLOT_H,
            TOP + PLOT_H + 5.0,
            TOP + PLOT_H + 18.0,
            tick_label(x, x_step)
        );
        x += x_step;
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT:.0}" x2="{LEFT:.0}" y1="{TOP:.0}" y2="{:.1}" stroke="#333"/><line x1="{LEFT:.0}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/>"##,
        TOP + PLOT_H,
        LEFT + PLOT_W,
        TOP + PLOT_H,
        TOP + PLOT_H
    );
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        LEFT + PLOT_W / 2.0,
        HEIGHT - 6.0,
        escape(x_label),
        TOP + PLOT_H / 2.0,
        escape(y_label)
    );
    for line in lines {
        let points: Vec<String> = line
            .points
            .iter()
            .map(|(x, v)| format!("{:.1},{:.1}", px(*x), py(*v)))
            .collect();
        let dash = line
            .dash
            .map(|d| format!(r#" stroke-dasharray="{d}""#))
            .unwrap_or_default();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2"{dash} points="{}"/>"#,
            line.colour,
            points.join(" ")
        );
    }
    // Legend: the lines with a label (a policy's first).
    for (i, line) in lines.iter().filter(|l| !l.label.is_empty()).enumerate() {
        let ly = TOP + 6.0 + i as f64 * 18.0;
        let lx = LEFT + PLOT_W + 14.0;
        let dash = line
            .dash
            .map(|d| format!(r#" stroke-dasharray="{d}""#))
            .unwrap_or_default();
        let _ = write!(
            out,
            r#"<line x1="{lx:.1}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 24.0,
            line.colour,
            lx + 30.0,
            ly + 4.0,
            escape(&line.label)
        );
    }
    out.push_str("</svg>");
    out
}

/// Utilisation lines of every policy: stddev solid, mean dashed, max
/// dotted.
fn spread_chart(report: &Report, title: &str, pick: fn(&Sample) -> Spread, y: f64) -> String {
    let (unit, unit_name) = time_unit(report.trace.duration_s);
    let mut lines = Vec::new();
    let mut y_max: f64 = 0.0;
    for (i, p) in report.policies.iter().enumerate() {
        let at = |s: &Sample| s.at_s as f64 / unit;
        for (what, dash, get) in [
            ("stddev", None, (|s: Spread| s.stddev) as fn(Spread) -> f64),
            ("mean", Some("6 4"), |s: Spread| s.mean),
            ("max", Some("2 3"), |s: Spread| s.max),
        ] {
            let points: Vec<(f64, f64)> = p.samples.iter().map(|s| (at(s), get(pick(s)))).collect();
            y_max = points.iter().map(|(_, v)| *v).fold(y_max, f64::max);
            // One legend entry per policy; the title says which line is which.
            let label = if what == "stddev" {
                p.policy.clone()
            } else {
                String::new()
            };
            lines.push(series(label, colour(i), dash, points));
        }
    }
    line_chart(
        title,
        &format!("trace time, {unit_name}"),
        "utilisation (0-1)",
        report.trace.duration_s as f64 / unit,
        y_max.max(0.05),
        &lines,
        y,
    )
}

fn empty_hosts_chart(report: &Report, y: f64) -> String {
    let (unit, unit_name) = time_unit(report.trace.duration_s);
    let lines: Vec<Series> = report
        .policies
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let points = p
                .samples
                .iter()
                .map(|s| (s.at_s as f64 / unit, s.empty_hosts as f64))
                .collect();
            series(p.policy.clone(), colour(i), None, points)
        })
        .collect();
    line_chart(
        "Empty hosts (could be powered off)",
        &format!("trace time, {unit_name}"),
        "hosts",
        report.trace.duration_s as f64 / unit,
        report.hosts.max(1) as f64,
        &lines,
        y,
    )
}

/// Placements per host, one bar per policy in each host's group.
fn placements_chart(report: &Report, y: f64) -> String {
    let hosts: Vec<&str> = report
        .policies
        .first()
        .map(|p| {
            p.placements_per_host
                .iter()
                .map(|h| h.host_id.as_str())
                .collect()
        })
        .unwrap_or_default();
    let max = report
        .policies
        .iter()
        .flat_map(|p| p.placements_per_host.iter().map(|h| h.placements))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let scale = YScale::new(max);
    let py = |v: f64| scale.y(v);
    let group = PLOT_W / hosts.len().max(1) as f64;
    let bar = (group * 0.8) / report.policies.len().max(1) as f64;
    let mut out = open_chart(y, "Placements per host");
    scale.grid(&mut out);
    // Label every host while they fit, else about 25 of them.
    let every = hosts.len().div_ceil(25).max(1);
    for (h, host) in hosts.iter().enumerate() {
        let gx = LEFT + h as f64 * group + group * 0.1;
        for (i, p) in report.policies.iter().enumerate() {
            let n = p.placements_per_host.get(h).map_or(0, |x| x.placements) as f64;
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                gx + i as f64 * bar,
                py(n),
                bar.max(0.5),
                TOP + PLOT_H - py(n),
                colour(i)
            );
        }
        if h % every == 0 {
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                LEFT + h as f64 * group + group / 2.0,
                TOP + PLOT_H + 16.0,
                escape(host)
            );
        }
    }
    let _ = write!(
        out,
        r##"<line x1="{LEFT:.0}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/><text x="{:.1}" y="{:.1}" text-anchor="middle">host</text><text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">VMs placed</text>"##,
        LEFT + PLOT_W,
        TOP + PLOT_H,
        TOP + PLOT_H,
        LEFT + PLOT_W / 2.0,
        HEIGHT - 6.0,
        TOP + PLOT_H / 2.0
    );
    for (i, p) in report.policies.iter().enumerate() {
        let ly = TOP + 6.0 + i as f64 * 18.0;
        let lx = LEFT + PLOT_W + 14.0;
        let _ = write!(
            out,
            r#"<rect x="{lx:.1}" y="{:.1}" width="14" height="10" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 5.0,
            colour(i),
            lx + 20.0,
            ly + 4.0,
            escape(&p.policy)
        );
    }
    out.push_str("</svg>");
    out
}

/// Every chart, top to bottom.
fn charts(report: &Report) -> Vec<String> {
    let gap = HEIGHT + 16.0;
    vec![
        spread_chart(
            report,
            "Memory utilisation over hosts: stddev (solid), mean (dashed), max (dotted)",
            |s| s.memory,
            0.0,
        ),
        spread_chart(
            report,
            "CPU utilisation over hosts: stddev (solid), mean (dashed), max (dotted)",
            |s| s.cpu,
            gap,
        ),
        empty_hosts_chart(report, 2.0 * gap),
        placements_chart(report, 3.0 * gap),
    ]
}

/// The report's charts as one SVG document.
pub fn svg(report: &Report) -> String {
    let charts = charts(report);
    let height = charts.len() as f64 * (HEIGHT + 16.0);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH:.0} {height:.0}\">{}</svg>\n",
        charts.concat()
    )
}

fn summary_row(report: &Report, i: usize, p: &PolicyReport) -> String {
    let f = |s: &Spread| format!("{:.3} / {:.3} / {:.3}", s.mean, s.stddev, s.max);
    format!(
        "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td></tr>",
        colour(i),
        escape(&p.policy),
        p.placed,
        p.refused,
        p.migrations,
        f(&p.last.memory),
        f(&p.last.cpu),
        p.last.empty_hosts,
        report.hosts
    )
}

/// The report as one HTML page with no external assets.
pub fn html(report: &Report) -> String {
    let mut page = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sandpiper simulation</title>\n<style>\
         body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}\
         h1{font-size:22px;margin:0 0 4px}p.sub{color:#555;margin:0 0 16px}\
         table{border-collapse:collapse;margin:8px 0 20px}td,th{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right}\
         td:first-child,th:first-child{text-align:left}th{background:#f4f4f4}\
         .swatch{display:inline-block;width:10px;height:10px;margin-right:6px}\
         svg{display:block;margin:0 0 12px}</style></head><body>\n",
    );
    let _ = writeln!(
        page,
        "<h1>Sandpiper policy simulation</h1><p class=\"sub\">{} events over {} s of trace time{}, {} hosts. Figures at the end of the trace; utilisation as fractions 0&ndash;1 (mean / stddev / max over hosts).</p>",
        report.trace.events,
        report.trace.duration_s,
        report
            .trace
            .seed
            .map(|s| format!(" (generated, seed {s})"))
            .unwrap_or_default(),
        report.hosts
    );
    page.push_str("<table><tr><th>policy</th><th>placed</th><th>refused</th><th>migrations</th><th>memory</th><th>CPU</th><th>empty hosts</th></tr>\n");
    for (i, p) in report.policies.iter().enumerate() {
        page.push_str(&summary_row(report, i, p));
        page.push('\n');
    }
    page.push_str("</table>\n");
    for chart in charts(report) {
        // Inline, each in the page's flow (the `y` only places it in the
        // standalone SVG).
        page.push_str(&chart.replacen(" y=\"", " data-y=\"", 1));
        page.push('\n');
    }
    for p in report.policies.iter().filter(|p| !p.refusals.is_empty()) {
        let _ = write!(
            page,
            "<h2>{}: {} refused</h2><table><tr><th>reason</th><th>VMs</th></tr>",
            escape(&p.policy),
            p.refused
        );
        for r in &p.refusals {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(&r.reason),
                r.count
            );
        }
        page.push_str("</table>\n");
    }
    page.push_str("</body></html>\n");
    page
}
