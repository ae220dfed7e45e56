//! The benchmark's results as SVG charts, written as plain SVG (no plotting library): every
//! failover round per system and fault, allocation throughput and p99 by clients, liveness
//! CPU by live registrations. They are drawn from the results JSON that `compare` writes, so
//! `beacon-bench charts bench/results*.json` redraws them from any earlier run.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

const W: f64 = 900.0;
const H: f64 = 340.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 56.0;
const LEFT: f64 = 70.0;
const GAP: f64 = 60.0;

/// Each system's colour, the same in every chart.
fn colour(system: &str) -> &'static str {
    match system {
        "beacon" | "leader" => "#3452c7",
        "etcd" => "#12805c",
        "ZooKeeper" => "#b54708",
        _ => "#7a2eb8",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A chart being drawn: its SVG text.
struct Svg(String);

impl Svg {
    fn new(title: &str, subtitle: &str) -> Svg {
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="system-ui, sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="#fff"/>
<text x="{LEFT}" y="20" font-size="15" font-weight="600" fill="#1d2330">{}</text>
<text x="{LEFT}" y="36" fill="#667085">{}</text>
"##,
            esc(title),
            esc(subtitle)
        );
        Svg(s)
    }

    fn text(&mut self, x: f64, y: f64, anchor: &str, fill: &str, text: &str) {
        let _ = writeln!(
            self.0,
            r#"<text x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" fill="{fill}">{}</text>"#,
            esc(text)
        );
    }

    fn line(&mut self, (x1, y1): (f64, f64), (x2, y2): (f64, f64), stroke: &str, width: f64) {
        let _ = writeln!(
            self.0,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{stroke}" stroke-width="{width}"/>"#
        );
    }

    fn dot(&mut self, x: f64, y: f64, fill: &str, title: &str) {
        let _ = writeln!(
            self.0,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{fill}" fill-opacity="0.75"><title>{}</title></circle>"#,
            esc(title)
        );
    }

    fn polyline(&mut self, points: &[(f64, f64)], stroke: &str) {
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            self.0,
            r#"<polyline points="{}" fill="none" stroke="{stroke}" stroke-width="2"/>"#,
            pts.join(" ")
        );
    }

    /// A legend of `systems` along the top right.
    fn legend(&mut self, systems: &[String]) {
        let mut x = W - 20.0;
        for s in systems.iter().rev() {
            x -= 14.0 + 7.5 * s.len() as f64;
            let _ = writeln!(
                self.0,
                r#"<rect x="{x:.1}" y="12" width="10" height="10" rx="2" fill="{}"/>"#,
                colour(s)
            );
            self.text(x + 14.0, 21.0, "start", "#1d2330", s);
            x -= 10.0;
        }
    }

    fn finish(mut self) -> String {
        self.0.push_str("</svg>\n");
        self.0
    }
}

/// A vertical axis from `lo` to `hi` over the plot area's height, linear or logarithmic.
#[derive(Clone, Copy)]
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
}

impl Axis {
    fn linear(max: f64) -> Axis {
        let hi = nice_ceiling(max.max(1e-9));
        Axis {
            lo: 0.0,
            hi,
            log: false,
        }
    }

    fn log(min: f64, max: f64) -> Axis {
        Axis {
            lo: 10f64.powf(min.max(1e-3).log10().floor()),
            hi: 10f64.powf(max.max(min * 10.0).log10().ceil()),
            log: true,
        }
    }

    /// Where `v` goes, from the bottom (0) to the top (1) of the plot area.
    fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let (a, b) = (self.lo.log10() as i32, self.hi.log10() as i32);
            (a..=b).map(|e| 10f64.powi(e)).collect()
        } else {
            (0..=4).map(|i| self.hi * i as f64 / 4.0).collect()
        }
    }
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * p)
}

fn label(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{}k", v / 1e3)
    } else if v >= 1.0 || v == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.2}")
    }
}

/// One panel: an area of the chart with a y axis and categories along x.
struct Panel {
    x0: f64,
    width: f64,
    axis: Axis,
}

impl Panel {
    fn y(&self, v: f64) -> f64 {
        H - BOTTOM - self.axis.frac(v) * (H - BOTTOM - TOP)
    }

    /// Draws the frame, the y ticks with `unit`, the `title` under it and the categories.
    fn frame(&self, svg: &mut Svg, title: &str, unit: &str, categories: &[String]) {
        for t in self.axis.ticks() {
            let y = self.y(t);
            svg.line((self.x0, y), (self.x0 + self.width, y), "#eaecf0", 1.0);
            svg.text(
                self.x0 - 6.0,
                y + 4.0,
                "end",
                "#667085",
                &format!("{}{unit}", label(t)),
            );
        }
        svg.line((self.x0, TOP), (self.x0, H - BOTTOM), "#98a2b3", 1.0);
        svg.line(
            (self.x0, H - BOTTOM),
            (self.x0 + self.width, H - BOTTOM),
            "#98a2b3",
            1.0,
        );
        for (i, c) in categories.iter().enumerate() {
            svg.text(
                self.cat_x(i, categories.len()),
                H - BOTTOM + 16.0,
                "middle",
                "#1d2330",
                c,
            );
        }
        svg.text(
            self.x0 + self.width / 2.0,
            H - 14.0,
            "middle",
            "#667085",
            title,
        );
    }

    fn cat_x(&self, i: usize, n: usize) -> f64 {
        self.x0 + self.width * (i as f64 + 0.5) / n as f64
    }
}

/// Splits the width into `n` panels.
fn panels(n: usize, axis: impl Fn(usize) -> Axis) -> Vec<Panel> {
    let width = (W - LEFT - 20.0 - GAP * (n as f64 - 1.0)) / n as f64;
    (0..n)
        .map(|i| Panel {
            x0: LEFT + i as f64 * (width + GAP),
            width,
            axis: axis(i),
        })
        .collect()
}

/// The `[system, value]` pairs of `results[part]`.
fn pairs<'a>(results: &'a Value, part: &str) -> Vec<(&'a str, &'a Value)> {
    results[part]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| Some((p.get(0)?.as_str()?, p.get(1)?)))
                .collect()
        })
        .unwrap_or_default()
}

fn unique<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for i in items {
        if !out.iter().any(|o| o == i) {
            out.push(i.to_owned());
        }
    }
    out
}

/// Every failover round, one panel per fault, one column of dots per system with its
/// median as a bar; milliseconds on a log scale (beacon's few ms and ZooKeeper's 14 s
/// on one chart).
pub fn failover(results: &Value) -> Option<String> {
    let runs = pairs(results, "failover");
    if runs.is_empty() {
        return None;
    }
    let faults = unique(runs.iter().filter_map(|(_, f)| f["fault"].as_str()));
    let systems = unique(runs.iter().map(|(s, _)| *s));
    let all: Vec<f64> = runs
        .iter()
        .flat_map(|(_, f)| f["rounds"].as_array().into_iter().flatten())
        .filter_map(Value::as_f64)
        .collect();
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(0.0, f64::max);
    let axis = Axis::log(min, max);
    let mut svg = Svg::new(
        "Failover: time from the leader's loss to a write succeeding",
        "every round as a dot, the median as a bar; milliseconds, log scale; lower is better",
    );
    svg.legend(&systems);
    for (panel, fault) in panels(faults.len(), |_| axis).iter().zip(&faults) {
        let name = match fault.as_str() {
            "Kill" => "leader SIGKILLed",
            "Stop" => "leader SIGSTOPped (hung)",
            "Cut" => "leader's network cut",
            other => other,
        };
        panel.frame(&mut svg, name, " ms", &systems);
        for (i, system) in systems.iter().enumerate() {
            let Some((_, run)) = runs
                .iter()
                .find(|(s, f)| s == system && f["fault"].as_str() == Some(fault))
            else {
                continue;
            };
            let x = panel.cat_x(i, systems.len());
            let rounds: Vec<f64> = run["rounds"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .collect();
            for (k, ms) in rounds.iter().enumerate() {
                // Spread the dots a little so that equal rounds stay visible.
                let dx = (k as f64 - (rounds.len() as f64 - 1.0) / 2.0) * 2.2;
                svg.dot(
                    x + dx,
                    panel.y(*ms),
                    colour(system),
                    &format!("{system}, round {}: {ms:.1} ms", k + 1),
                );
            }
            if let Some(median) = run["median_ms"].as_f64() {
                let y = panel.y(median);
                svg.line((x - 18.0, y), (x + 18.0, y), "#101828", 2.0);
                // Beside the bar, on the side with room.
                let (lx, anchor) = if i + 1 == systems.len() {
                    (x - 22.0, "end")
                } else {
                    (x + 22.0, "start")
                };
                svg.text(lx, y + 4.0, anchor, "#101828", &format!("{median:.0}"));
            }
        }
    }
    Some(svg.finish())
}

/// Allocation throughput and p99 latency by concurrent clients, one line per system.
pub fn allocation(results: &Value) -> Option<String> {
    let runs = pairs(results, "alloc");
    if runs.is_empty() {
        return None;
    }
    let systems = unique(runs.iter().map(|(s, _)| *s));
    let mut clients: Vec<u64> = runs
        .iter()
        .filter_map(|(_, t)| t["clients"].as_u64())
        .collect();
    clients.sort_unstable();
    clients.dedup();
    let categories: Vec<String> = clients
        .iter()
        .map(|c| format!("{c} client{}", if *c == 1 { "" } else { "s" }))
        .collect();
    let measures = [
        ("per_sec", "IDs per second (higher is better)", ""),
        ("p99_ms", "p99 latency (lower is better)", " ms"),
    ];
    let max = |key: &str| {
        runs.iter()
            .filter_map(|(_, t)| t[key].as_f64())
            .fold(0.0, f64::max)
    };
    let mut svg = Svg::new(
        "Node-ID allocation: three members each, quorum writes",
        "each client allocates one ID at a time, as fast as it is answered",
    );
    svg.legend(&systems);
    let ps = panels(2, |i| Axis::linear(max(measures[i].0)));
    for (panel, (key, title, unit)) in ps.iter().zip(measures) {
        panel.frame(&mut svg, title, unit, &categories);
        for system in &systems {
            let points: Vec<(f64, f64)> = clients
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let (_, t) = runs
                        .iter()
                        .find(|(s, t)| s == system && t["clients"].as_u64() == Some(*c))?;
                    Some((panel.cat_x(i, clients.len()), panel.y(t[key].as_f64()?)))
                })
                .collect();
            svg.polyline(&points, colour(system));
            for (x, y) in &points {
                svg.dot(*x, *y, colour(system), system);
            }
        }
    }
    Some(svg.finish())
}

/// The leader's CPU (share of one core) by live registrations, each renewing once a
/// second, one line per system measured.
pub fn liveness(results: &Value) -> Option<String> {
    let series: Vec<(String, Vec<(f64, f64)>)> = pairs(results, "liveness")
        .into_iter()
        .map(|(system, run)| (system.to_owned(), points(run, "live", &[("cpu", 100.0)])))
        .collect();
    lines(
        "Liveness: the leader's CPU by live registrations",
        "each registration renews once a second; share of one core; lower is better",
        " %",
        &series,
        |system, live, cpu| format!("{system}: {live} live, {cpu:.0} % CPU"),
    )
}

/// Bytes of resident memory per registration on the leader and on a follower, by
/// registrations held (the scale part).
pub fn scale(results: &Value) -> Option<String> {
    let run = &results["scale"];
    let series: Vec<(String, Vec<(f64, f64)>)> = [
        ("leader", "leader_bytes_per_registration"),
        ("follower", "follower_bytes_per_registration"),
    ]
    .into_iter()
    .map(|(who, key)| (who.to_owned(), points(run, "live", &[(key, 1.0)])))
    .collect();
    lines(
        "Scale: memory per registration by registrations held",
        "five beacons; resident memory above an empty beacon's, per registration; lower is better",
        " B",
        &series,
        |who, live, bytes| format!("{who}: {live} registrations, {bytes:.0} B each"),
    )
}

/// Resident memory of the leader and a follower, and the leader's log and snapshot on
/// disk, by registrations held (the huge part).
pub fn huge(results: &Value) -> Option<String> {
    let run = &results["huge"];
    let gib = 1.0 / 1073741824.0;
    let series: Vec<(String, Vec<(f64, f64)>)> = [
        ("leader RSS", "leader_rss"),
        ("follower RSS", "follower_rss"),
        ("snapshot on disk", "snapshot_bytes"),
        ("log on disk", "log_bytes"),
    ]
    .into_iter()
    .map(|(what, key)| (what.to_owned(), points(run, "live", &[(key, gib)])))
    .collect();
    lines(
        "Huge: memory and disk by registrations held",
        "three beacons, most registrations restored from a backup, the rest registered live; GiB; lower is better",
        " GiB",
        &series,
        |what, live, v| format!("{what}: {live} registrations, {v:.2} GiB"),
    )
}

/// The scale part's rate half: lease renewals per leader core-second and the live
/// registrations one core keeps at the client's default cadence, a bar per system on a log
/// scale (beacon's and etcd's differ by more than a decade).
pub fn renewal_rate(results: &Value) -> Option<String> {
    let runs = pairs(results, "renewal_rate");
    if runs.is_empty() {
        return None;
    }
    let systems = unique(runs.iter().map(|(s, _)| *s));
    let measures = [
        ("per_core_sec", "renewals per leader core-second"),
        ("live_per_core", "live registrations per leader core"),
    ];
    let values = |key: &str| -> Vec<f64> {
        runs.iter()
            .filter_map(|(_, x)| x[key].as_f64())
            .filter(|v| *v > 0.0)
            .collect()
    };
    let mut svg = Svg::new(
        "Scale, rate: lease renewals one leader core sustains",
        "renewed as fast as answered on five members; per second of the leader's CPU; log scale; higher is better",
    );
    svg.legend(&systems);
    let axes: Vec<Axis> = measures
        .iter()
        .map(|(key, _)| {
            let v = values(key);
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(0.0, f64::max);
            Axis::log(min.min(max).max(1.0), max.max(10.0))
        })
        .collect();
    for (panel, (key, title)) in panels(2, |i| axes[i]).iter().zip(measures) {
        panel.frame(&mut svg, title, "", &systems);
        for (i, system) in systems.iter().enumerate() {
            let Some(v) = runs
                .iter()
                .find(|(s, _)| s == system)
                .and_then(|(_, x)| x[key].as_f64())
            else {
                continue;
            };
            let x = panel.cat_x(i, systems.len());
            let (top, bottom) = (panel.y(v), panel.y(panel.axis.lo));
            let _ = writeln!(
                svg.0,
                r#"<rect x="{:.1}" y="{top:.1}" width="36" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                x - 18.0,
                (bottom - top).max(0.0),
                colour(system),
                esc(&format!("{system}: {v:.0}"))
            );
            let text = if v >= 1e6 {
                format!("{:.2}M", v / 1e6)
            } else if v >= 1e4 {
                format!("{:.0}k", v / 1e3)
            } else {
                format!("{v:.0}")
            };
            svg.text(x, top - 6.0, "middle", "#101828", &text);
        }
    }
    Some(svg.finish())
}

/// One panel of bars against a target: its title, unit, bars and target.
type Targeted<'a> = (&'a str, &'a str, Vec<(String, f64)>, f64);

/// The gray part: each measure beside its target (a dashed line), a bar per case.
pub fn gray(results: &Value) -> Option<String> {
    let g = &results["gray"];
    if g.is_null() {
        return None;
    }
    let mut panels_of: Vec<Targeted> = Vec::new();
    let hung: Vec<(String, f64)> = g["hung"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| {
            Some((
                format!("{} stopped", h["stopped"].as_str()?),
                h["longest_gap_ms"].as_f64()?,
            ))
        })
        .collect();
    if !hung.is_empty() {
        panels_of.push(("longest time without a renewal", " ms", hung, 2000.0));
    }
    let w = &g["watchers"];
    if let (Some(idle), Some(herd)) = (w["idle_p99_ms"].as_f64(), w["herd_p99_ms"].as_f64()) {
        panels_of.push((
            "write p99, idle and during the herd",
            " ms",
            vec![("idle".into(), idle), ("herd".into(), herd)],
            2.0 * idle,
        ));
    }
    let o = &g["overload"];
    if let (Some(peak), Some(good)) = (o["peak_per_sec"].as_f64(), o["goodput_per_sec"].as_f64())
        && peak > 0.0
    {
        panels_of.push((
            "goodput at 10x load, % of the peak",
            "%",
            vec![("goodput".into(), 100.0 * good / peak)],
            90.0,
        ));
    }
    if panels_of.is_empty() {
        return None;
    }
    let mut svg = Svg::new(
        "Gray failures and overload",
        "beacon; each bar beside its target (dashed)",
    );
    let axes: Vec<Axis> = panels_of
        .iter()
        .map(|(_, _, bars, target)| {
            let max = bars.iter().map(|(_, v)| *v).fold(*target, f64::max);
            Axis::linear(max * 1.15)
        })
        .collect();
    for (panel, (title, unit, bars, target)) in
        panels(panels_of.len(), |i| axes[i]).iter().zip(&panels_of)
    {
        let names: Vec<String> = bars.iter().map(|(n, _)| n.clone()).collect();
        panel.frame(&mut svg, title, unit, &names);
        let y = panel.y(*target);
        let _ = writeln!(
            svg.0,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#d92d20" stroke-width="1.5" stroke-dasharray="5 4"><title>{}</title></line>"##,
            panel.x0,
            panel.x0 + panel.width,
            esc(&format!("target {target:.0}{unit}"))
        );
        for (i, (name, v)) in bars.iter().enumerate() {
            let x = panel.cat_x(i, bars.len());
            let (top, bottom) = (panel.y(*v), panel.y(panel.axis.lo));
            let _ = writeln!(
                svg.0,
                r#"<rect x="{:.1}" y="{top:.1}" width="36" height="{:.1}" fill="{}"><title>{}</title></rect>"#,
                x - 18.0,
                (bottom - top).max(0.0),
                colour("beacon"),
                esc(&format!("{name}: {v:.1}{unit}"))
            );
            svg.text(x, top - 6.0, "middle", "#101828", &format!("{v:.0}"));
        }
    }
    Some(svg.finish())
}

/// `(x, y)` of each of `run`'s steps: `x` its field `x`, `y` the first of `ys` it has
/// (field, scale).
fn points(run: &Value, x: &str, ys: &[(&str, f64)]) -> Vec<(f64, f64)> {
    run["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let y = ys
                .iter()
                .find_map(|(field, scale)| Some(s[*field].as_f64()? * scale))?;
            Some((s[x].as_f64()?, y))
        })
        .collect()
}

/// A chart of one line per series over a linear x axis (registrations), or none without
/// points.
fn lines(
    title: &str,
    subtitle: &str,
    unit: &str,
    series: &[(String, Vec<(f64, f64)>)],
    dot: impl Fn(&str, f64, f64) -> String,
) -> Option<String> {
    if series.iter().all(|(_, p)| p.is_empty()) {
        return None;
    }
    let all = || series.iter().flat_map(|(_, p)| p.iter().copied());
    let max_x = all().map(|(x, _)| x).fold(0.0, f64::max);
    let max_y = all().map(|(_, y)| y).fold(0.0, f64::max);
    let names = unique(series.iter().map(|(n, _)| n.as_str()));
    let mut svg = Svg::new(title, subtitle);
    svg.legend(&names);
    let panel = &panels(1, |_| Axis::linear(max_y))[0];
    let x_axis = Axis::linear(max_x);
    let x = |v: f64| panel.x0 + x_axis.frac(v) * panel.width;
    panel.frame(&mut svg, "live registrations", unit, &[]);
    for t in x_axis.ticks() {
        svg.text(x(t), H - BOTTOM + 16.0, "middle", "#1d2330", &label(t));
    }
    for (name, points) in series {
        let at: Vec<(f64, f64)> = points.iter().map(|(l, v)| (x(*l), panel.y(*v))).collect();
        svg.polyline(&at, colour(name));
        for ((px, py), (l, v)) in at.iter().zip(points) {
            svg.dot(*px, *py, colour(name), &dot(name, *l, *v));
        }
    }
    Some(svg.finish())
}

/// Writes the charts that `results` has data for beside `json` (`results.json` gives
/// `results.failover.svg`, `results.alloc.svg`, `results.liveness.svg`); returns the files
/// written.
pub fn write_beside(json: &Path, results: &Value) -> anyhow::Result<Vec<PathBuf>> {
    let stem = json
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("results");
    let mut written = Vec::new();
    for (name, chart) in [
        ("failover", failover(results)),
        ("alloc", allocation(results)),
        ("liveness", liveness(results)),
        ("scale", scale(results)),
        ("huge", huge(results)),
        ("renewal-rate", renewal_rate(results)),
        ("gray", gray(results)),
    ] {
        let Some(svg) = chart else { continue };
        let path = json.with_file_name(format!("{stem}.{name}.svg"));
        std::fs::write(&path, svg).with_context(|| format!("write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// `beacon-bench charts FILE.json...`: redraws the charts of earlier runs.
pub fn redraw(files: &[PathBuf]) -> anyhow::Result<()> {
    for file in files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("read {}", file.display()))?;
        let results: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a results JSON file", file.display()))?;
        let written = write_beside(file, &results)?;
        if written.is_empty() {
            println!(
                "{}: no failover, allocation or liveness results to draw",
                file.display()
            );
        }
        for w in written {
            println!("{}: wrote {}", file.display(), w.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> Value {
        json!({
            "failover": [
                ["beacon", {"fault": "Kill", "rounds": [8.0, 9.5, 23.0], "median_ms": 9.5, "max_ms": 23.0}],
                ["etcd", {"fault": "Kill", "rounds": [1300.0, 1340.0], "median_ms": 1320.0, "max_ms": 1340.0}],
                ["beacon", {"fault": "Stop", "rounds": [383.0], "median_ms": 383.0, "max_ms": 383.0}],
            ],
            "alloc": [
                ["beacon", {"clients": 1, "per_sec": 1500.0, "p99_ms": 1.8}],
                ["beacon", {"clients": 16, "per_sec": 5800.0, "p99_ms": 9.8}],
                ["etcd", {"clients": 1, "per_sec": 816.0, "p99_ms": 8.7}],
            ],
            "liveness": [["beacon", {"steps": [{"live": 2500, "cpu": 0.13}, {"live": 50000, "cpu": 0.39}]}]],
        })
    }

    #[test]
    fn every_round_is_a_dot_in_its_panel() {
        let svg = failover(&sample()).unwrap();
        assert_eq!(svg.matches("<circle").count(), 6, "one dot per round");
        assert!(svg.contains("leader SIGKILLed") && svg.contains("leader SIGSTOPped (hung)"));
        assert!(svg.contains("etcd, round 2: 1340.0 ms"));
        // Log scale from 1 ms to 10 s: the decades are labelled.
        for tick in [">1 ms<", ">10 ms<", ">1000 ms<", ">10k ms<"] {
            assert!(svg.contains(tick), "{tick} in the axis");
        }
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    }

    #[test]
    fn allocation_and_liveness_draw_their_points() {
        let svg = allocation(&sample()).unwrap();
        // beacon at 1 and 16 clients, etcd at 1, in each of two panels.
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(svg.contains(">1 client<") && svg.contains(">16 clients<"));
        let svg = liveness(&sample()).unwrap();
        assert!(svg.contains("beacon: 50000 live, 39 % CPU"));
        assert_eq!(failover(&json!({"alloc": []})), None, "nothing to draw");
    }

    #[test]
    fn renewal_rate_draws_a_bar_per_system_and_measure() {
        let results = json!({"renewal_rate": [
            ["beacon", {"per_core_sec": 212_345.0, "live_per_core": 530_862.0}],
            ["etcd", {"per_core_sec": 9_870.0, "live_per_core": 32_900.0}],
        ]});
        let svg = renewal_rate(&results).unwrap();
        assert_eq!(
            svg.matches("<rect x=").count(),
            4 + 2,
            "four bars and two legend keys"
        );
        assert!(svg.contains(">212k<") && svg.contains(">9870<"));
        assert!(svg.contains("beacon: 530862"));
        assert_eq!(renewal_rate(&json!({"renewal_rate": []})), None);
    }

    #[test]
    fn log_axes_place_decades_evenly() {
        let a = Axis::log(8.0, 14_000.0);
        assert_eq!((a.lo, a.hi), (1.0, 100_000.0));
        assert!((a.frac(10.0) - 0.2).abs() < 1e-9);
        assert!((a.frac(1000.0) - 0.6).abs() < 1e-9);
        assert_eq!(nice_ceiling(39.3), 50.0);
        assert_eq!(nice_ceiling(11_322.0), 20_000.0);
    }
}
