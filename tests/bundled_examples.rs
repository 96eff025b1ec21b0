//! The README's run command serves `guest-examples/workspace`: every bundled
//! skill must load cleanly, every file it lists must be readable, every
//! bundled component must validate and run as its SKILL.md says, and the
//! committed `.wasm` files must behave like the guests built from source.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guest-examples/workspace")
}

fn cli(args: &[&str], state: &Path) -> (i32, Value) {
    let out = Command::new(common::bin())
        .args(args)
        .arg("--workspace")
        .arg(workspace())
        .arg("--state-dir")
        .arg(state)
        .args(["--no-global", "--json"])
        .output()
        .unwrap();
    let value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().unwrap(), value)
}

/// `run` prints the envelope without needing --json.
fn run(skill: &str, component: &str, input: Value, state: &Path) -> (i32, Value) {
    let out = Command::new(common::bin())
        .args(["run", skill, component, "--input", &input.to_string()])
        .arg("--workspace")
        .arg(workspace())
        .arg("--state-dir")
        .arg(state)
        .arg("--no-global")
        .output()
        .unwrap();
    let envelope: Value = serde_json::from_slice(&out.stdout).expect("envelope JSON");
    (out.status.code().unwrap(), envelope["data"].clone())
}

#[test]
fn bundled_skills_load_without_warnings_and_all_files_read() {
    let state = tempfile::tempdir().unwrap();
    let (code, list) = cli(&["list"], state.path());
    assert_eq!(code, 0);
    let skills = list["skills"].as_array().unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "brand-palette",
            "commit-message",
            "csv-insights",
            "hello-typed",
            "limits-demo",
            "text-stats"
        ]
    );
    assert_eq!(list["warnings"], json!([]), "{list:#}");
    for skill in skills {
        let name = skill["name"].as_str().unwrap();
        assert_eq!(skill["warnings"], json!([]), "{name}");
        let (code, loaded) = cli(&["load", name], state.path());
        assert_eq!(code, 0);
        assert!(
            loaded["instructions"].as_str().unwrap().starts_with("# "),
            "{name}"
        );
        let files = loaded["files"].as_array().unwrap();
        assert!(!files.is_empty(), "{name} ships related files");
        for file in files {
            let path = file["path"].as_str().unwrap();
            let (code, read) = cli(&["read", name, path], state.path());
            assert_eq!(code, 0, "{name}/{path}: {read}");
            assert_eq!(read["size"], file["size"]);
            assert_eq!(read["truncated"], false);
        }
        let dir = workspace().join(".agents/skills").join(name);
        let (code, report) = cli(&["validate", dir.to_str().unwrap()], state.path());
        assert_eq!(
            (code, &report["errors"]),
            (0, &json!([])),
            "{name}: {report:#}"
        );
    }
}

#[test]
fn bundled_components_behave_as_their_skills_say() {
    let state = tempfile::tempdir().unwrap();
    let s = state.path();

    let (code, data) = run(
        "text-stats",
        "word-count",
        json!({"text": "hello world hello"}),
        s,
    );
    assert_eq!(code, 0, "{data:#}");
    assert_eq!(
        data["output_data"],
        json!({"words": 3, "lines": 1, "chars": 17, "top": [["hello", 2], ["world", 1]]})
    );
    let (code, data) = run("text-stats", "file-stats", json!({"file": "sample.txt"}), s);
    assert_eq!(code, 0, "{data:#}");
    assert_eq!(data["output_data"]["lines"], 2);
    assert_eq!(
        data["output_data"]["first_line"],
        "The quick brown fox jumps over the lazy dog."
    );
    let (code, data) = run("hello-typed", "greeter", json!({"name": "Ada"}), s);
    assert_eq!(code, 0, "{data:#}");
    assert_eq!(
        data["output_data"],
        json!({"message": "Hello, Ada!", "greeting_source": "default"})
    );

    let (code, data) = run("limits-demo", "spin-budget", json!({}), s);
    assert_eq!(
        (code, data["error_kind"].as_str()),
        (2, Some("EXECUTION_TIMEOUT"))
    );
    assert_eq!(data["fuel_consumed"], 100_000_000);
    let (code, data) = run("limits-demo", "memory-bomb", json!({}), s);
    assert_eq!(
        (code, data["error_kind"].as_str()),
        (2, Some("RESOURCE_EXHAUSTED"))
    );
    assert!(data["memory_peak_bytes"].as_u64().unwrap() <= 32 * 1024 * 1024);
    let (code, data) = run("limits-demo", "spin", json!({}), s);
    assert_eq!(
        (code, data["error_kind"].as_str()),
        (2, Some("EXECUTION_TIMEOUT"))
    );
    assert!(data["duration_ms"].as_f64().unwrap() >= 2000.0);
}

/// The committed binaries are copies of the guests (guest-examples/build.sh
/// refreshes them): both must give the same output for the same input.
#[test]
fn committed_components_match_the_guest_sources() {
    let skills = workspace().join(".agents/skills");
    for (committed, source, input) in [
        (
            "text-stats/components/word-count.wasm",
            "word-count",
            json!({"text": "a b a, c; A"}),
        ),
        (
            "hello-typed/components/greeter.wasm",
            "greeter",
            json!({"name": "Grace"}),
        ),
    ] {
        let fx = common::Fixture::new();
        let dir = fx.skill(&fx.project_dir(), "twin", "Both builds");
        fx.file(
            &dir,
            "components/committed.wasm",
            std::fs::read(skills.join(committed)).unwrap(),
        );
        fx.file(
            &dir,
            "components/fresh.wasm",
            std::fs::read(common::guests::guest(source)).unwrap(),
        );
        let output = |component: &str| {
            let out = fx
                .command(&["run", "twin", component, "--input", &input.to_string()])
                .arg("--no-global")
                .output()
                .unwrap();
            let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(envelope["data"]["status"], "succeeded", "{envelope:#}");
            envelope["data"]["output_data"].clone()
        };
        assert_eq!(
            output("committed"),
            output("fresh"),
            "{committed} is stale: run guest-examples/build.sh"
        );
    }
}

/// The bundled Python script runs in the sandbox as csv-insights says. It is
/// copied into a world-readable fixture first: a checkout may live in a
/// private directory that a sandbox started as `nobody` (when the tests run
/// as root) cannot enter.
#[test]
fn bundled_script_runs_in_the_sandbox() {
    if !common::bwrap_available("bundled_script_runs_in_the_sandbox") {
        return;
    }
    let fx = common::Fixture::new();
    let source = workspace().join(".agents/skills/csv-insights");
    let target = fx.project_dir().join("csv-insights");
    for file in [
        "SKILL.md",
        "skill.yaml",
        "scripts/summarize.py",
        "references/interpreting.md",
    ] {
        fx.file(&target, file, std::fs::read(source.join(file)).unwrap());
    }
    let input = json!({"csv": "name,age\nana,31\nbo,"}).to_string();
    let out = fx
        .command(&["run", "csv-insights", "summarize", "--input", &input])
        .output()
        .unwrap();
    let envelope: Value = serde_json::from_slice(&out.stdout).unwrap();
    let data = &envelope["data"];
    assert_eq!(out.status.code(), Some(0), "{data:#}");
    assert_eq!(
        (data["runtime"].as_str(), data["sandbox"].as_str()),
        (Some("python"), Some("bubblewrap"))
    );
    assert_eq!(data["output_data"]["rows"], 2);
    assert_eq!(
        data["output_data"]["columns"][1],
        json!({"name": "age", "type": "integer", "missing": 1, "min": 31.0, "max": 31.0})
    );
}
