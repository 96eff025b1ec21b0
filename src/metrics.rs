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
    pub fn render(&self, registry: &RegistryNumbers) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP skillhost_executions_total Component runs by runtime, status and error kind."
        );
        let _ = writeln!(out, "# TYPE skillhost_executions_total counter");
        for ((runtime, status, kind), n) in lock(&self.executions).iter() {
            let _ = writeln!(
                out,
                "skillhost_executions_total{{runtime=\"{}\",status=\"{}\",error_kind=\"{}\"}} {n}",
                label(runtime),
                label(status),
                label(kind)
            );
        }
        let _ = writeln!(
            out,
            "# HELP skillhost_execution_duration_seconds Wall-clock duration of component runs."
        );
        let _ = writeln!(out, "# TYPE skillhost_execution_duration_seconds histogram");
        for (runtime, histogram) in lock(&self.durations).iter() {
            for (bound, n) in BUCKETS.iter().zip(&histogram.counts) {
                let _ = writeln!(
                    out,
                    "skillhost_execution_duration_seconds_bucket{{runtime=\"{}\",le=\"{bound}\"}} {n}",
                    label(runtime)
                );
            }
            let _ = writeln!(
                out,
                "skillhost_execution_duration_seconds_bucket{{runtime=\"{}\",le=\"+Inf\"}} {}",
                label(runtime),
                histogram.count
            );
            let _ = writeln!(
                out,
                "skillhost_execution_duration_seconds_sum{{runtime=\"{}\"}} {}",
                label(runtime),
                histogram.sum
            );
            let _ = writeln!(
                out,
                "skillhost_execution_duration_seconds_count{{runtime=\"{}\"}} {}",
                label(runtime),
                histogram.count
            );
        }
        let rejected = lock(&self.rejected);
        let _ = writeln!(
            out,
            "# HELP skillhost_rejected_runs_total Runs refused before anything ran, by error kind."
        );
        let _ = writeln!(out, "# TYPE skillhost_rejected_runs_total counter");
        for (kind, n) in rejected.iter() {
            let _ = writeln!(
                out,
                "skillhost_rejected_runs_total{{error_kind=\"{}\"}} {n}",
                label(kind)
            );
        }
        let _ = writeln!(
            out,
            "# HELP skillhost_input_validation_errors_total Run inputs refused by their input schema or as malformed."
        );
        let _ = writeln!(
            out,
            "# TYPE skillhost_input_validation_errors_total counter"
        );
        let _ = writeln!(
            out,
            "skillhost_input_validation_errors_total {}",
            rejected
                .get(ErrorKind::InvalidInput.as_str())
                .copied()
                .unwrap_or(0)
        );
        drop(rejected);
        let _ = writeln!(
            out,
            "# HELP skillhost_limit_hits_total Runs stopped by a limit (timeout, fuel, memory, processes, output, slots)."
        );
        let _ = writeln!(out, "# TYPE skillhost_limit_hits_total counter");
        for kind in [ErrorKind::ExecutionTimeout, ErrorKind::ResourceExhausted] {
            let hits: u64 = lock(&self.executions)
                .iter()
                .filter(|((_, _, k), _)| k == kind.as_str())
                .map(|(_, n)| n)
                .sum();
            let _ = writeln!(
                out,
                "skillhost_limit_hits_total{{error_kind=\"{}\"}} {hits}",
                kind.as_str()
            );
        }
        let _ = writeln!(
            out,
            "# HELP skillhost_rate_limited_total HTTP requests refused by a token's rate limit."
        );
        let _ = writeln!(out, "# TYPE skillhost_rate_limited_total counter");
        let _ = writeln!(
            out,
            "skillhost_rate_limited_total {}",
            self.rate_limited.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP skillhost_http_requests_total HTTP requests by route and status code."
        );
        let _ = writeln!(out, "# TYPE skillhost_http_requests_total counter");
        for ((route, status), n) in lock(&self.http).iter() {
            let _ = writeln!(
                out,
                "skillhost_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                label(route)
            );
        }
        let _ = writeln!(
            out,
            "# HELP skillhost_registry_scans_total Registry scans by kind (full: stat every skill; reused: nothing changed)."
        );
        let _ = writeln!(out, "# TYPE skillhost_registry_scans_total counter");
        let _ = writeln!(
            out,
            "skillhost_registry_scans_total{{kind=\"full\"}} {}",
            registry.full_scans
        );
        let _ = writeln!(
            out,
            "skillhost_registry_scans_total{{kind=\"reused\"}} {}",
            registry.reused
        );
        let _ = writeln!(
            out,
            "# HELP skillhost_registry_scan_seconds_total Time spent in full registry scans."
        );
        let _ = writeln!(out, "# TYPE skillhost_registry_scan_seconds_total counter");
        let _ = writeln!(
            out,
            "skillhost_registry_scan_seconds_total {}",
            registry.scan_time.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "# HELP skillhost_skills Skills currently listed (enabled)."
        );
        let _ = writeln!(out, "# TYPE skillhost_skills gauge");
        let _ = writeln!(out, "skillhost_skills {}", registry.skills);
        out
    }
}

/// The registry's numbers for a metrics render.
#[derive(Debug, Clone, Copy, Default)]
pub struct RegistryNumbers {
    pub full_scans: u64,
    pub reused: u64,
    pub scan_time: Duration,
    pub skills: usize,
}
