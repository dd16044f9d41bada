//! `docpipe report --run R`: one self-contained HTML page about a run — throughput over
//! time, per-stage latency, the workers' batch sizes, the contract fields extracted, and
//! failures. The plots are inline SVG
//! drawn here; the page loads nothing from anywhere.

use std::fmt::Write as _;

use docpipe_store::report::{FieldsLine, RunFigures};
use uuid::Uuid;

/// Everything the page shows, from the figures `docpipe_store::report` reads.
pub struct Report {
    run_id: Uuid,
    header: Vec<(String, String)>,
    /// (seconds since the run started, input tokens) per stored chunk.
    chunk_times: Vec<(f64, f64)>,
    /// Seconds since the run started at which each document finished (done).
    done_times: Vec<f64>,
    /// Stage name → observed seconds.
    stages: Vec<(&'static str, &'static str, Vec<f64>)>,
    /// (chunks in the pass, passes).
    batch_sizes: Vec<(i32, i64)>,
    /// (real tokens, padded tokens) per forward pass.
    batch_tokens: Vec<(i64, i64)>,
    workers: Vec<(String, i64, i64, f64)>,
    failure_classes: Vec<(String, String, i64)>,
    failures: Vec<(String, String, String, i32, String)>,
    flagged: Vec<(String, String)>,
    fields: Vec<FieldsLine>,
}

impl Report {
    /// The page's content from the run's stored figures.
    pub fn new(run_id: Uuid, f: RunFigures) -> Self {
        let (p, tokens, span_s) = (f.summary.progress, f.summary.tokens, f.summary.span_s);
        let tokens = match (tokens, span_s) {
            (Some(t), Some(secs)) if secs > 0.0 => {
                format!("{t} model input tokens, {:.0} tokens/s end to end", t as f64 / secs)
            }
            (Some(t), _) => format!("{t} model input tokens"),
            _ => "none stored".into(),
        };
        let time = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        let header = vec![
            ("run".into(), run_id.to_string()),
            ("trigger".into(), p.trigger.clone()),
            ("source".into(), format!("s3://{}/{}", p.bucket, p.prefix)),
            ("started".into(), time(p.started_at)),
            ("finished".into(), p.finished_at.map(time).unwrap_or_else(|| "not yet".into())),
            (
                "documents".into(),
                format!("{}: {} done, {} failed, {} pending", p.documents, p.done, p.failed, p.pending()),
            ),
            (
                "chunks".into(),
                format!(
                    "{} of {} stored, {:.2} chunks/s over the run",
                    p.chunks_done,
                    p.chunks_total,
                    p.chunks_per_s.unwrap_or(0.0)
                ),
            ),
            ("tokens".into(), tokens),
            (
                "OCR".into(),
                format!(
                    "{} page(s) read by OCR in {:.0} s; {} document(s) flagged",
                    p.ocr_pages, p.ocr_seconds, p.flagged
                ),
            ),
        ];
        Report {
            run_id,
            header,
            chunk_times: f.chunk_times,
            done_times: f.done_times,
            stages: f.stages,
            batch_sizes: f.batch_sizes,
            batch_tokens: f.batch_tokens,
            workers: f.workers,
            failure_classes: f.failure_classes,
            failures: f.failures,
            flagged: f.flagged,
            fields: f.fields,
        }
    }
}

impl Report {
    pub fn html(&self) -> String {
        let mut h = String::new();
        self.header(&mut h);
        self.throughput(&mut h);
        self.latency(&mut h);
        self.batches(&mut h);
        self.fields(&mut h);
        self.flagged(&mut h);
        self.failures(&mut h);
        h.push_str("</body></html>\n");
        h
    }

    fn header(&self, h: &mut String) {
        let _ = write!(
            h,
            "<!doctype html><html lang=en><head><meta charset=utf-8><title>docpipe run {id}</title><style>{CSS}</style></head><body>\
             <h1>docpipe run <code>{id}</code></h1><table class=kv>",
            id = self.run_id
        );
        for (k, v) in &self.header {
            let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        h.push_str("</table>");
    }

    fn throughput(&self, h: &mut String) {
        h.push_str("<h2>Throughput over time</h2>");
        let end = self.chunk_times.last().map(|c| c.0).unwrap_or(0.0).max(1.0);
        let bins = 40usize;
        let width = end / bins as f64;
        let mut tps = vec![0.0; bins];
        for (t, tok) in &self.chunk_times {
            tps[((t / width) as usize).min(bins - 1)] += tok / width;
        }
        if self.chunk_times.is_empty() {
            h.push_str("<p>No chunks stored yet.</p>");
        } else {
            let pts: Vec<(f64, f64)> = tps.iter().enumerate().map(|(i, y)| ((i as f64 + 0.5) * width, *y)).collect();
            h.push_str(&line_chart(&pts, "seconds since the run started", "stored tokens/s", false));
            let done: Vec<(f64, f64)> = self.done_times.iter().enumerate().map(|(i, t)| (*t, (i + 1) as f64)).collect();
            if !done.is_empty() {
                h.push_str(&line_chart(&done, "seconds since the run started", "documents done", true));
            }
        }
    }

    fn latency(&self, h: &mut String) {
        h.push_str("<h2>Latency by stage</h2>");
        let rows: Vec<(String, Summary)> = self
            .stages
            .iter()
            .filter_map(|(name, unit, v)| Summary::of(v).map(|s| (format!("{name} ({unit})"), s)))
            .collect();
        if rows.is_empty() {
            h.push_str("<p>No timings recorded for this run.</p>");
        } else {
            h.push_str(&range_chart(&rows));
            h.push_str(
                "<table><tr><th>stage</th><th>n</th><th>p50 s</th><th>p90 s</th><th>p99 s</th><th>max s</th></tr>",
            );
            for (name, s) in &rows {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td><td>{:.3}</td></tr>",
                    esc(name),
                    s.n,
                    s.p50,
                    s.p90,
                    s.p99,
                    s.max
                );
            }
            h.push_str("</table>");
        }
    }

    fn batches(&self, h: &mut String) {
        h.push_str("<h2>Worker batches</h2>");
        if self.batch_sizes.is_empty() {
            h.push_str("<p>No forward passes recorded for this run.</p>");
        } else {
            let bars: Vec<(String, f64)> = self.batch_sizes.iter().map(|(c, n)| (c.to_string(), *n as f64)).collect();
            h.push_str(&bar_chart(&bars, "chunks per forward pass", "forward passes"));
            let (real, padded) = self.batch_tokens.iter().fold((0i64, 0i64), |(r, p), (a, b)| (r + a, p + b));
            let toks: Vec<f64> = self.batch_tokens.iter().map(|t| t.0 as f64).collect();
            if let Some(s) = Summary::of(&toks) {
                let _ = write!(
                    h,
                    "<p>{} forward passes; real tokens per pass p50 {:.0}, max {:.0}; padding {:.1}% of computed tokens.</p>",
                    s.n,
                    s.p50,
                    s.max,
                    100.0 * (1.0 - real as f64 / padded.max(1) as f64)
                );
            }
            h.push_str(
                "<table><tr><th>worker</th><th>forward passes</th><th>tokens</th><th>prefill tokens/s</th></tr>",
            );
            for (w, n, t, r) in &self.workers {
                let _ = write!(h, "<tr><td>{}</td><td>{n}</td><td>{t}</td><td>{r:.0}</td></tr>", esc(w));
            }
            h.push_str("</table>");
        }
    }

    /// The answers extracted from the run's done documents (`contract_fields`).
    fn fields(&self, h: &mut String) {
        h.push_str("<h2>Contract fields</h2>");
        let count = |s: Option<&str>| self.fields.iter().filter(|f| f.status.as_deref() == s).count();
        if self.fields.iter().all(|f| f.status.is_none()) {
            h.push_str("<p>No field extraction in this run (run with <code>--fields</code>, or <code>docpipe extract-fields</code>).</p>");
            return;
        }
        let _ = write!(
            h,
            "<p>{} extracted, {} failed, {} queued or running, {} not asked for.</p>",
            count(Some("done")),
            count(Some("failed")),
            count(Some("queued")) + count(Some("running")),
            count(None)
        );
        h.push_str(
            "<table><tr><th>object</th><th>title</th><th>parties</th><th>agreement date</th><th>effective</th>\
             <th>expiration</th><th>renewal</th><th>notice</th><th>governing law</th></tr>",
        );
        let cell = |v: &Option<String>| esc(v.as_deref().unwrap_or("—"));
        for f in &self.fields {
            if f.status.as_deref() != Some("done") {
                let why = match (&f.status, &f.error) {
                    (Some(s), Some(e)) => format!("{s}: {e}"),
                    (Some(s), None) => s.clone(),
                    (None, _) => "not asked for".into(),
                };
                let _ = write!(h, "<tr><td>{}</td><td colspan=8><i>{}</i></td></tr>", esc(&f.key), esc(&why));
                continue;
            }
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.key),
                cell(&f.title),
                cell(&f.parties),
                cell(&f.agreement_date),
                cell(&f.effective_date),
                cell(&f.expiration),
                cell(&f.renewal),
                cell(&f.notice_period),
                cell(&f.governing_law)
            );
        }
        h.push_str("</table>");
    }

    /// Documents processed with a warning: done, but worth a look.
    fn flagged(&self, h: &mut String) {
        h.push_str("<h2>Flagged documents</h2>");
        if self.flagged.is_empty() {
            h.push_str("<p>None.</p>");
            return;
        }
        h.push_str("<table><tr><th>object</th><th>warning</th></tr>");
        for (key, warning) in &self.flagged {
            let _ = write!(h, "<tr><td>{}</td><td>{}</td></tr>", esc(key), esc(warning));
        }
        h.push_str("</table>");
    }

    fn failures(&self, h: &mut String) {
        h.push_str("<h2>Failures</h2>");
        if self.failure_classes.is_empty() {
            h.push_str("<p>None.</p>");
        } else {
            let bars: Vec<(String, f64)> =
                self.failure_classes.iter().map(|(s, c, n)| (format!("{s}/{c}"), *n as f64)).collect();
            h.push_str(&bar_chart(&bars, "stage/class", "failures"));
            h.push_str("<table><tr><th>object</th><th>stage</th><th>class</th><th>attempts</th><th>reason</th></tr>");
            for (key, stage, class, attempts, msg) in &self.failures {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{attempts}</td><td>{}</td></tr>",
                    esc(key),
                    esc(stage),
                    esc(class),
                    esc(msg)
                );
            }
            h.push_str("</table>");
        }
    }
}

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:60em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border-bottom:1px solid #ddd;padding:.2em .6em;text-align:left;vertical-align:top}\
table.kv th{color:#555;font-weight:normal}svg{display:block;margin:.5em 0}svg text{font:11px system-ui,sans-serif;fill:#333}";

/// Escape text for HTML and SVG.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Percentiles of a sample (nearest rank).
pub struct Summary {
    n: usize,
    min: f64,
    p50: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Self { n: v.len(), min: v[0], p50: q(0.5), p90: q(0.9), p99: q(0.99), max: v[v.len() - 1] })
    }
}

const W: f64 = 720.0;
const H: f64 = 220.0;
const LEFT: f64 = 70.0;
const BOTTOM: f64 = 36.0;
/// Intervals per axis: with [`nice_max`] every tick is a round number.
const TICKS: usize = 5;

/// A "nice" upper bound for an axis.
fn nice_max(x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let mag = 10f64.powf(x.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|m| *m >= x).unwrap_or(10.0 * mag)
}

fn axes(svg: &mut String, x_label: &str, y_label: &str, y_max: f64) {
    let (x0, y0) = (LEFT, H - BOTTOM);
    let _ = write!(
        svg,
        "<line x1={x0} y1=10 x2={x0} y2={y0} stroke=#888 /><line x1={x0} y1={y0} x2={W} y2={y0} stroke=#888 />\
         <text x={} y={} text-anchor=middle>{}</text>\
         <text transform='translate(14 {}) rotate(-90)' text-anchor=middle>{}</text>",
        (x0 + W) / 2.0,
        H - 4.0,
        esc(x_label),
        (10.0 + y0) / 2.0,
        esc(y_label)
    );
    for i in 0..=TICKS {
        let v = y_max * i as f64 / TICKS as f64;
        let y = y0 - (y0 - 10.0) * i as f64 / TICKS as f64;
        let _ = write!(
            svg,
            "<line x1={x0} y1={y:.1} x2={W} y2={y:.1} stroke=#eee /><text x={} y={:.1} text-anchor=end>{}</text>",
            x0 - 4.0,
            y + 4.0,
            short(v)
        );
    }
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}").trim_end_matches('0').to_string()
    }
}

/// A line (or step) chart of `(x, y)` points, both axes from 0.
fn line_chart(points: &[(f64, f64)], x_label: &str, y_label: &str, step: bool) -> String {
    let x_max = nice_max(points.iter().map(|p| p.0).fold(0.0, f64::max));
    let y_max = nice_max(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let (x0, y0) = (LEFT, H - BOTTOM);
    let sx = |x: f64| x0 + (W - x0 - 10.0) * x / x_max;
    let sy = |y: f64| y0 - (y0 - 10.0) * y / y_max;
    let mut svg = format!("<svg viewBox='0 0 {W} {H}' width={W} height={H} role=img>");
    axes(&mut svg, x_label, y_label, y_max);
    for i in 0..=TICKS {
        let v = x_max * i as f64 / TICKS as f64;
        let _ = write!(svg, "<text x={:.1} y={} text-anchor=middle>{}</text>", sx(v), y0 + 14.0, short(v));
    }
    let mut path = String::new();
    let mut last_y = 0.0;
    for (i, (x, y)) in points.iter().enumerate() {
        if step {
            let _ = write!(path, "{}{:.1},{:.1} ", if i == 0 { "M" } else { "L" }, sx(*x), sy(last_y));
            last_y = *y;
        }
        let _ = write!(path, "{}{:.1},{:.1} ", if i == 0 && !step { "M" } else { "L" }, sx(*x), sy(*y));
    }
    let _ = write!(svg, "<path d='{path}' fill=none stroke=#2a6fdb stroke-width=2 /></svg>");
    svg
}

/// Vertical bars of counts with a label under each.
fn bar_chart(bars: &[(String, f64)], x_label: &str, y_label: &str) -> String {
    // counts: whole-number ticks
    let y_max = nice_max(bars.iter().map(|b| b.1).fold(0.0, f64::max)).max(TICKS as f64);
    let (x0, y0) = (LEFT, H - BOTTOM);
    let slot = ((W - x0 - 10.0) / bars.len().max(1) as f64).min(80.0);
    let mut svg = format!("<svg viewBox='0 0 {W} {H}' width={W} height={H} role=img>");
    axes(&mut svg, x_label, y_label, y_max);
    for (i, (label, v)) in bars.iter().enumerate() {
        let h = (y0 - 10.0) * v / y_max;
        let x = x0 + slot * i as f64 + slot * 0.15;
        let _ = write!(
            svg,
            "<rect x={x:.1} y={:.1} width={:.1} height={h:.1} fill=#2a6fdb><title>{}: {}</title></rect>\
             <text x={:.1} y={} text-anchor=middle>{}</text>",
            y0 - h,
            slot * 0.7,
            esc(label),
            v,
            x + slot * 0.35,
            y0 + 14.0,
            esc(label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// One row per stage on a shared log-scale seconds axis: a line from min to max, a box from
/// p50 to p90, and a tick at p99.
fn range_chart(rows: &[(String, Summary)]) -> String {
    let lo = rows.iter().map(|r| r.1.min).fold(f64::INFINITY, f64::min).max(1e-3);
    let hi = rows.iter().map(|r| r.1.max).fold(0.0, f64::max).max(lo * 10.0);
    let (l0, l1) = (lo.log10().floor(), hi.log10().ceil());
    let (x0, label_w) = (340.0, 330.0);
    let row_h = 26.0;
    let height = row_h * rows.len() as f64 + 40.0;
    let sx = |v: f64| x0 + (W - x0 - 40.0) * (v.max(10f64.powf(l0)).log10() - l0) / (l1 - l0);
    let mut svg = format!("<svg viewBox='0 0 {W} {height}' width={W} height={height} role=img>");
    for e in (l0 as i32)..=(l1 as i32) {
        let v = 10f64.powi(e);
        let _ = write!(
            svg,
            "<line x1={x:.1} y1=0 x2={x:.1} y2={} stroke=#eee /><text x={x:.1} y={} text-anchor=middle>{} s</text>",
            height - 30.0,
            height - 16.0,
            if e < 0 { format!("{v}") } else { format!("{v:.0}") },
            x = sx(v)
        );
    }
    for (i, (name, s)) in rows.iter().enumerate() {
        let y = row_h * i as f64 + 14.0;
        let _ = write!(
            svg,
            "<text x={} y={:.1} text-anchor=end>{}</text>\
             <line x1={:.1} y1={y:.1} x2={:.1} y2={y:.1} stroke=#888 />\
             <rect x={:.1} y={:.1} width={:.1} height=12 fill=#2a6fdb><title>p50 {:.3} s, p90 {:.3} s</title></rect>\
             <line x1={x99:.1} y1={:.1} x2={x99:.1} y2={:.1} stroke=#d33 stroke-width=2 />",
            label_w,
            y + 4.0,
            esc(name),
            sx(s.min),
            sx(s.max),
            sx(s.p50),
            y - 6.0,
            (sx(s.p90) - sx(s.p50)).max(2.0),
            s.p50,
            s.p90,
            y - 7.0,
            y + 7.0,
            x99 = sx(s.p99)
        );
    }
    svg.push_str("</svg><p class=legend>Line: min to max; box: p50 to p90; red tick: p99.</p>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = Summary::of(&v).unwrap();
        assert_eq!((s.n, s.min, s.p50, s.p90, s.p99, s.max), (100, 1.0, 50.0, 90.0, 99.0, 100.0));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn charts_are_self_contained_svg() {
        let line = line_chart(&[(0.0, 1.0), (5.0, 3.0)], "t <s>", "y", false);
        assert!(line.starts_with("<svg") && line.ends_with("</svg>") && line.contains("t &lt;s&gt;"));
        let bars = bar_chart(&[("4".into(), 2.0)], "x", "y");
        assert!(bars.contains("<rect") && !bars.contains("http"));
        assert_eq!(nice_max(730.0), 1000.0);
        assert_eq!(nice_max(0.3), 0.5);
    }
}
