//! Script components through the real `skillhost` binary: `run` prints the
//! envelope and exits with the error kind's code, the sandbox flags
//! (`--bwrap`, `--unsafe-allow-unsandboxed-scripts`,
//! `--artifact-retention-seconds`, `--env`) take effect, and `validate`
//! checks that scripts can run here.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::scripts::{REPORT_TXT, hostile_skill};
use common::{Fixture, bwrap_available};

/// `skillhost run hostile COMPONENT --input INPUT EXTRA...`: (exit code, envelope).
fn run(fx: &Fixture, component: &str, input: Value, extra: &[&str]) -> (i32, Value) {
    let input = input.to_string();
    let mut args = vec!["run", "hostile", component, "--input", &input];
    args.extend_from_slice(extra);
    let out = fx.run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of {args:?} is not JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

fn fixture() -> Fixture {
    let fx = Fixture::new();
    hostile_skill(&fx, "unused");
    fx
}

/// A failed envelope of `kind` from a bubblewrap run, and the exit code.
fn assert_failed(result: &(i32, Value), kind: &str, code: i32) {
    let (exit, env) = result;
    let d = &env["data"];
    assert_eq!(env["kind"], "execution", "{env:#}");
    assert_eq!(
        (&d["status"], &d["error_kind"]),
        (&json!("failed"), &json!(kind)),
        "{env:#}"
    );
    assert_eq!(d["sandbox"], "bubblewrap", "{env:#}");
    assert!(d["error_message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(*exit, code, "{env:#}");
}

#[test]
fn run_prints_the_envelope_of_a_python_script() {
    if !bwrap_available("run_prints_the_envelope_of_a_python_script") {
        return;
    }
    let fx = fixture();
    let (code, env) = run(&fx, "ok", json!({"text": "hi"}), &[]);
    let d = &env["data"];
    assert_eq!(code, 0, "{env:#}");
    assert_eq!(
        (&d["status"], &d["exit_code"]),
        (&json!("succeeded"), &json!(0))
    );
    assert_eq!(
        (&d["runtime"], &d["sandbox"]),
        (&json!("python"), &json!("bubblewrap"))
    );
    assert_eq!(d["output_data"]["echo"], json!({"text": "hi"}));
    assert_eq!(
        (&d["fuel_consumed"], &d["limits"]["fuel"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(d["artifacts"], json!([]));
}

#[test]
fn a_bash_script_gets_the_input_on_stdin() {
    if !bwrap_available("a_bash_script_gets_the_input_on_stdin") {
        return;
    }
    let fx = fixture();
    let (code, env) = run(&fx, "stdin", json!({"a": 1}), &[]);
    assert_eq!(code, 0, "{env:#}");
    assert_eq!(env["data"]["runtime"], "bash");
    assert_eq!(env["data"]["output_data"], json!({"len": 7}));
}

#[test]
fn a_timeout_exits_2() {
    if !bwrap_available("a_timeout_exits_2") {
        return;
    }
    let fx = fixture();
    let started = Instant::now();
    let result = run(&fx, "sleeper", json!({}), &[]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_failed(&result, "EXECUTION_TIMEOUT", 2);
    assert_eq!(result.1["data"]["exit_code"], Value::Null);
}

#[test]
fn a_request_timeout_bounds_a_sleeping_script() {
    if !bwrap_available("a_request_timeout_bounds_a_sleeping_script") {
        return;
    }
    let fx = fixture();
    let result = run(&fx, "sleep-long", json!({}), &["--timeout-seconds", "1"]);
    assert_failed(&result, "EXECUTION_TIMEOUT", 2);
    assert_eq!(result.1["data"]["limits"]["timeout_ms"], 1000);
}

#[test]
fn an_exit_3_script_exits_3() {
    if !bwrap_available("an_exit_3_script_exits_3") {
        return;
    }
    let fx = fixture();
    let result = run(&fx, "exit3", json!({}), &[]);
    assert_failed(&result, "SCRIPT_EXECUTION_ERROR", 3);
    assert_eq!(result.1["data"]["exit_code"], 3);
    assert_eq!(result.1["data"]["stderr"], "about to fail\n");
}

#[test]
fn a_missing_bwrap_exits_2_with_sandbox_unavailable() {
    if !bwrap_available("a_missing_bwrap_exits_2_with_sandbox_unavailable") {
        return;
    }
    let fx = fixture();
    let result = run(&fx, "ok", json!({}), &["--bwrap", "/nonexistent"]);
    assert_failed(&result, "SANDBOX_UNAVAILABLE", 2);
    let d = &result.1["data"];
    assert_eq!((&d["exit_code"], &d["stdout"]), (&Value::Null, &json!("")));
    assert!(
        d["error_message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent")
    );
}

#[test]
fn the_unsafe_flag_runs_scripts_without_a_sandbox() {
    if !bwrap_available("the_unsafe_flag_runs_scripts_without_a_sandbox") {
        return;
    }
    let fx = fixture();
    let flags = [
        "--bwrap",
        "/nonexistent",
        "--unsafe-allow-unsandboxed-scripts",
    ];
    let (code, env) = run(&fx, "ok", json!({"x": 1}), &flags);
    assert_eq!(code, 0, "{env:#}");
    assert_eq!(env["data"]["sandbox"], "none");
    assert_eq!(env["data"]["output_data"]["echo"], json!({"x": 1}));
    // With a working bubblewrap the flag changes nothing.
    let (code, env) = run(
        &fx,
        "ok",
        json!({}),
        &["--unsafe-allow-unsandboxed-scripts"],
    );
    assert_eq!((code, &env["data"]["sandbox"]), (0, &json!("bubblewrap")));
}

#[test]
fn artifacts_are_kept_unless_retention_is_0() {
    if !bwrap_available("artifacts_are_kept_unless_retention_is_0") {
        return;
    }
    let fx = fixture();
    let (code, env) = run(&fx, "artifacts", json!({}), &[]);
    assert_eq!(code, 0, "{env:#}");
    let id = env["data"]["execution_id"].as_str().unwrap();
    let report = fx.state_dir().join("artifacts").join(id).join("report.txt");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), REPORT_TXT);
    let kept: Vec<&str> = env["data"]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kept_at"].as_str().expect("kept_at"))
        .collect();
    assert_eq!(kept.len(), 2, "{env:#}");
    assert!(kept.contains(&report.to_str().unwrap()), "{kept:?}");

    let (code, env) = run(
        &fx,
        "artifacts",
        json!({}),
        &["--artifact-retention-seconds", "0"],
    );
    assert_eq!(code, 0, "{env:#}");
    let artifacts = env["data"]["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 2, "{env:#}");
    assert!(artifacts.iter().all(|a| a["kept_at"].is_null()), "{env:#}");
    let id = env["data"]["execution_id"].as_str().unwrap();
    assert!(!fx.state_dir().join("artifacts").join(id).exists());
}

#[test]
fn env_flags_reach_only_declared_keys() {
    if !bwrap_available("env_flags_reach_only_declared_keys") {
        return;
    }
    let fx = fixture();
    let flags = ["--env", "GREETING=hi there", "--env", "OTHER=secret"];
    let (code, env) = run(&fx, "environ", json!({}), &flags);
    assert_eq!(code, 0, "{env:#}");
    let stdout = env["data"]["stdout"].as_str().unwrap();
    let (pid1, _) = stdout.split_once("---\n").unwrap();
    assert!(pid1.lines().any(|l| l == "GREETING=hi there"), "{stdout}");
    assert!(
        !stdout.contains("OTHER") && !stdout.contains("secret"),
        "{stdout}"
    );
}

/// `validate PATH --json EXTRA...`: (exit code, report).
fn validate(fx: &Fixture, dir: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["validate", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    fx.json(&args)
}

#[test]
fn validate_needs_a_usable_sandbox_for_scripts() {
    if !bwrap_available("validate_needs_a_usable_sandbox_for_scripts") {
        return;
    }
    let fx = fixture();
    let dir = fx.project_dir().join("hostile");
    let (code, report) = validate(&fx, &dir, &[]);
    assert_eq!((code, &report["ok"]), (0, &json!(true)), "{report:#}");
    let ok = report["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "ok");
    assert_eq!(ok.expect("component ok")["runtime"], "python", "{report:#}");

    let (code, report) = validate(&fx, &dir, &["--bwrap", "/nonexistent"]);
    assert_eq!((code, &report["ok"]), (1, &json!(false)), "{report:#}");
    let errors = report["errors"].as_array().unwrap();
    let about_ok = errors.iter().filter_map(Value::as_str).any(|e| {
        e.contains("component `ok`") && e.contains("bubblewrap") && e.contains("/nonexistent")
    });
    assert!(about_ok, "{report:#}");
    // Allowing unsandboxed scripts makes them runnable, so valid again.
    let flags = [
        "--bwrap",
        "/nonexistent",
        "--unsafe-allow-unsandboxed-scripts",
    ];
    assert_eq!(validate(&fx, &dir, &flags).0, 0);
}
