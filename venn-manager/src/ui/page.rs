//! The status page's HTML: the whole document at `/`, and the live part alone at
//! `/ui/live` (what the page's script swaps in every few seconds). maud escapes every
//! value, so a job named `<script>` prints as text; no token is ever part of the data.

use super::chart::{LineChart, PALETTE, Series};
use super::view::{JobPhase, JobView, PageData};
use crate::admission::AdmissionReport;
use maud::{DOCTYPE, Markup, html};
use venn_core::RoundOutcome;

/// How often the script refreshes, milliseconds.
pub const REFRESH_MS: u32 = 2_000;

/// The whole page.
pub fn document(d: &PageData) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Venn manager · " (d.policy) }
                link rel="stylesheet" href="/ui/style.css";
                link rel="icon" href="/ui/icon.svg" type="image/svg+xml";
                script src="/ui/live.js" defer {}
            }
            body {
                header {
                    h1 { "Venn resource manager" }
                    p class="sub" {
                        "policy " strong { (d.policy) }
                        " · " span id="refresh-state" { "auto-refresh every " (REFRESH_MS / 1000) " s" }
                    }
                    noscript { p class="note" { "JavaScript is off: reload the page to see new rounds." } }
                }
                main id="live" data-src="/ui/live" data-every=(REFRESH_MS) { (live(d)) }
                footer { "JSON: " a href="/v1/status" { "/v1/status" } " · Prometheus: " a href="/metrics" { "/metrics" } }
            }
        }
    }
}

/// The part that refreshes.
pub fn live(d: &PageData) -> Markup {
    html! {
        p class="asof" data-now=(format!("{:.0}", d.now)) { "As of " (clock(d.now)) " UTC" }
        (summary(d))
        section id="jobs" {
            h2 { "Jobs" }
            @if d.jobs.is_empty() {
                p class="empty" { "No jobs yet. Register one with POST /v1/jobs (fl-job run CONFIG does)." }
            } @else {
                div class="scroll" { (jobs_table(d)) }
            }
        }
        section id="accuracy" {
            h2 { "Accuracy against time" }
            (accuracy_chart(d))
        }
        section id="groups" {
            h2 { "Device groups" }
            @if d.groups.is_empty() {
                p class="empty" { "No job groups: groups form as jobs register." }
            } @else {
                div class="scroll" { (groups_table(d)) }
                @if d.groups_hidden > 0 { p class="dim" { (d.groups_hidden) " more groups not shown" } }
            }
            h3 { "Venn cells" }
            @if d.cells.is_empty() {
                p class="empty" { "No Venn cells: they form once jobs have groups and devices check in." }
            } @else {
                div class="scroll" { (cells_table(d)) }
                @if d.cells_hidden > 0 { p class="dim" { (d.cells_hidden) " more cells not shown" } }
            }
        }
        section id="supply" {
            h2 { "Supply, last 24 h" }
            (supply_chart(d))
        }
        section id="rounds" {
            h2 { "Recent rounds" }
            @if d.rounds.is_empty() {
                p class="empty" { "No round has closed yet." }
            } @else {
                div class="scroll" { (rounds_table(d)) }
            }
        }
        @if let Some(a) = &d.admission {
            section id="admission" {
                h2 { "Admission control" }
                (admission_counters(a))
            }
        }
        section id="counters" {
            h2 { "Counters" }
            dl class="counters" {
                @for (k, v) in &d.counters { dt { (k.replace('_', " ")) } dd { (v) } }
            }
        }
    }
}

/// The headline numbers: live, waiting and ended jobs, and the last hour's check-ins.
fn summary(d: &PageData) -> Markup {
    let running = d.jobs.iter().filter(|j| j.group.is_some()).count();
    let ended = d.jobs.iter().filter(|j| j.state.ended()).count();
    let waiting = d
        .jobs
        .iter()
        .filter(|j| j.state == JobPhase::Waiting)
        .count();
    let last_hour: u64 = d
        .supply
        .iter()
        .filter(|(m, _)| (*m as f64) * 60.0 > d.now - 3600.0)
        .map(|(_, n)| n)
        .sum();
    html! {
        section class="summary" {
            div { b { (running) } span { "live jobs" } }
            div { b { (waiting) } span { "waiting for devices" } }
            div { b { (ended) } span { "ended" } }
            div { b { (last_hour) } span { "check-ins, last hour" } }
        }
    }
}

fn groups_table(d: &PageData) -> Markup {
    html! {
        table {
            thead { tr { th { "group" } th { "requirement" } th { "jobs" } th { "queue" } th class="num" { "devices wanted" } th class="num" { "supply / h" } } }
            tbody {
                @for g in &d.groups {
                    tr {
                        td { (g.id) }
                        td { (g.requirement) }
                        td { (ids(&g.members)) }
                        td { @if g.queue.is_empty() { span class="dim" { "empty" } } @else { (ids(&g.queue)) } }
                        td class="num" { (g.open_demand) }
                        td class="num" { (format!("{:.0}", g.supply_per_h)) }
                    }
                }
            }
        }
    }
}

fn cells_table(d: &PageData) -> Markup {
    html! {
        table {
            thead { tr { th { "eligible for groups" } th class="num" { "check-ins / h" } th { "owner (last plan)" } } }
            tbody {
                @for c in &d.cells {
                    tr {
                        td { @if c.groups.is_empty() { span class="dim" { "none" } } @else { (c.groups.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")) } }
                        td class="num" { (format!("{:.0}", c.per_h)) }
                        td { @match c.owner { Some(g) => { "group " (g) }, None => span class="dim" { "—" } } }
                    }
                }
            }
        }
    }
}

fn rounds_table(d: &PageData) -> Markup {
    html! {
        table {
            thead { tr { th { "closed" } th { "job" } th { "round" } th { "outcome" } th class="num" { "scheduling delay" } th class="num" { "collection" } th class="num" { "accuracy" } th class="num" { "participants" } } }
            tbody {
                @for (r, name) in &d.rounds {
                    @let fulfilled = r.scheduled_at.unwrap_or(r.closed_at);
                    tr {
                        td { (clock(r.closed_at)) }
                        td { (name) " " span class="dim" { "#" (r.job_id) } }
                        td { (r.round) @if r.attempt > 0 { span class="dim" { " (attempt " (r.attempt + 1) ")" } } }
                        td { @match r.outcome { RoundOutcome::Success => span class="ok" { "success" }, RoundOutcome::Abort => span class="bad" { "abort" } } }
                        td class="num" { (duration(fulfilled - r.submitted_at)) }
                        td class="num" { (duration(r.closed_at - fulfilled)) }
                        td class="num" { (pct_interval(r.metrics.accuracy, r.metrics.eval_samples)) }
                        td class="num" { @match r.metrics.participants { Some(p) => (p), None => "—" } }
                    }
                }
            }
        }
    }
}

fn admission_counters(a: &AdmissionReport) -> Markup {
    html! {
        dl class="counters" {
            dt { "forecast / slot" } dd { (format!("{:.0}", a.forecast_per_slot)) }
            dt { "this slot's check-ins" } dd { (a.slot_check_ins) }
            dt { "utilisation" } dd { (format!("{:.0} %", a.utilisation * 100.0)) }
            dt { "admitted / declined" } dd { (a.stats.admitted) " / " (a.stats.declined) }
            dt { "evicted" } dd { (a.stats.evicted) }
        }
    }
}

fn jobs_table(d: &PageData) -> Markup {
    let admission = d.admission.is_some();
    html! {
        table {
            thead {
                tr {
                    th { "job" } th { "state" } th { "group" } th class="num" { "rounds" }
                    th class="num" { "open round" } th class="num" { "scheduling delay" }
                    th class="num" { "collection" } th class="num" { "accuracy" }
                    @if admission { th { "admission plan" } }
                }
            }
            tbody {
                @for j in &d.jobs {
                    tr class=(state_class(j)) {
                        td { span class="swatch" style=(format!("background:{}", colour_of(d, j.id))) {} (j.name) " " span class="dim" { "#" (j.id) } }
                        td { (j.state.label()) }
                        td { @match j.group { Some(g) => (g), None => span class="dim" { "—" } } }
                        td class="num" {
                            (j.rounds_done) @if let Some(n) = j.rounds { " / " (n) }
                            @if j.aborts > 0 { span class="dim" { " (" (j.aborts) " aborted)" } }
                        }
                        td class="num" {
                            @match j.open {
                                Some((r, a, dmd, f, w)) => { "#" (r) ": " (a) "/" (dmd) " assigned, " (f) " done, " (duration(w)) }
                                None => span class="dim" { "—" }
                            }
                        }
                        td class="num" { (opt_duration(j.scheduling_delay_s)) }
                        td class="num" { (opt_duration(j.collection_s)) }
                        td class="num" { (pct_interval(j.metrics.and_then(|m| m.accuracy), j.metrics.and_then(|m| m.eval_samples))) }
                        @if admission {
                            td {
                                @match j.plan {
                                    Some(p) => { "launch " (clock(p.launch_at.secs())) ", price " (format!("{:.2}", p.expected_price)) ", value " (format!("{:.2}", p.expected_value)) }
                                    None => span class="dim" { "—" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn accuracy_chart(d: &PageData) -> Markup {
    let with_points = || d.jobs.iter().filter(|j| !j.points.is_empty());
    let t0 = d
        .jobs
        .iter()
        .map(|j| j.registered_at)
        .fold(f64::INFINITY, f64::min);
    let last = with_points()
        .flat_map(|j| j.points.iter().map(|p| p.at))
        .fold(t0, f64::max);
    if with_points().next().is_none() {
        return html! { p class="empty" { "No accuracy reported yet: jobs report it when they close a round (fl-job does)." } };
    }
    let unit = TimeUnit::for_span(last - t0);
    // Series go in job id order, so each line has its job's swatch colour
    // ([`colour_of`]).
    let series: Vec<Series> = with_points()
        .map(|j| Series {
            name: format!("{} #{}", j.name, j.id),
            points: j
                .points
                .iter()
                .map(|p| (unit.of(p.at - t0), p.accuracy * 100.0))
                .collect(),
            // The band covers the points whose sample count the job reported.
            band: j
                .points
                .iter()
                .filter_map(|p| {
                    let i = p.interval()?;
                    Some((unit.of(p.at - t0), i.lo * 100.0, i.hi * 100.0))
                })
                .collect(),
        })
        .collect();
    let x_label = format!("{} since the first job registered", unit.name);
    let x_fmt = |v: f64| format!("{v:.0}");
    let y_fmt = |v: f64| format!("{v:.0}");
    LineChart {
        title: "accuracy (%) against time since the first job registered",
        series,
        x_range: Some((0.0, unit.of(last - t0).max(1.0))),
        y_range: Some((0.0, 100.0)),
        x_label: &x_label,
        y_label: "accuracy %",
        x_fmt: &x_fmt,
        y_fmt: &y_fmt,
        area: false,
    }
    .render()
}

/// Seconds, minutes or hours, whichever reads best for a span.
struct TimeUnit {
    name: &'static str,
    seconds: f64,
}

impl TimeUnit {
    fn for_span(span_s: f64) -> TimeUnit {
        let (name, seconds) = if span_s <= 180.0 {
            ("seconds", 1.0)
        } else if span_s <= 3.0 * 3600.0 {
            ("minutes", 60.0)
        } else {
            ("hours", 3600.0)
        };
        TimeUnit { name, seconds }
    }

    fn of(&self, s: f64) -> f64 {
        s / self.seconds
    }
}

fn supply_chart(d: &PageData) -> Markup {
    let now_min = (d.now / 60.0).floor() as i64;
    // The running minute is still filling: leave it out once there is an earlier one.
    let minutes: Vec<(i64, u64)> = match d.supply.as_slice() {
        [.., (m, _)] if *m >= now_min && d.supply.len() > 1 => {
            d.supply[..d.supply.len() - 1].to_vec()
        }
        s => s.to_vec(),
    };
    let Some(first) = minutes.first().map(|m| m.0) else {
        return html! { p class="empty" { "No check-ins in the last 24 hours." } };
    };
    let span_s = (((now_min - first) as f64) * 60.0).clamp(600.0, 86_400.0);
    let unit = TimeUnit::for_span(span_s);
    let series = vec![Series {
        band: Vec::new(),
        name: "check-ins per minute".into(),
        points: minutes
            .iter()
            .map(|(m, n)| (unit.of((*m - now_min) as f64 * 60.0), *n as f64))
            .collect(),
    }];
    let x_label = format!("{} from now", unit.name);
    let x_fmt = |v: f64| format!("{v:.0}");
    let y_fmt = |v: f64| format!("{v:.0}");
    LineChart {
        title: "check-ins per minute over the last day",
        series,
        x_range: Some((-unit.of(span_s), 0.0)),
        y_range: None,
        x_label: &x_label,
        y_label: "check-ins / min",
        x_fmt: &x_fmt,
        y_fmt: &y_fmt,
        area: true,
    }
    .render()
}

/// The colour a job's line has in the accuracy chart (jobs with points, in id order).
fn colour_of(d: &PageData, id: u64) -> &'static str {
    match d
        .jobs
        .iter()
        .filter(|j| !j.points.is_empty())
        .position(|j| j.id == id)
    {
        Some(i) => PALETTE[i % PALETTE.len()],
        None => "transparent",
    }
}

fn state_class(j: &JobView) -> &'static str {
    match j.state {
        JobPhase::Finished => "ended ok",
        JobPhase::Cancelled | JobPhase::Evicted => "ended bad",
        JobPhase::Waiting => "waiting",
        _ => "live",
    }
}

fn ids(v: &[u64]) -> String {
    v.iter()
        .map(|j| format!("#{j}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `HH:MM:SS` of an epoch time, UTC.
pub fn clock(epoch_s: f64) -> String {
    let s = epoch_s.max(0.0) as u64 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A short duration: `850 ms`, `12.4 s`, `3 min 20 s`, `2 h 05 min`.
pub fn duration(s: f64) -> String {
    let s = s.max(0.0);
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{} min {:02} s", (s / 60.0) as u64, s as u64 % 60)
    } else {
        format!(
            "{} h {:02} min",
            (s / 3600.0) as u64,
            (s / 60.0) as u64 % 60
        )
    }
}

fn opt_duration(s: Option<f64>) -> String {
    s.map_or_else(|| "—".into(), duration)
}

fn opt_pct(a: Option<f64>) -> String {
    a.map_or_else(|| "—".into(), |a| format!("{:.1} %", a * 100.0))
}

/// An accuracy with the half width of its 95 % Wilson interval when the job said how
/// many samples it measured it on ("61.2 % ± 2.1").
fn pct_interval(a: Option<f64>, samples: Option<u32>) -> String {
    match (
        a,
        samples.and_then(|n| venn_core::stats::wilson(a?, u64::from(n))),
    ) {
        (Some(a), Some(i)) => format!("{:.1} % ± {:.1}", a * 100.0, i.half_width() * 100.0),
        _ => opt_pct(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_durations_read_well() {
        assert_eq!(clock(86_400.0 * 3.0 + 3_723.9), "01:02:03");
        assert_eq!(duration(0.25), "250 ms");
        assert_eq!(duration(12.44), "12.4 s");
        assert_eq!(duration(200.0), "3 min 20 s");
        assert_eq!(duration(7_500.0), "2 h 05 min");
    }
}
