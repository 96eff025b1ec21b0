//! A bounded local load on `skillhost serve --http`: N concurrent clients
//! (default 64) call `skill_run` on a trivial WebAssembly component (echo)
//! for a fixed time (default 10 s) on loopback, first through the REST route,
//! then through MCP streamable HTTP (one session per client). Reports
//! throughput, p50/p99 latency, errors and the server's RSS (idle, peak,
//! after); exits non-zero on any error.
//!
//! Run with `cargo bench --bench http_load`. Tune with the environment:
//! `SKILLHOST_LOAD_CLIENTS`, `SKILLHOST_LOAD_SECONDS`, `SKILLHOST_LOAD_MCP=0`
//! (REST only).

#[path = "../tests/common/guests.rs"]
mod guests;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

const TOKEN: &str = "load-benchmark-token-0123456789";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The server process; killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Resident set size in KiB (`VmRSS`) and its peak (`VmHWM`).
    fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

fn start(root: &std::path::Path) -> Server {
    let workspace = root.join("ws");
    let skill = workspace.join(".agents/skills/bench");
    std::fs::create_dir_all(skill.join("components")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: bench\ndescription: Load benchmark\n---\nBody\n",
    )
    .unwrap();
    std::fs::copy(guests::guest("echo"), skill.join("components/echo.wasm")).unwrap();
    let tokens = root.join("tokens.json");
    std::fs::write(
        &tokens,
        json!({"tokens": [{"name": "load", "token": TOKEN,
            "scopes": ["read", "execute"], "rate_per_minute": 100_000_000u64}]})
        .to_string(),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skillhost"))
        .args(["serve", "--http", "127.0.0.1:0", "--workspace"])
        .arg(&workspace)
        .arg("--state-dir")
        .arg(root.join("state"))
        .arg("--tokens")
        .arg(&tokens)
        .env("XDG_CONFIG_HOME", root.join("xdg"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skillhost");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server exited before listening")
            .unwrap();
        if let Some(at) = line.find("addr=") {
            break line[at + 5..]
                .split_whitespace()
                .next()
                .unwrap()
                .to_string();
        }
    };
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Server { child, addr }
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
    fn error(&mut self, what: String) {
        self.errors += 1;
        self.first_error.get_or_insert(what);
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank] as f64 / 1000.0
}

/// Sample the server's RSS every 100 ms while `running`; return the peak.
fn watch_rss(server: &Server, running: &AtomicBool) -> u64 {
    let mut peak = 0;
    while running.load(Ordering::Relaxed) {
        peak = peak.max(server.rss_kib().0);
        std::thread::sleep(Duration::from_millis(100));
    }
    peak
}

fn report(label: &str, mut tally: Tally, elapsed: Duration, clients: u64) -> bool {
    tally.latencies_us.sort_unstable();
    let n = tally.latencies_us.len();
    println!(
        "{label}: {clients} clients, {:.1} s: {n} runs ok, {:.0} runs/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, errors {}",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64(),
        percentile(&tally.latencies_us, 0.50),
        percentile(&tally.latencies_us, 0.99),
        percentile(&tally.latencies_us, 1.0),
        tally.errors,
    );
    if let Some(first) = &tally.first_error {
        println!("{label}: first error: {first}");
    }
    tally.errors == 0 && n > 0
}

async fn rest_client(addr: String, until: Instant, seq: Arc<AtomicU64>) -> Tally {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/tools/skill_run");
    let mut tally = Tally::default();
    while Instant::now() < until {
        let n = seq.fetch_add(1, Ordering::Relaxed);
        let body = json!({"name": "bench", "component": "echo", "input": {"n": n}});
        let started = Instant::now();
        let reply = client
            .post(&url)
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await;
        let outcome = match reply {
            Ok(response) if response.status().is_success() => response.json::<Value>().await,
            Ok(response) => {
                tally.error(format!("HTTP {}", response.status()));
                continue;
            }
            Err(e) => {
                tally.error(e.to_string());
                continue;
            }
        };
        match outcome {
            Ok(envelope) if envelope["data"]["output_data"]["n"] == n => tally
                .latencies_us
                .push(started.elapsed().as_micros() as u64),
            Ok(envelope) => tally.error(format!("unexpected envelope: {envelope}")),
            Err(e) => tally.error(e.to_string()),
        }
    }
    tally
}

async fn mcp_client(addr: String, until: Instant, seq: Arc<AtomicU64>) -> Tally {
    let mut tally = Tally::default();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp"))
        .auth_header(TOKEN);
    let client = match ().serve(StreamableHttpClientTransport::from_config(config)).await {
        Ok(client) => client,
        Err(e) => {
            tally.error(format!("initialize: {e}"));
            return tally;
        }
    };
    while Instant::now() < until {
        let n = seq.fetch_add(1, Ordering::Relaxed);
        let Value::Object(args) = json!({"name": "bench", "component": "echo", "input": {"n": n}})
        else {
            unreachable!()
        };
        let started = Instant::now();
        match client
            .call_tool(CallToolRequestParams::new("skill_run").with_arguments(args))
            .await
        {
            Ok(result)
                if result.is_error != Some(true)
                    && result
                        .structured_content
                        .as_ref()
                        .is_some_and(|e| e["data"]["output_data"]["n"] == n) =>
            {
                tally
                    .latencies_us
                    .push(started.elapsed().as_micros() as u64)
            }
            Ok(result) => tally.error(format!("{result:?}")),
            Err(e) => tally.error(e.to_string()),
        }
    }
    let _ = client.cancel().await;
    tally
}

fn phase<F, Fut>(
    label: &str,
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    clients: u64,
    seconds: u64,
    client: F,
) -> bool
where
    F: Fn(String, Instant, Arc<AtomicU64>) -> Fut,
    Fut: std::future::Future<Output = Tally> + Send + 'static,
{
    let seq = Arc::new(AtomicU64::new(0));
    let running = AtomicBool::new(true);
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let (tally, peak) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| watch_rss(server, &running));
        let tally = runtime.block_on(async {
            let tasks: Vec<_> = (0..clients)
                .map(|_| tokio::spawn(client(server.addr.clone(), until, Arc::clone(&seq))))
                .collect();
            let mut all = Tally::default();
            for task in tasks {
                all.merge(task.await.expect("client task"));
            }
            all
        });
        running.store(false, Ordering::Relaxed);
        (tally, watcher.join().unwrap())
    });
    let elapsed = started.elapsed();
    let ok = report(label, tally, elapsed, clients);
    let (after, _) = server.rss_kib();
    println!(
        "{label}: server RSS peak during load {:.1} MiB, after {:.1} MiB",
        peak as f64 / 1024.0,
        after as f64 / 1024.0
    );
    ok
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // useful either way. Only run the load when invoked as a benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        println!("http_load: run with `cargo bench --bench http_load`");
        return;
    }
    let clients = env_number("SKILLHOST_LOAD_CLIENTS", 64);
    let seconds = env_number("SKILLHOST_LOAD_SECONDS", 10);
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Warm up: the first run compiles the component and fills the caches.
    runtime.block_on(async {
        let warm = rest_client(
            server.addr.clone(),
            Instant::now() + Duration::from_millis(500),
            Arc::new(AtomicU64::new(0)),
        )
        .await;
        assert_eq!(warm.errors, 0, "warm-up failed: {:?}", warm.first_error);
    });
    let (idle, _) = server.rss_kib();
    println!("server RSS after warm-up {:.1} MiB", idle as f64 / 1024.0);
    let mut ok = phase(
        "REST /tools/skill_run",
        &runtime,
        &server,
        clients,
        seconds,
        rest_client,
    );
    if std::env::var("SKILLHOST_LOAD_MCP").as_deref() != Ok("0") {
        ok &= phase(
            "MCP /mcp tools/call",
            &runtime,
            &server,
            clients,
            seconds,
            mcp_client,
        );
    }
    let (_, hwm) = server.rss_kib();
    println!("server RSS high-water mark {:.1} MiB", hwm as f64 / 1024.0);
    if !ok {
        eprintln!("http_load: errors under load");
        std::process::exit(1);
    }
}
