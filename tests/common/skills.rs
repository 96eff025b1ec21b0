//! Fixture skills with WebAssembly components (built guests copied into
//! `components/`), a library `Host` to run them, and envelope assertions.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use skillhost::api::RunRequest;
use skillhost::exec::{Envelope, RunContext, Status};
use skillhost::{ErrorKind, Host, HostConfig, HostError};

use super::Fixture;
use super::guests::guest;

/// Every guest `guest-examples/` builds.
pub const GUESTS: [&str; 10] = [
    "echo",
    "word-count",
    "greeter",
    "data-reader",
    "probe",
    "spin",
    "memory_bomb",
    "deep_recursion",
    "stdout_flood",
    "exit_code",
];

/// One command component, `echo`.
pub const ECHO: &str = "components:\n  - {name: echo, type: wasm, path: components/echo.wasm}\n";

/// The typed greeter twice: `greet` declares GREETING, `plain` declares nothing.
pub const GREETER: &str = "components:
  - {name: greet, type: wasm, path: components/greeter.wasm, permissions: {env: [GREETING]}}
  - {name: plain, type: wasm, path: components/greeter.wasm}
";

/// word-count with an input schema (`wc`), an output schema it cannot meet
/// (`strict`) and one it meets (`loose`).
pub const SCHEMAS: &str = "components:
  - {name: wc, type: wasm, path: components/word-count.wasm,
     input_schema: {type: object, properties: {text: {type: string}}, required: [text]}}
  - {name: strict, type: wasm, path: components/word-count.wasm,
     output_schema: {type: object, required: [sentiment]}}
  - {name: loose, type: wasm, path: components/word-count.wasm,
     output_schema: {type: object, properties: {words: {type: integer}}, required: [words]}}
";

/// Misbehaving guests, each with the limit that contains it, and word-count.
pub const HOSTILE: &str = "components:
  - {name: wc, type: wasm, path: components/word-count.wasm}
  - {name: spin-clock, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 1000}}
  - {name: spin-fuel, type: wasm, path: components/spin.wasm, limits: {fuel: 50000000}}
  - {name: spin-long, type: wasm, path: components/spin.wasm, limits: {timeout_ms: 30000}}
  - {name: bomb, type: wasm, path: components/memory_bomb.wasm, limits: {memory_mb: 32}}
  - {name: bomb16, type: wasm, path: components/memory_bomb.wasm, limits: {memory_mb: 16}}
  - {name: bomb48, type: wasm, path: components/memory_bomb.wasm, limits: {memory_mb: 48}}
  - {name: recurse, type: wasm, path: components/deep_recursion.wasm}
  - {name: flood, type: wasm, path: components/stdout_flood.wasm,
     limits: {timeout_ms: 1000, max_output_bytes: 1000}}
  - {name: exit, type: wasm, path: components/exit_code.wasm}
";

/// The project skill `name` with `skill.yaml` = `manifest`; every guest the
/// manifest names as `components/<guest>.wasm` is copied there.
pub fn yaml_skill(fx: &Fixture, name: &str, manifest: &str) -> PathBuf {
    skill_at(&fx.project_dir().join(name), manifest)
}

/// Like [`yaml_skill`] at any directory (e.g. one to `validate`); the skill
/// is named after the directory.
pub fn skill_at(dir: &Path, manifest: &str) -> PathBuf {
    let name = dir.file_name().unwrap().to_str().unwrap();
    fs::create_dir_all(dir).unwrap();
    let md = format!("---\nname: {name}\ndescription: Test skill {name}\n---\n# {name}\n");
    fs::write(dir.join("SKILL.md"), md).unwrap();
    fs::write(dir.join("skill.yaml"), manifest).unwrap();
    for name in GUESTS {
        let rel = format!("components/{name}.wasm");
        if manifest.contains(&rel) {
            copy_guest(dir, name, &rel);
        }
    }
    dir.to_path_buf()
}

/// Copy the built guest `name` to `<dir>/<rel>`.
pub fn copy_guest(dir: &Path, name: &str, rel: &str) {
    let to = dir.join(rel);
    fs::create_dir_all(to.parent().unwrap()).unwrap();
    fs::copy(guest(name), &to).unwrap();
}

/// A host over the fixture's workspace and state dir, without a global source.
pub fn config(fx: &Fixture) -> HostConfig {
    let mut config = HostConfig::new(fx.workspace()).with_state_dir(fx.state_dir());
    config.global_dir = None;
    config
}

pub fn host(fx: &Fixture) -> Host {
    Host::new(config(fx))
}

pub fn host_with(fx: &Fixture, tune: impl FnOnce(&mut HostConfig)) -> Host {
    let mut config = config(fx);
    tune(&mut config);
    Host::new(config)
}

pub fn request(name: &str, component: &str, input: Value) -> RunRequest {
    RunRequest {
        name: name.into(),
        component: component.into(),
        input: Some(input),
        revision: None,
        timeout_seconds: None,
    }
}

pub fn run(host: &Host, name: &str, component: &str, input: Value) -> Result<Envelope, HostError> {
    host.run(&request(name, component, input), &RunContext::default())
}

/// A run that must produce an envelope (not an `Err`).
pub fn envelope(host: &Host, name: &str, component: &str, input: Value) -> Envelope {
    run(host, name, component, input)
        .unwrap_or_else(|e| panic!("{name}/{component} did not run: {e}"))
}

/// A run that must be refused before anything ran.
pub fn refused(host: &Host, name: &str, component: &str, input: Value) -> HostError {
    match run(host, name, component, input) {
        Ok(envelope) => panic!("{name}/{component} ran: {envelope:#?}"),
        Err(error) => error,
    }
}

/// The invariants of every envelope; returns it as JSON.
pub fn well_formed(env: &Envelope) -> Value {
    let v = serde_json::to_value(env).unwrap();
    assert_eq!(
        (&v["kind"], &v["data"]["runtime"]),
        (&"execution".into(), &"wasi".into())
    );
    let d = &env.data;
    let started = humantime::parse_rfc3339(&d.started_at).expect("started_at is RFC 3339");
    let finished = humantime::parse_rfc3339(&d.finished_at).expect("finished_at is RFC 3339");
    assert!(finished >= started, "{} < {}", d.finished_at, d.started_at);
    let span = finished.duration_since(started).unwrap().as_secs_f64() * 1e3;
    assert!(
        (span - d.duration_ms).abs() <= 2.0,
        "{span} vs {}",
        d.duration_ms
    );
    uuid::Uuid::parse_str(&d.execution_id).expect("execution_id is a UUID");
    let hex = d.revision_id.strip_prefix("sha256:").expect("sha256:");
    assert_eq!(hex.len(), 64, "{}", d.revision_id);
    let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    assert!(hex.bytes().all(lower_hex), "{}", d.revision_id);
    v
}

/// A well-formed failed envelope of this kind, with a message.
pub fn failed(env: &Envelope, kind: ErrorKind) {
    well_formed(env);
    let d = &env.data;
    let why = format!("{:?}\nstderr: {}", d.error_message, d.stderr);
    assert_eq!(
        (d.status, d.error_kind),
        (Status::Failed, Some(kind)),
        "{why}"
    );
    assert!(!message(env).is_empty());
}

/// A well-formed successful envelope; returns its output_data.
pub fn succeeded(env: &Envelope) -> &Value {
    well_formed(env);
    let d = &env.data;
    let why = format!("{:?}\nstderr: {}", d.error_message, d.stderr);
    let expected = (Status::Succeeded, None, Some(0), None);
    assert_eq!(
        (
            d.status,
            d.error_kind,
            d.exit_code,
            d.error_message.as_deref()
        ),
        expected,
        "{why}"
    );
    d.output_data.as_ref().expect("output_data")
}

/// The envelope's error message ("" when none).
pub fn message(env: &Envelope) -> &str {
    env.data.error_message.as_deref().unwrap_or("")
}
