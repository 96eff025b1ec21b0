//! Limits of `serve --http`: the bounded queue of runs, cancellation when a
//! REST client goes away, metrics that count what happened, and a graceful
//! shutdown that lets running executions finish up to the grace.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::Fixture;
use common::http::*;
use common::skills::yaml_skill;
use serde_json::{Value, json};

const MANIFEST: &str = "components:
  - {name: wc, type: wasm, path: components/word-count.wasm,
     input_schema: {type: object, properties: {text: {type: string}}, required: [text]}}
  - {name: spin-3s, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 3000}}
  - {name: spin-long, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 30000}}
";

fn fixture() -> Fixture {
    let fx = Fixture::new();
    yaml_skill(&fx, "demo", MANIFEST);
    fx
}

fn run_body(component: &str, input: Value) -> Value {
    json!({"name": "demo", "component": component, "input": input})
}

/// POST a run on another thread.
fn spawn_run(url: String, component: &str, input: Value) -> thread::JoinHandle<(u16, Value)> {
    let body = run_body(component, input);
    thread::spawn(move || reply(client().post(url).json(&body).send().unwrap()))
}

/// Wait until the server reports `executing` and `waiting` runs.
fn await_gauges(server: &Server, executing: u32, waiting: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = parse_prometheus(&get_text(server, "/metrics", None).1);
        let now = (
            sample(&m, "skillhost_runs_executing", &[]),
            sample(&m, "skillhost_runs_waiting", &[]),
        );
        if now == (f64::from(executing), f64::from(waiting)) {
            return;
        }
        assert!(Instant::now() < deadline, "gauges stuck at {now:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_full_queue_is_refused_and_the_metrics_count_it() {
    let fx = fixture();
    let server = Server::start(
        &fx,
        &["--max-concurrent-runs", "1", "--max-waiting-runs", "1"],
    );
    let url = server.url("/tools/skill_run");
    // Compile word-count first, so the run that waits below queues at once.
    let warm = post(
        &server,
        "/tools/skill_run",
        None,
        run_body("wc", json!({"text": "warm"})),
    );
    assert_eq!(warm.0, 200);
    // One run holds the only slot for 3 s, one waits for it, the third is refused.
    let holder = spawn_run(url.clone(), "spin-3s", json!({}));
    await_gauges(&server, 1, 0);
    let waiter = spawn_run(url.clone(), "wc", json!({"text": "after the wait"}));
    await_gauges(&server, 1, 1);
    let started = Instant::now();
    let (status, refused) = post(
        &server,
        "/tools/skill_run",
        None,
        run_body("wc", json!({"text": "x"})),
    );
    assert_eq!(
        (status, kind(&refused)),
        (429, "RESOURCE_EXHAUSTED"),
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-waiting-runs"),
        "{refused}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "refused at once"
    );

    let (status, held) = holder.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(held["data"]["error_kind"], "EXECUTION_TIMEOUT", "{held}");
    let (status, waited) = waiter.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(waited["data"]["status"], "succeeded", "{waited}");
    assert_eq!(waited["data"]["output_data"]["words"], 3);

    // An input that fails its schema, and a skill that does not exist.
    let (status, invalid) = post(
        &server,
        "/tools/skill_run",
        None,
        run_body("wc", json!({"txt": 1})),
    );
    assert_eq!((status, kind(&invalid)), (400, "INVALID_INPUT"));
    let (status, _) = post(
        &server,
        "/tools/skill_run",
        None,
        json!({"name": "ghost", "component": "wc", "input": {}}),
    );
    assert_eq!(status, 404);

    let (status, text) = get_text(&server, "/metrics", None);
    assert_eq!(status, 200);
    let m = parse_prometheus(&text);
    let wasi_ok = [("runtime", "wasi"), ("status", "succeeded")];
    assert_eq!(
        sample(&m, "skillhost_executions_total", &wasi_ok),
        2.0,
        "{text}"
    );
    let timeout = [("runtime", "wasi"), ("error_kind", "EXECUTION_TIMEOUT")];
    assert_eq!(sample(&m, "skillhost_executions_total", &timeout), 1.0);
    let exhausted = [("error_kind", "RESOURCE_EXHAUSTED")];
    assert_eq!(sample(&m, "skillhost_rejected_runs_total", &exhausted), 1.0);
    let (not_found, invalid) = (
        [("error_kind", "SKILL_NOT_FOUND")],
        [("error_kind", "INVALID_INPUT")],
    );
    assert_eq!(sample(&m, "skillhost_rejected_runs_total", &not_found), 1.0);
    assert_eq!(sample(&m, "skillhost_rejected_runs_total", &invalid), 1.0);
    assert_eq!(
        sample(&m, "skillhost_input_validation_errors_total", &[]),
        1.0
    );
    let timeout_hits = [("error_kind", "EXECUTION_TIMEOUT")];
    assert_eq!(sample(&m, "skillhost_limit_hits_total", &timeout_hits), 1.0);
    // The refusal for a full queue is a limit hit too.
    assert_eq!(sample(&m, "skillhost_limit_hits_total", &exhausted), 1.0);
    // Three runs executed: the histogram counts them all.
    let wasi = [("runtime", "wasi")];
    assert_eq!(
        sample(&m, "skillhost_execution_duration_seconds_count", &wasi),
        3.0
    );
    let sum = sample(&m, "skillhost_execution_duration_seconds_sum", &wasi);
    assert!((3.0..20.0).contains(&sum), "{sum}");
    let inf = [("runtime", "wasi"), ("le", "+Inf")];
    assert_eq!(
        sample(&m, "skillhost_execution_duration_seconds_bucket", &inf),
        3.0
    );
    let route = |code: &str| {
        sample(
            &m,
            "skillhost_http_requests_total",
            &[("route", "/tools/skill_run"), ("status", code)],
        )
    };
    assert_eq!(
        (route("200"), route("429"), route("400"), route("404")),
        (3.0, 1.0, 1.0, 1.0)
    );
    assert_eq!(sample(&m, "skillhost_skills", &[]), 1.0);
    assert!(sample(&m, "skillhost_registry_scans_total", &[("kind", "full")]) >= 1.0);
    assert!(text.contains("# TYPE skillhost_registry_scan_seconds_total counter"));
}

#[test]
fn a_rest_client_that_goes_away_cancels_its_run() {
    let fx = fixture();
    let server = Server::start(&fx, &["--max-concurrent-runs", "1"]);
    let impatient = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(700))
        .build()
        .unwrap();
    let gone = impatient
        .post(server.url("/tools/skill_run"))
        .json(&run_body("spin-long", json!({})))
        .send();
    assert!(gone.is_err(), "the 30 s run cannot answer within 700 ms");
    // The only slot is free again: the abandoned 30 s loop was stopped.
    let started = Instant::now();
    let (status, after) = post(
        &server,
        "/tools/skill_run",
        None,
        run_body("wc", json!({"text": "free"})),
    );
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["data"]["status"], "succeeded");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let m = parse_prometheus(&get_text(&server, "/metrics", None).1);
    assert_eq!(
        sample(&m, "skillhost_executions_total", &[("status", "cancelled")]),
        1.0
    );
}

#[test]
fn shutdown_lets_running_executions_finish_within_the_grace() {
    let fx = fixture();
    let mut server = Server::start(&fx, &["--shutdown-grace-seconds", "20"]);
    let running = spawn_run(server.url("/tools/skill_run"), "spin-3s", json!({}));
    // A client that connected and said nothing does not hold the shutdown up.
    let _silent = std::net::TcpStream::connect(&server.addr).unwrap();
    thread::sleep(Duration::from_millis(500));
    server.terminate();
    // The run in flight still gets its whole answer.
    let (status, finished) = running.join().unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        finished["data"]["error_kind"], "EXECUTION_TIMEOUT",
        "{finished}"
    );
    let exit = server
        .wait(Duration::from_secs(10))
        .expect("the server exits after the run");
    assert!(exit.success(), "{exit:?}");
    assert!(server.log().contains("shutting down"), "{}", server.log());
}

#[test]
fn shutdown_stops_waiting_after_the_grace() {
    let fx = fixture();
    let mut server = Server::start(&fx, &["--shutdown-grace-seconds", "1"]);
    let _abandoned = spawn_run(server.url("/tools/skill_run"), "spin-long", json!({}));
    thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    server.terminate();
    let exit = server.wait(Duration::from_secs(15));
    assert!(
        exit.is_some(),
        "still running 15 s after SIGTERM with a 1 s grace"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(server.log().contains("grace"), "{}", server.log());
}

/// How long until the server closes `stream` after `send`, and what it said.
fn closed_after(stream: &mut std::net::TcpStream, send: &[u8]) -> (Duration, String) {
    use std::io::{Read, Write};
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(send).unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    (
        started.elapsed(),
        String::from_utf8_lossy(&answer).into_owned(),
    )
}

fn about_one_second(waited: Duration) -> bool {
    waited >= Duration::from_millis(800) && waited < Duration::from_secs(5)
}

#[test]
fn slow_headers_and_idle_connections_are_cut_off() {
    let fx = fixture();
    let server = Server::start(&fx, &["--header-read-timeout-seconds", "1"]);
    let connect = || std::net::TcpStream::connect(&server.addr).unwrap();
    // Headers trickled in and never finished.
    let (waited, answer) = closed_after(&mut connect(), b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
    assert!(about_one_second(waited), "{waited:?}");
    assert!(!answer.contains("200 OK"), "{answer}");
    // A client that connects and says nothing.
    let (waited, answer) = closed_after(&mut connect(), b"");
    assert!(about_one_second(waited), "{waited:?}");
    assert!(answer.is_empty(), "{answer}");
    // A keep-alive connection left idle after its answer.
    let request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let (waited, answer) = closed_after(&mut connect(), request);
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(about_one_second(waited), "{waited:?}");
    // A prompt client is served, also when its answer takes longer than
    // the header timeout.
    assert_eq!(get_text(&server, "/healthz", None).0, 200);
    let (status, slow) = post(
        &server,
        "/tools/skill_run",
        None,
        run_body("spin-3s", json!({})),
    );
    assert_eq!(status, 200);
    assert_eq!(slow["data"]["error_kind"], "EXECUTION_TIMEOUT", "{slow}");
}

#[test]
fn connections_over_the_cap_wait_until_one_closes() {
    let fx = fixture();
    let server = Server::start(
        &fx,
        &[
            "--max-connections",
            "2",
            "--header-read-timeout-seconds",
            "30",
        ],
    );
    let idle: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(&server.addr).unwrap())
        .collect();
    // Give the server time to accept both.
    thread::sleep(Duration::from_millis(300));
    let impatient = reqwest::blocking::Client::builder()
        .timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    assert!(
        impatient.get(server.url("/healthz")).send().is_err(),
        "a third connection must wait while two are open"
    );
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match impatient.get(server.url("/healthz")).send() {
            Ok(response) => {
                assert_eq!(response.status().as_u16(), 200);
                break;
            }
            Err(error) => assert!(Instant::now() < deadline, "{error}"),
        }
    }
}
