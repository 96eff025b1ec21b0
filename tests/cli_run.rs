//! `skillhost run` and `skillhost validate` through the real binary: the
//! envelope on stdout, error bodies, exit codes (0 success, 1 caller error,
//! 2 limits, 3 the component failed), `--input` forms, `--env`, and the
//! validation report.

mod common;

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};

use common::Fixture;
use common::cli_json::assert_error;
use common::skills::{ECHO, GREETER, HOSTILE, SCHEMAS, copy_guest, skill_at, yaml_skill};

/// `skillhost run ARGS...`: (exit code, stdout as JSON).
fn run(fx: &Fixture, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    let out = fx.run(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        panic!("stdout of {all:?} is not JSON ({e}):\n{stdout}\nstderr:\n{stderr}")
    });
    (out.status.code().unwrap_or(-1), value)
}

/// `skillhost run ARGS... --input -` with `stdin` piped in.
fn run_stdin(fx: &Fixture, args: &[&str], stdin: &str) -> (i32, Value) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--input", "-"]);
    let mut child = fx
        .command(&all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    (out.status.code().unwrap_or(-1), value)
}

/// An envelope that ended with `kind` and the matching exit code.
fn assert_envelope(result: (i32, Value), kind: &str, code: i32) -> Value {
    let (exit, value) = result;
    assert_eq!(value["kind"], "execution", "{value:#}");
    assert_eq!(value["data"]["status"], "failed", "{value:#}");
    assert_eq!(value["data"]["error_kind"], kind, "{value:#}");
    assert!(
        value["data"]["error_message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert_eq!(exit, code, "exit code for {kind}: {value:#}");
    value
}

#[test]
fn a_successful_run_prints_the_envelope_and_exits_0() {
    let fx = Fixture::new();
    yaml_skill(&fx, "schemas", SCHEMAS);
    let out = fx.run(&[
        "run",
        "schemas",
        "wc",
        "--input",
        r#"{"text": "one two three"}"#,
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["kind"], "execution");
    let data = &envelope["data"];
    assert_eq!(data["status"], "succeeded");
    assert_eq!(
        (&data["skill"], &data["component"]),
        (&json!("schemas"), &json!("wc"))
    );
    assert_eq!(data["runtime"], "wasi");
    assert_eq!(data["exit_code"], 0);
    assert_eq!(data["error_kind"], Value::Null);
    assert_eq!(data["output_data"]["words"], 3);
    assert_eq!(data["stderr"], "counted 3 words\n");
    assert_eq!(data["component_path"], "components/word-count.wasm");
    let revision = data["revision_id"].as_str().unwrap();
    assert!(
        revision.starts_with("sha256:") && revision.len() == 71,
        "{revision}"
    );
    for key in ["execution_id", "started_at", "finished_at"] {
        assert!(data[key].as_str().is_some_and(|s| !s.is_empty()), "{key}");
    }
    assert!(data["fuel_consumed"].as_u64().unwrap() > 0);
    assert_eq!(data["limits"]["timeout_ms"], 30_000);

    // The same revision may be insisted on; another is refused.
    let args = [
        "schemas",
        "wc",
        "--input",
        r#"{"text": "x"}"#,
        "--revision",
        revision,
    ];
    let pinned = run(&fx, &args);
    assert_eq!(pinned.0, 0, "{:#}", pinned.1);
    assert_eq!(pinned.1["data"]["revision_id"], revision);
    let wrong = format!("sha256:{}", "f".repeat(64));
    let args = [
        "schemas",
        "wc",
        "--input",
        r#"{"text": "x"}"#,
        "--revision",
        &wrong,
    ];
    assert_error(run(&fx, &args), "REVISION_NOT_FOUND", 1);
}

#[test]
fn caller_errors_exit_1_with_an_error_body() {
    let fx = Fixture::new();
    yaml_skill(&fx, "schemas", SCHEMAS);
    let net = "components:
  - {name: net, type: wasm, path: components/echo.wasm, permissions: {network: [example.com]}}
";
    yaml_skill(&fx, "net", net);
    assert_error(
        run(&fx, &["schemas", "wc", "--input", "{}"]),
        "INVALID_INPUT",
        1,
    );
    let (code, body) = run(&fx, &["schemas", "wc", "--input", r#"{"text": 1}"#]);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at /text"),
        "{body:#}"
    );
    assert_error((code, body), "INVALID_INPUT", 1);
    assert_error(
        run(&fx, &["schemas", "wc", "--input", "[1]"]),
        "INVALID_INPUT",
        1,
    );
    assert_error(run(&fx, &["nope", "wc"]), "SKILL_NOT_FOUND", 1);
    let (code, body) = run(&fx, &["schemas", "nope"]);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("wc, strict, loose"), "{body:#}");
    assert_error((code, body), "COMPONENT_NOT_FOUND", 1);
    assert_error(run(&fx, &["net", "net"]), "ACCESS_DENIED", 1);
    let timeout = [
        "schemas",
        "wc",
        "--input",
        r#"{"text": "x"}"#,
        "--timeout-seconds",
    ];
    for bad in ["0.5", "1000"] {
        let args: Vec<&str> = timeout.iter().copied().chain([bad]).collect();
        assert_error(run(&fx, &args), "INVALID_INPUT", 1);
    }
    let args: Vec<&str> = timeout.iter().copied().chain(["1"]).collect();
    let (code, envelope) = run(&fx, &args);
    assert_eq!(code, 0, "{envelope:#}");
    assert_eq!(envelope["data"]["limits"]["timeout_ms"], 1000);
}

#[test]
fn limits_exit_2_and_component_failures_exit_3_with_the_envelope() {
    let fx = Fixture::new();
    yaml_skill(&fx, "hostile", HOSTILE);
    yaml_skill(&fx, "schemas", SCHEMAS);
    let spin = assert_envelope(run(&fx, &["hostile", "spin-clock"]), "EXECUTION_TIMEOUT", 2);
    assert_eq!(spin["data"]["exit_code"], Value::Null);
    let duration = spin["data"]["duration_ms"].as_f64().unwrap();
    assert!((1000.0..3000.0).contains(&duration), "{duration}");
    let bomb = assert_envelope(run(&fx, &["hostile", "bomb"]), "RESOURCE_EXHAUSTED", 2);
    assert!(bomb["data"]["memory_peak_bytes"].as_u64().unwrap() <= 32 << 20);
    assert_envelope(run(&fx, &["hostile", "recurse"]), "RESOURCE_EXHAUSTED", 2);
    let exit = run(&fx, &["hostile", "exit", "--input", r#"{"code": 5}"#]);
    let exit = assert_envelope(exit, "SCRIPT_EXECUTION_ERROR", 3);
    assert_eq!(exit["data"]["exit_code"], 1);
    assert_eq!(exit["data"]["stderr"], "exiting with 5\n");
    let strict = run(&fx, &["schemas", "strict", "--input", r#"{"text": "a b"}"#]);
    let strict = assert_envelope(strict, "OUTPUT_SCHEMA_MISMATCH", 3);
    assert_eq!(strict["data"]["output_data"]["words"], 2);
    assert_eq!(strict["data"]["exit_code"], 0);
}

#[test]
fn input_comes_inline_from_a_file_or_from_stdin() {
    let fx = Fixture::new();
    yaml_skill(&fx, "echo", ECHO);
    let input = json!({"from": "file", "list": [1, 2, 3]});
    let file = fx.path().join("input.json");
    std::fs::write(&file, input.to_string()).unwrap();
    let at_file = format!("@{}", file.display());
    let (code, envelope) = run(&fx, &["echo", "echo", "--input", &at_file]);
    assert_eq!(code, 0, "{envelope:#}");
    assert_eq!(envelope["data"]["output_data"], input);

    let input = json!({"from": "stdin", "nested": {"ok": true}});
    let (code, envelope) = run_stdin(&fx, &["echo", "echo"], &input.to_string());
    assert_eq!(code, 0, "{envelope:#}");
    assert_eq!(envelope["data"]["output_data"], input);

    // Without --input the component gets `{}`.
    let (code, envelope) = run(&fx, &["echo", "echo"]);
    assert_eq!((code, &envelope["data"]["output_data"]), (0, &json!({})));

    for bad in ["{not json", "@/no/such/input.json"] {
        let (code, body) = run(&fx, &["echo", "echo", "--input", bad]);
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--input"),
            "{body:#}"
        );
        assert_error((code, body), "INVALID_INPUT", 1);
    }
    assert_error(
        run_stdin(&fx, &["echo", "echo"], "nope"),
        "INVALID_INPUT",
        1,
    );
}

#[test]
fn env_values_reach_only_components_that_declare_them() {
    let fx = Fixture::new();
    yaml_skill(&fx, "greeter", GREETER);
    let ada = r#"{"name": "Ada"}"#;
    let message = |args: &[&str]| {
        let (code, envelope) = run(&fx, args);
        assert_eq!(code, 0, "{envelope:#}");
        envelope["data"]["output_data"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let greet = ["greeter", "greet", "--input", ada];
    assert_eq!(message(&greet), "Hello, Ada!");
    let with_env: Vec<&str> = greet
        .iter()
        .copied()
        .chain(["--env", "GREETING=Hi"])
        .collect();
    assert_eq!(message(&with_env), "Hi, Ada!");
    let plain = ["greeter", "plain", "--input", ada, "--env", "GREETING=Hi"];
    assert_eq!(message(&plain), "Hello, Ada!");

    // `--env KEY` passes this process's own variable.
    let mut args = vec!["run"];
    args.extend(greet.iter().copied().chain(["--env", "GREETING"]));
    let out = fx.command(&args).env("GREETING", "Ahoy").output().unwrap();
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{envelope:#}");
    assert_eq!(envelope["data"]["output_data"]["message"], "Ahoy, Ada!");
    assert_eq!(
        envelope["data"]["stderr"],
        "[info] greeting Ada with config greeting\n"
    );
}

const GOOD: &str = "components:
  - {name: wc, type: wasm, path: components/word-count.wasm}
  - {name: greet, type: wasm, path: components/greeter.wasm}
";

#[test]
fn validate_exits_0_for_a_valid_skill_and_prints_its_components() {
    let fx = Fixture::new();
    let dir = skill_at(&fx.path().join("good"), GOOD);
    let path = dir.to_str().unwrap();
    let out = fx.run(&["validate", path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], format!("ok: skill `good` at {path}"));
    let wc = "  component wc (components/word-count.wasm): wasi, wasi:cli/command";
    let greet = "  component greet (components/greeter.wasm): wasi, skillhost:skill/skill";
    assert_eq!(lines[1..], [wc, greet]);

    let (code, report) = fx.json(&["validate", path]);
    assert_eq!(code, 0, "{report:#}");
    let expected = json!({
        "ok": true,
        "skill": "good",
        "errors": [],
        "warnings": [],
        "components": [
            {"name": "wc", "path": "components/word-count.wasm", "runtime": "wasi",
             "world": "wasi:cli/command"},
            {"name": "greet", "path": "components/greeter.wasm", "runtime": "wasi",
             "world": "skillhost:skill/skill"},
        ],
    });
    assert_eq!(report, expected);
}

#[test]
fn validate_exits_1_with_error_lines_for_an_invalid_skill() {
    let fx = Fixture::new();
    let yaml = "components:
  - {name: wc, type: wasm, path: components/word-count.wasm, input_schema: {type: nope}}
  - {name: gone, type: wasm, path: components/gone.wasm}
  - {name: net, type: wasm, path: components/junk.wasm, permissions: {network: [example.com]}}
";
    let dir = skill_at(&fx.path().join("bad"), yaml);
    std::fs::write(dir.join("components/junk.wasm"), "not wasm").unwrap();
    let path = dir.to_str().unwrap();
    let out = fx.run(&["validate", path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with(&format!("invalid: skill `bad` at {path}\n")),
        "{stdout}"
    );
    let errors: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("error: "))
        .collect();
    assert_eq!(errors.len(), 4, "{stdout}");
    for name in ["wc", "gone", "net"] {
        let prefix = format!("component `{name}`:");
        assert!(
            errors.iter().any(|e| e.starts_with(&prefix)),
            "{name}: {stdout}"
        );
    }

    let (code, report) = fx.json(&["validate", path]);
    assert_eq!(
        (code, &report["ok"], &report["skill"]),
        (1, &json!(false), &json!("bad"))
    );
    assert_eq!(report["errors"].as_array().unwrap().len(), 4, "{report:#}");
    assert_eq!(
        report["components"].as_array().unwrap().len(),
        3,
        "{report:#}"
    );
    assert!(report["warnings"].is_array());

    // A directory without SKILL.md is invalid too.
    let empty = fx.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    copy_guest(&empty, "echo", "components/echo.wasm");
    let (code, report) = fx.json(&["validate", empty.to_str().unwrap()]);
    assert_eq!((code, &report["ok"]), (1, &json!(false)));
    let first = report["errors"][0].as_str().unwrap();
    assert!(first.contains("has no readable SKILL.md"), "{report:#}");
    assert_eq!(report["components"][0]["world"], "wasi:cli/command");
}
