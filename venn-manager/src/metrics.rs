//! Prometheus metrics kept outside the state lock: counters and a decision-latency
//! histogram, rendered in the text exposition format by hand (no extra dependency).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Upper bounds (seconds) of the decision-latency histogram buckets.
const LATENCY_BOUNDS: [f64; 10] = [1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 1e-3, 1e-2, 1e-1];

/// A gauge to render: name, help text, and (label set, value) pairs.
pub type Gauge<'a> = (&'a str, &'a str, Vec<(String, f64)>);

/// Counters and the latency histogram.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Check-ins received.
    pub checkins: AtomicU64,
    /// Devices assigned.
    pub assignments: AtomicU64,
    /// Tasks reported finished.
    pub tasks_finished: AtomicU64,
    /// Tasks reported failed.
    pub tasks_failed: AtomicU64,
    /// Tasks whose lease ran out.
    pub tasks_expired: AtomicU64,
    /// Rounds closed as success.
    pub rounds_success: AtomicU64,
    /// Rounds closed as abort (by the job, or by the core's round timer in the sweep).
    pub rounds_abort: AtomicU64,
    /// Connections closed at accept because the server was at its connection limit.
    pub connections_refused: AtomicU64,
    /// Requests answered 429: their source was over its rate.
    pub rate_limited: AtomicU64,
    latency_buckets: [AtomicU64; LATENCY_BOUNDS.len() + 1],
    latency_sum_ns: AtomicU64,
}

impl Metrics {
    /// Records one scheduling decision's latency.
    pub fn observe_decision(&self, secs: f64) {
        let i = LATENCY_BOUNDS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(LATENCY_BOUNDS.len());
        self.latency_buckets[i].fetch_add(1, Relaxed);
        self.latency_sum_ns.fetch_add((secs * 1e9) as u64, Relaxed);
    }

    /// Renders the metrics plus the given gauges (name, help, labelled values).
    pub fn render(&self, gauges: &[Gauge<'_>]) -> String {
        self.render_with(&[], gauges)
    }

    /// Renders the metrics plus more counters and gauges (name, help, labelled values).
    pub fn render_with(&self, more_counters: &[Gauge<'_>], gauges: &[Gauge<'_>]) -> String {
        let mut out = String::new();
        let counters = [
            (
                "venn_checkins_total",
                "Device check-ins received.",
                &self.checkins,
            ),
            (
                "venn_assignments_total",
                "Devices assigned to jobs.",
                &self.assignments,
            ),
            (
                "venn_connections_refused_total",
                "Connections closed at accept: the server, or the source address, was at its connection limit.",
                &self.connections_refused,
            ),
            (
                "venn_rate_limited_total",
                "Requests answered 429: their source address was over its rate.",
                &self.rate_limited,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP venn_tasks_total Tasks by final state.\n# TYPE venn_tasks_total counter"
        );
        for (state, v) in [
            ("finished", &self.tasks_finished),
            ("failed", &self.tasks_failed),
            ("expired", &self.tasks_expired),
        ] {
            let _ = writeln!(
                out,
                "venn_tasks_total{{state=\"{state}\"}} {}",
                v.load(Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP venn_rounds_closed_total Rounds closed by outcome.\n# TYPE venn_rounds_closed_total counter"
        );
        for (o, v) in [
            ("success", &self.rounds_success),
            ("abort", &self.rounds_abort),
        ] {
            let _ = writeln!(
                out,
                "venn_rounds_closed_total{{outcome=\"{o}\"}} {}",
                v.load(Relaxed)
            );
        }
        let name = "venn_decision_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time the core took to decide one check-in.\n# TYPE {name} histogram"
        );
        let mut cum = 0;
        for (i, b) in LATENCY_BOUNDS.iter().enumerate() {
            cum += self.latency_buckets[i].load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        cum += self.latency_buckets[LATENCY_BOUNDS.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cum}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.latency_sum_ns.load(Relaxed) as f64 / 1e9
        );
        let _ = writeln!(out, "{name}_count {cum}");
        for (kind, list) in [("counter", more_counters), ("gauge", gauges)] {
            for (name, help, values) in list {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
                for (labels, v) in values {
                    let _ = writeln!(out, "{name}{labels} {v}");
                }
            }
        }
        out
    }
}
