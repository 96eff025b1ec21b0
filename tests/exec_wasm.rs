//! The WebAssembly executor through the library `Host`: envelopes, limits,
//! hostile guests, cancellation and concurrency. (Permissions, schemas,
//! revisions, the artifact cache and `validate` are in exec_contract.rs.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::{scope, sleep};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use skillhost::exec::{Envelope, RunContext, Status};
use skillhost::{ErrorKind, Host};

use common::Fixture;
use common::skills::{
    GREETER, HOSTILE, envelope, failed, host, host_with, message, request, succeeded, well_formed,
    yaml_skill,
};

const MIB: u64 = 1024 * 1024;

/// A host over the skill `hostile`, with its components compiled.
fn hostile(fx: &Fixture, tune: impl FnOnce(&mut skillhost::HostConfig)) -> Host {
    let dir = yaml_skill(fx, "hostile", HOSTILE);
    let host = host_with(fx, tune);
    let report = host.validate(&dir);
    assert!(report.ok, "{report:#?}");
    host
}

/// The host that contained a hostile guest still runs word-count.
fn still_works(host: &Host) {
    let env = envelope(host, "hostile", "wc", json!({"text": "still alive here"}));
    assert_eq!(succeeded(&env)["words"], 3);
}

/// Run a hostile component on a fresh host: it must fail with `kind` and
/// pass `check`; the same host then still runs word-count.
fn contain(component: &str, input: Value, kind: ErrorKind, check: impl FnOnce(&Envelope)) {
    let fx = Fixture::new();
    let host = hostile(&fx, |_| {});
    let env = envelope(&host, "hostile", component, input);
    failed(&env, kind);
    check(&env);
    still_works(&host);
}

/// Run `component` of `hostile` on another thread with a cancel flag that is
/// set after `after`.
fn cancelled_after(host: &Host, component: &str, after: Duration) -> Envelope {
    let cancel = Arc::new(AtomicBool::new(false));
    let context = RunContext {
        cancel: Some(Arc::clone(&cancel)),
        progress: None,
    };
    let req = request("hostile", component, json!({}));
    scope(|s| {
        let run = s.spawn(|| host.run(&req, &context));
        sleep(after);
        cancel.store(true, Ordering::SeqCst);
        run.join().unwrap()
    })
    .unwrap()
}

#[test]
fn word_count_fills_every_envelope_field() {
    let fx = Fixture::new();
    let yaml = "components:\n  - {name: wc, type: wasm, path: components/word-count.wasm}\n";
    yaml_skill(&fx, "wc", yaml);
    let host = host(&fx);
    let text = "the cat and the hat\nthe end";
    let env = envelope(&host, "wc", "wc", json!({ "text": text }));
    let expected = json!({"words": 7, "lines": 2, "chars": text.chars().count(),
        "top": [["the", 3], ["and", 1], ["cat", 1]]});
    assert_eq!(succeeded(&env), &expected);
    let d = &env.data;
    assert_eq!((d.skill.as_str(), d.component.as_str()), ("wc", "wc"));
    assert_eq!(d.component_path, "components/word-count.wasm");
    assert_eq!(d.stdout, format!("{expected}\n"));
    assert_eq!(d.stderr, "counted 7 words\n");
    assert!(!d.stdout_truncated && !d.stderr_truncated);
    assert_eq!(d.limits.timeout_ms, 30_000);
    assert_eq!(d.limits.memory_bytes, 128 * MIB);
    assert_eq!(d.limits.fuel, Some(1_000_000_000_000));
    assert_eq!(d.limits.max_output_bytes, MIB);
    let fuel = d.fuel_consumed.unwrap();
    assert!(fuel > 1_000 && fuel < 1_000_000_000, "{fuel}");
    assert!(d.memory_peak_bytes > 0 && d.memory_peak_bytes <= d.limits.memory_bytes);
    assert!(d.duration_ms > 0.0 && d.duration_ms < 10_000.0);
    let again = envelope(&host, "wc", "wc", json!({ "text": text }));
    succeeded(&again);
    assert_ne!(again.data.execution_id, d.execution_id);
    assert_eq!(again.data.revision_id, d.revision_id);
}

#[test]
fn echo_returns_its_input_and_limits_are_capped_by_the_host() {
    let fx = Fixture::new();
    let yaml = "components:
  - {name: echo, type: wasm, path: components/echo.wasm}
  - {name: greedy, type: wasm, path: components/echo.wasm,
     limits: {timeout_ms: 999999999, memory_mb: 1000000, max_output_bytes: 99999999999}}
";
    yaml_skill(&fx, "echo", yaml);
    let host = host(&fx);
    let input = json!({"s": "ünïcode", "n": [1, 2.5, null, {"deep": true}]});
    let env = envelope(&host, "echo", "echo", input.clone());
    assert_eq!((succeeded(&env), env.data.stderr.as_str()), (&input, ""));
    // No input is `{}`.
    let mut req = request("echo", "greedy", json!(null));
    req.input = None;
    let greedy = host.run(&req, &RunContext::default()).unwrap();
    assert_eq!(succeeded(&greedy), &json!({}));
    let limits = greedy.data.limits;
    assert_eq!(limits.timeout_ms, 60_000);
    assert_eq!(limits.memory_bytes, 1024 * MIB);
    assert_eq!(limits.max_output_bytes, 16 * MIB);
}

#[test]
fn greeter_gets_only_declared_config_logs_and_reports_progress() {
    let fx = Fixture::new();
    yaml_skill(&fx, "greeter", GREETER);
    let host = host_with(&fx, |c| {
        c.exec.env.insert("GREETING".into(), "Howdy".into());
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let context = RunContext {
        cancel: None,
        progress: Some(Arc::new(move |done, total, text| {
            sink.lock().unwrap().push((done, total, text));
        })),
    };
    let req = request("greeter", "greet", json!({"name": "Ada"}));
    let env = host.run(&req, &context).unwrap();
    let out = json!({"message": "Howdy, Ada!", "greeting_source": "config"});
    assert_eq!(succeeded(&env), &out);
    assert_eq!(env.data.stdout, "");
    let log = "[info] greeting Ada with config greeting\n";
    assert_eq!(env.data.stderr, log);
    let progress = [
        (0, Some(2), Some("choosing a greeting".to_string())),
        (2, Some(2), Some("done".to_string())),
    ];
    assert_eq!(*seen.lock().unwrap(), progress);
    let plain = envelope(&host, "greeter", "plain", json!({"name": "Bo"}));
    let out = json!({"message": "Hello, Bo!", "greeting_source": "default"});
    assert_eq!(succeeded(&plain), &out);
    // A typed component's run-error is a failed run with exit code 1.
    let error = envelope(&host, "greeter", "greet", json!({"nom": "x"}));
    failed(&error, ErrorKind::ScriptExecutionError);
    assert_eq!(error.data.exit_code, Some(1));
    assert!(message(&error).contains("missing-name"), "{error:?}");
}

#[test]
fn spin_stops_at_the_wall_clock_deadline() {
    contain(
        "spin-clock",
        json!({}),
        ErrorKind::ExecutionTimeout,
        |env| {
            let d = &env.data;
            assert_eq!((d.exit_code, d.limits.timeout_ms), (None, 1000));
            let (took, cpu) = (d.duration_ms, d.cpu_time_ms);
            assert!((1000.0..3000.0).contains(&took), "{took}");
            assert!(cpu > 100.0 && cpu <= took + 50.0, "{cpu}");
            assert!(d.fuel_consumed.unwrap() > 0);
        },
    );
}

#[test]
fn spin_stops_when_its_fuel_is_spent() {
    contain("spin-fuel", json!({}), ErrorKind::ExecutionTimeout, |env| {
        assert!(message(env).contains("fuel"), "{env:?}");
        let d = &env.data;
        assert_eq!(d.limits.fuel, Some(50_000_000));
        assert_eq!(d.fuel_consumed, Some(50_000_000));
        assert_eq!(d.exit_code, None);
    });
}

#[test]
fn memory_bomb_is_stopped_at_its_limit() {
    contain("bomb", json!({}), ErrorKind::ResourceExhausted, |env| {
        let (limit, peak) = (env.data.limits.memory_bytes, env.data.memory_peak_bytes);
        assert_eq!(limit, 32 * MIB);
        assert!(peak <= 32 * MIB && peak > 16 * MIB, "{peak}");
        assert!(message(env).contains(&limit.to_string()), "{env:?}");
    });
}

#[test]
fn the_memory_peak_grows_with_what_a_guest_allocates() {
    let fx = Fixture::new();
    let host = hostile(&fx, |_| {});
    let small = envelope(&host, "hostile", "bomb16", json!({}));
    let large = envelope(&host, "hostile", "bomb48", json!({}));
    failed(&small, ErrorKind::ResourceExhausted);
    failed(&large, ErrorKind::ResourceExhausted);
    let (small, large) = (small.data.memory_peak_bytes, large.data.memory_peak_bytes);
    let why = format!("{small} {large}");
    assert!(
        small <= 16 * MIB && large > 32 * MIB && large <= 48 * MIB,
        "{why}"
    );
}

#[test]
fn deep_recursion_exhausts_the_stack() {
    contain("recurse", json!({}), ErrorKind::ResourceExhausted, |env| {
        assert!(message(env).contains("stack"), "{env:?}");
        assert_eq!((env.data.exit_code, env.data.stdout.as_str()), (None, ""));
    });
}

#[test]
fn stdout_flood_is_capped_and_stopped() {
    contain("flood", json!({}), ErrorKind::ExecutionTimeout, |env| {
        let d = &env.data;
        assert_eq!(d.stdout, "x".repeat(1000));
        assert!(d.stdout_truncated && d.stderr_truncated);
        assert_eq!(d.stderr.len(), 1000);
        assert!(d.stderr.starts_with("flooding stderr\nflooding stderr\n"));
        assert_eq!(d.output_data, None);
        assert!(d.duration_ms < 5000.0, "{}", d.duration_ms);
    });
}

#[test]
fn a_non_zero_exit_is_a_script_error_with_exit_code_1() {
    contain(
        "exit",
        json!({"code": 7}),
        ErrorKind::ScriptExecutionError,
        |env| {
            assert_eq!(env.data.exit_code, Some(1));
            assert_eq!(env.data.stderr, "exiting with 7\n");
        },
    );
}

#[test]
fn cancellation_stops_a_run_promptly() {
    let fx = Fixture::new();
    let host = hostile(&fx, |_| {});
    let env = cancelled_after(&host, "spin-long", Duration::from_millis(200));
    let v = well_formed(&env);
    assert_eq!(v["data"]["status"], "cancelled");
    assert_eq!(v["data"]["error_kind"], "CANCELLED");
    assert_eq!(env.data.status, Status::Cancelled);
    assert_eq!(env.data.exit_code, None);
    let took = env.data.duration_ms;
    assert!((150.0..5000.0).contains(&took), "{took}");
    still_works(&host);
}

/// `Slots::acquire` waits for a free slot only until the run's own deadline
/// (start + timeout): with one slot, the second of two 1 s spins gets
/// RESOURCE_EXHAUSTED at its deadline, or the slot just before it and then
/// times out at once. Neither waits a whole extra timeout.
#[test]
fn one_run_slot_bounds_waiting_by_the_deadline() {
    let fx = Fixture::new();
    let host = hostile(&fx, |c| c.exec.max_concurrent_runs = 1);
    let barrier = Barrier::new(2);
    let started = Instant::now();
    let envs: Vec<Envelope> = scope(|s| {
        let spin = || {
            barrier.wait();
            envelope(&host, "hostile", "spin-clock", json!({}))
        };
        let runs = [s.spawn(spin), s.spawn(spin)];
        runs.map(|r| r.join().unwrap()).into()
    });
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(2500), "{elapsed:?}");
    let kinds: Vec<_> = envs.iter().map(|e| e.data.error_kind.unwrap()).collect();
    assert!(kinds.contains(&ErrorKind::ExecutionTimeout), "{kinds:?}");
    for env in &envs {
        let d = &env.data;
        assert_eq!(d.status, Status::Failed);
        assert!(d.duration_ms >= 900.0 && d.duration_ms < 2500.0, "{d:?}");
        if d.error_kind == Some(ErrorKind::ResourceExhausted) {
            assert!(message(env).contains("already executing"), "{d:?}");
            assert_eq!((d.fuel_consumed, d.memory_peak_bytes), (None, 0));
        } else {
            assert_eq!(d.error_kind, Some(ErrorKind::ExecutionTimeout));
        }
    }
    still_works(&host);
}

/// A run waiting for a slot is cancelled too: it should end as CANCELLED soon
/// after its flag is set, not keep waiting until its deadline and then
/// report RESOURCE_EXHAUSTED (`Slots::acquire` never looks at the flag).
#[test]
fn a_run_waiting_for_a_slot_honours_cancellation() {
    let fx = Fixture::new();
    let host = hostile(&fx, |c| c.exec.max_concurrent_runs = 1);
    let (holder, waiter) = scope(|s| {
        let slow = || cancelled_after(&host, "spin-long", Duration::from_millis(1500));
        let holder = s.spawn(slow);
        sleep(Duration::from_millis(100));
        let waiter = cancelled_after(&host, "spin-clock", Duration::from_millis(200));
        (holder.join().unwrap(), waiter)
    });
    assert_eq!(holder.data.status, Status::Cancelled);
    let d = &waiter.data;
    assert_eq!(d.error_kind, Some(ErrorKind::Cancelled), "{d:?}");
    assert_eq!(d.status, Status::Cancelled);
    assert!(d.duration_ms < 700.0, "{}", d.duration_ms);
}
