//! Prometheus metrics: request counts, token counts, latency histograms and load gauges, kept
//! in atomics (no lock on the per-token path) and rendered as Prometheus text on `/metrics`.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Histogram with fixed upper bounds (seconds).
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
    total: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
            total: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, seconds: f64) {
        if let Some(i) = self.bounds.iter().position(|b| seconds <= *b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micros.fetch_add((seconds * 1e6) as u64, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        family(out, name, "histogram", help, &[]);
        let mut cum = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cum += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        let total = self.total.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {total}");
    }
}

/// One metric family in Prometheus text: its `HELP` and `TYPE` lines, then a line per sample
/// (`labels` in Prometheus' `{k="v"}` form, or empty).
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(&str, u64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

const TTFT_BOUNDS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
const ITL_BOUNDS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
const E2E_BOUNDS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// Tokens generated per second over the last [`Throughput::WINDOW`] whole seconds: the
/// `gen_throughput` routers read from `/v1/loads`. One slot per second in a ring of atomics; a
/// writer that finds a stale slot restarts it, so no lock is taken per token.
pub struct Throughput {
    start: std::time::Instant,
    slots: [(AtomicU64, AtomicU64); Throughput::SLOTS],
}

impl Throughput {
    const SLOTS: usize = 16;
    pub const WINDOW: u64 = 10;

    fn new() -> Self {
        Self {
            start: std::time::Instant::now(),
            slots: std::array::from_fn(|_| (AtomicU64::new(u64::MAX), AtomicU64::new(0))),
        }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_secs()
    }

    pub fn add(&self, tokens: u64) {
        let sec = self.now();
        let (stamp, count) = &self.slots[(sec % Self::SLOTS as u64) as usize];
        if stamp.swap(sec, Ordering::Relaxed) != sec {
            count.store(0, Ordering::Relaxed);
        }
        count.fetch_add(tokens, Ordering::Relaxed);
    }

    /// Mean tokens per second over the last `WINDOW` whole seconds.
    pub fn per_second(&self) -> f64 {
        let now = self.now();
        let from = now.saturating_sub(Self::WINDOW);
        let total: u64 = self
            .slots
            .iter()
            .filter(|(stamp, _)| {
                let s = stamp.load(Ordering::Relaxed);
                s != u64::MAX && s >= from && s < now
            })
            .map(|(_, c)| c.load(Ordering::Relaxed))
            .sum();
        total as f64 / Self::WINDOW.min(now.max(1)) as f64
    }
}

/// Server-wide metrics.
pub struct Metrics {
    pub requests_ok: AtomicU64,
    pub requests_err: AtomicU64,
    /// Requests whose client went away before they finished (not an error of the server's).
    pub requests_cancelled: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    pub cached_tokens: AtomicU64,
    pub running: AtomicU64,
    pub throughput: Throughput,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            requests_ok: AtomicU64::new(0),
            requests_err: AtomicU64::new(0),
            requests_cancelled: AtomicU64::new(0),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            cached_tokens: AtomicU64::new(0),
            running: AtomicU64::new(0),
            throughput: Throughput::new(),
            ttft: Histogram::new(TTFT_BOUNDS),
            itl: Histogram::new(ITL_BOUNDS),
            e2e: Histogram::new(E2E_BOUNDS),
        }
    }
}

impl Metrics {
    /// Prometheus text exposition. `labels` go on the `smgpy_info` gauge (model, worker id), so
    /// series of several workers behind one router can be told apart.
    pub fn render(&self, waiting: Option<u64>, labels: &[(&str, &str)]) -> String {
        let mut out = String::with_capacity(4096);
        let shown: Vec<String> = labels
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}=\"{}\"",
                    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
                )
            })
            .collect();
        let info = format!("{{{}}}", shown.join(","));
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        family(
            &mut out,
            "smgpy_info",
            "gauge",
            "The served model and this worker's id.",
            &[(&info, 1)],
        );
        family(
            &mut out,
            "smgpy_requests_total",
            "counter",
            "Finished generation requests by outcome.",
            &[
                ("{outcome=\"ok\"}", load(&self.requests_ok)),
                ("{outcome=\"error\"}", load(&self.requests_err)),
                ("{outcome=\"cancelled\"}", load(&self.requests_cancelled)),
            ],
        );
        let counters = [
            (
                "smgpy_prompt_tokens_total",
                "Prompt tokens processed.",
                &self.prompt_tokens,
            ),
            (
                "smgpy_generation_tokens_total",
                "Tokens generated.",
                &self.generation_tokens,
            ),
            (
                "smgpy_cached_prompt_tokens_total",
                "Prompt tokens served from the prefix cache.",
                &self.cached_tokens,
            ),
        ];
        for (name, help, v) in counters {
            family(&mut out, name, "counter", help, &[("", load(v))]);
        }
        family(
            &mut out,
            "smgpy_num_requests_running",
            "gauge",
            "Requests being generated.",
            &[("", load(&self.running))],
        );
        family(
            &mut out,
            "smgpy_structured_check_cache_bytes",
            "gauge",
            "Bytes held by the structured-output check cache.",
            &[("", smgpy_structured::check::cache_bytes() as u64)],
        );
        if let Some(w) = waiting {
            family(
                &mut out,
                "smgpy_num_requests_waiting",
                "gauge",
                "Requests queued in the engine.",
                &[("", w)],
            );
        }
        self.ttft
            .render(&mut out, "smgpy_time_to_first_token_seconds", "Time to first token.");
        self.itl.render(
            &mut out,
            "smgpy_inter_token_latency_seconds",
            "Time between streamed tokens.",
        );
        self.e2e
            .render(&mut out, "smgpy_e2e_request_latency_seconds", "Whole-request latency.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_writes_each_family_with_its_help_and_type() {
        let m = Metrics::default();
        m.requests_ok.store(3, Ordering::Relaxed);
        m.requests_cancelled.store(1, Ordering::Relaxed);
        m.generation_tokens.store(42, Ordering::Relaxed);
        let text = m.render(Some(2), &[("model", "a\"b")]);
        let head = "\
# HELP smgpy_info The served model and this worker's id.
# TYPE smgpy_info gauge
smgpy_info{model=\"a\\\"b\"} 1
# HELP smgpy_requests_total Finished generation requests by outcome.
# TYPE smgpy_requests_total counter
smgpy_requests_total{outcome=\"ok\"} 3
smgpy_requests_total{outcome=\"error\"} 0
smgpy_requests_total{outcome=\"cancelled\"} 1
# HELP smgpy_prompt_tokens_total Prompt tokens processed.
# TYPE smgpy_prompt_tokens_total counter
smgpy_prompt_tokens_total 0
# HELP smgpy_generation_tokens_total Tokens generated.
# TYPE smgpy_generation_tokens_total counter
smgpy_generation_tokens_total 42
# HELP smgpy_cached_prompt_tokens_total Prompt tokens served from the prefix cache.
# TYPE smgpy_cached_prompt_tokens_total counter
smgpy_cached_prompt_tokens_total 0
# HELP smgpy_num_requests_running Requests being generated.
# TYPE smgpy_num_requests_running gauge
smgpy_num_requests_running 0
# HELP smgpy_structured_check_cache_bytes Bytes held by the structured-output check cache.
# TYPE smgpy_structured_check_cache_bytes gauge
smgpy_structured_check_cache_bytes ";
        assert!(text.starts_with(head), "{text}");
        let rest = text[head.len()..].split_once('\n').map(|(_, r)| r).unwrap();
        assert!(
            rest.starts_with(
                "\
# HELP smgpy_num_requests_waiting Requests queued in the engine.
# TYPE smgpy_num_requests_waiting gauge
smgpy_num_requests_waiting 2
# HELP smgpy_time_to_first_token_seconds Time to first token.
# TYPE smgpy_time_to_first_token_seconds histogram
smgpy_time_to_first_token_seconds_bucket{le=\"0.01\"} 0
"
            ),
            "{rest}"
        );
    }
}
