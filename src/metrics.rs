//! Counters the host keeps about itself, rendered in the Prometheus text
//! format by the HTTP face (`/metrics`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::ErrorKind;
use crate::exec::{Execution, Status};

/// Upper bounds (seconds) of the run-duration histogram buckets.
const BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0];

#[derive(Debug, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                self.counts[i] += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    /// (runtime, status, error kind or "") -> runs.
    executions: Mutex<BTreeMap<(String, String, String), u64>>,
    durations: Mutex<BTreeMap<String, Histogram>>,
    /// Requests refused before anything ran, by error kind.
    rejected: Mutex<BTreeMap<String, u64>>,
    /// (route, status code) -> requests (HTTP face).
    http: Mutex<BTreeMap<(String, u16), u64>>,
    rate_limited: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// A finished run.
    pub fn record_run(&self, run: &Execution) {
        let runtime = format!("{:?}", run.runtime).to_lowercase();
        let status = match run.status {
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        };
        let kind = run.error_kind.map(|k| k.as_str()).unwrap_or("").to_string();
        *lock(&self.executions)
            .entry((runtime.clone(), status.to_string(), kind))
            .or_default() += 1;
        lock(&self.durations)
            .entry(runtime)
            .or_default()
            .observe(run.duration_ms / 1000.0);
    }

    /// A run refused before anything ran.
    pub fn record_rejected(&self, kind: ErrorKind) {
        *lock(&self.rejected)
            .entry(kind.as_str().to_string())
            .or_default() += 1;
    }

    /// An HTTP request and its status code.
    pub fn record_http(&self, route: &str, status: u16) {
        *lock(&self.http)
            .entry((route.to_string(), status))
            .or_default() += 1;
    }

    pub fn record_rate_limited(&self) {
        self.rate_limited.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition, with the registry's numbers given.
    pub fn render(&self, now: &Snapshot) -> String {
        let mut out = Exposition::default();
        out.family(
            "skillhost_executions_total",
            "counter",
            "Component runs by runtime, status and error kind.",
        );
        let executions = lock(&self.executions).clone();
        for ((runtime, status, kind), n) in &executions {
            out.sample(
                "skillhost_executions_total",
                &[
                    ("runtime", runtime),
                    ("status", status),
                    ("error_kind", kind),
                ],
                n,
            );
        }
        out.family(
            "skillhost_execution_duration_seconds",
            "histogram",
            "Wall-clock duration of component runs.",
        );
        for (runtime, histogram) in lock(&self.durations).iter() {
            let name = "skillhost_execution_duration_seconds";
            for (bound, n) in BUCKETS.iter().zip(&histogram.counts) {
                let bound = bound.to_string();
                out.sample(
                    &format!("{name}_bucket"),
                    &[("runtime", runtime), ("le", &bound)],
                    n,
                );
            }
            let runtime: &[(&str, &str)] = &[("runtime", runtime)];
            out.sample(
                &format!("{name}_bucket"),
                &[runtime[0], ("le", "+Inf")],
                histogram.count,
            );
            out.sample(&format!("{name}_sum"), runtime, histogram.sum);
            out.sample(&format!("{name}_count"), runtime, histogram.count);
        }
        let rejected = lock(&self.rejected).clone();
        out.family(
            "skillhost_rejected_runs_total",
            "counter",
            "Runs refused before anything ran, by error kind.",
        );
        for (kind, n) in &rejected {
            out.sample("skillhost_rejected_runs_total", &[("error_kind", kind)], n);
        }
        let refused = |kind: ErrorKind| rejected.get(kind.as_str()).copied().unwrap_or(0);
        out.family(
            "skillhost_input_validation_errors_total",
            "counter",
            "Run inputs refused by their input schema or as malformed.",
        );
        out.sample(
            "skillhost_input_validation_errors_total",
            &[],
            refused(ErrorKind::InvalidInput),
        );
        out.family(
            "skillhost_limit_hits_total",
            "counter",
            "Runs stopped by a limit (timeout, fuel, memory, processes, output) or refused for a full run queue.",
        );
        for kind in [ErrorKind::ExecutionTimeout, ErrorKind::ResourceExhausted] {
            let stopped: u64 = executions
                .iter()
                .filter(|((_, _, k), _)| k == kind.as_str())
                .map(|(_, n)| n)
                .sum();
            out.sample(
                "skillhost_limit_hits_total",
                &[("error_kind", kind.as_str())],
                stopped + refused(kind),
            );
        }
        out.family(
            "skillhost_rate_limited_total",
            "counter",
            "HTTP requests refused by a token's rate limit.",
        );
        out.sample(
            "skillhost_rate_limited_total",
            &[],
            self.rate_limited.load(Ordering::Relaxed),
        );
        out.family(
            "skillhost_http_requests_total",
            "counter",
            "HTTP requests by route and status code.",
        );
        for ((route, status), n) in lock(&self.http).iter() {
            let status = status.to_string();
            out.sample(
                "skillhost_http_requests_total",
                &[("route", route), ("status", &status)],
                n,
            );
        }
        out.family(
            "skillhost_registry_scans_total",
            "counter",
            "Registry scans by kind (full: stat every skill; reused: nothing changed).",
        );
        let scans = "skillhost_registry_scans_total";
        out.sample(scans, &[("kind", "full")], now.full_scans);
        out.sample(scans, &[("kind", "reused")], now.reused);
        out.family(
            "skillhost_registry_scan_seconds_total",
            "counter",
            "Time spent in full registry scans.",
        );
        out.sample(
            "skillhost_registry_scan_seconds_total",
            &[],
            now.scan_time.as_secs_f64(),
        );
        out.family(
            "skillhost_skills",
            "gauge",
            "Skills currently listed (enabled).",
        );
        out.sample("skillhost_skills", &[], now.skills);
        out.family(
            "skillhost_runs_executing",
            "gauge",
            "Runs executing now (at most --max-concurrent-runs).",
        );
        out.sample("skillhost_runs_executing", &[], now.runs_executing);
        out.family(
            "skillhost_runs_waiting",
            "gauge",
            "Runs waiting for a slot (at most --max-waiting-runs).",
        );
        out.sample("skillhost_runs_waiting", &[], now.runs_waiting);
        out.0
    }
}

/// Prometheus text being written.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
                .collect();
            let _ = write!(self.0, "{{{}}}", pairs.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// Numbers the host reads at render time: the registry's and the run slots'.
#[derive(Debug, Clone, Copy, Default)]
pub struct Snapshot {
    pub full_scans: u64,
    pub reused: u64,
    pub scan_time: Duration,
    pub skills: usize,
    pub runs_executing: usize,
    pub runs_waiting: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_families_typed() {
        let metrics = Metrics::default();
        metrics.record_http("/a\"b\\c\nd", 200);
        metrics.record_rejected(ErrorKind::InvalidInput);
        let text = metrics.render(&Snapshot {
            full_scans: 2,
            reused: 5,
            scan_time: Duration::from_millis(1500),
            skills: 3,
            runs_executing: 2,
            runs_waiting: 1,
        });
        assert!(
            text.contains(r#"skillhost_http_requests_total{route="/a\"b\\c\nd",status="200"} 1"#),
            "{text}"
        );
        assert!(text.contains("skillhost_input_validation_errors_total 1\n"));
        assert!(text.contains("skillhost_registry_scans_total{kind=\"reused\"} 5\n"));
        assert!(text.contains("skillhost_registry_scan_seconds_total 1.5\n"));
        assert!(text.contains("# TYPE skillhost_skills gauge\nskillhost_skills 3\n"));
        assert!(text.contains("skillhost_runs_executing 2\n"));
        assert!(text.contains("skillhost_runs_waiting 1\n"));
        // Every sample line belongs to a family declared just before it.
        let mut family = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap().to_string();
            } else if !line.starts_with('#') {
                assert!(line.starts_with(&family), "{line} outside {family}");
            }
        }
    }
}
