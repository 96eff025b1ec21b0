//! The WebAssembly executor's contract through the library `Host`:
//! permissions, schemas, refusals, revisions, the artifact cache and
//! `validate`.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::Duration;

use serde_json::{Value, json};
use skillhost::exec::RunContext;
use skillhost::{ErrorKind, Host};

use common::Fixture;
use common::skills::{
    ECHO, SCHEMAS, copy_guest, envelope, failed, host, host_with, message, refused, request,
    skill_at, succeeded, yaml_skill,
};

/// The permission probe: `data` and `linked` (a symlink to `real`, inside
/// the skill) readable, `out` writable, and the `GREETING` key.
const PROBE: &str = "components:
  - name: probe
    type: wasm
    path: components/probe.wasm
    permissions:
      filesystem: [{path: data}, {path: linked, access: read}, {path: out, access: write}]
      env: [GREETING]
";

fn probe_host(fx: &Fixture) -> (Host, PathBuf) {
    let dir = yaml_skill(fx, "probe", PROBE);
    fx.file(&dir, "data/table.csv", "a,b\n1,2\n");
    fx.file(&dir, "out/existing.txt", "original");
    fx.file(&dir, "real/inside.txt", "inside");
    symlink("real", dir.join("linked")).unwrap();
    symlink("/etc/passwd", dir.join("data/passwd")).unwrap();
    symlink("/etc/passwd", dir.join("out/passwd")).unwrap();
    let host = host_with(fx, |c| {
        c.exec.env.insert("GREETING".into(), "Howdy".into());
        c.exec.env.insert("SECRET".into(), "s3cret".into());
    });
    (host, dir)
}

/// Run the probe; return (ok, detail).
fn probe(host: &Host, input: Value) -> (bool, String) {
    let env = envelope(host, "probe", "probe", input.clone());
    let out = succeeded(&env);
    assert_eq!(out["op"], input["op"]);
    let detail = out["detail"].as_str().unwrap().to_string();
    (out["ok"].as_bool().unwrap(), detail)
}

#[test]
fn probe_sees_only_declared_directories() {
    let fx = Fixture::new();
    let (host, dir) = probe_host(&fx);
    let read = |path: &str| probe(&host, json!({"op": "read", "path": path}));
    assert_eq!(read("data/table.csv"), (true, "a,b\n1,2\n".into()));
    assert_eq!(read("linked/inside.txt"), (true, "inside".into()));
    let outside = ["/etc/passwd", "../SKILL.md", "data/../SKILL.md", "SKILL.md"];
    for path in outside.into_iter().chain(["data/passwd", "out/passwd"]) {
        let (ok, detail) = read(path);
        assert!(!ok, "{path} was readable: {detail}");
    }
    let list = |path: &str| probe(&host, json!({"op": "list", "path": path}));
    assert_eq!(list("data"), (true, "passwd,table.csv".into()));
    // Symlinks are not copied into the writable copy.
    assert_eq!(list("out"), (true, "existing.txt".into()));
    assert!(!list("/").0 && !list(".").0);
    let write =
        |path: &str, text: &str| probe(&host, json!({"op": "write", "path": path, "text": text}));
    assert!(!write("data/new.txt", "x").0);
    assert!(!dir.join("data/new.txt").exists());
    let written = (true, "written".to_string());
    assert_eq!(write("out/existing.txt", "changed"), written);
    assert_eq!(write("out/new.txt", "fresh"), written);
    // Writes land in a per-run copy: the installed skill never changes, and
    // the next run starts from the original again.
    let existing = fs::read_to_string(dir.join("out/existing.txt")).unwrap();
    assert_eq!(existing, "original");
    assert!(!dir.join("out/new.txt").exists());
    assert_eq!(read("out/existing.txt"), (true, "original".into()));
    assert!(!read("out/new.txt").0);
}

#[test]
fn probe_sees_only_declared_env_keys_and_no_network() {
    let fx = Fixture::new();
    let (host, _) = probe_host(&fx);
    let env = |key: &str| probe(&host, json!({"op": "env", "key": key}));
    assert_eq!(env("GREETING"), (true, "Howdy".into()));
    let hidden = (false, "not set; visible keys: [GREETING]".to_string());
    for key in ["SECRET", "HOME", "PATH", "UNSET_KEY"] {
        assert_eq!(env(key), hidden, "{key}");
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (ok, detail) = probe(&host, json!({"op": "connect", "addr": addr}));
    assert!(!ok, "connected: {detail}");
    listener.set_nonblocking(true).unwrap();
    let accepted = listener.accept().map(|_| ()).map_err(|e| e.kind());
    assert_eq!(accepted, Err(std::io::ErrorKind::WouldBlock));
}

#[test]
fn capabilities_that_cannot_be_granted_are_refused_before_running() {
    let fx = Fixture::new();
    let yaml = "components:
  - {name: net, type: wasm, path: components/probe.wasm, permissions: {network: [example.com]}}
  - {name: etc, type: wasm, path: components/probe.wasm, permissions: {filesystem: [{path: data}]}}
  - {name: nope, type: wasm, path: components/probe.wasm, permissions: {filesystem: [{path: nope}]}}
  - {name: big, type: wasm, path: components/probe.wasm,
     permissions: {filesystem: [{path: big, access: write}]}}
";
    let dir = yaml_skill(&fx, "caps", yaml);
    symlink("/etc", dir.join("data")).unwrap();
    fx.file(&dir, "big/blob.bin", vec![7u8; 4096]);
    let host = host_with(&fx, |c| c.exec.max_scratch_bytes = 1024);
    let input = json!({"op": "read", "path": "data/passwd"});
    let check = |component: &str, kind: ErrorKind, needle: &str| {
        let error = refused(&host, "caps", component, input.clone());
        assert_eq!(error.kind, kind, "{component}: {error}");
        assert!(error.message.contains(needle), "{component}: {error}");
    };
    check("net", ErrorKind::AccessDenied, "example.com");
    check("etc", ErrorKind::AccessDenied, "`data`");
    check("nope", ErrorKind::FileNotFound, "`nope`");
    check("big", ErrorKind::ResourceExhausted, "bytes");
}

#[test]
fn input_and_output_schemas_are_enforced() {
    let fx = Fixture::new();
    yaml_skill(&fx, "schemas", SCHEMAS);
    let host = host(&fx);
    let invalid = |input: Value, needles: &[&str]| {
        let error = refused(&host, "schemas", "wc", input);
        assert_eq!(error.kind, ErrorKind::InvalidInput, "{error}");
        for needle in needles {
            assert!(error.message.contains(needle), "{needle}: {error}");
        }
    };
    invalid(json!({}), &["at /:", "text"]);
    invalid(json!({"text": 5}), &["at /text"]);
    for input in [json!(["text"]), json!("text"), json!(null)] {
        invalid(input, &["JSON object"]);
    }
    let env = envelope(&host, "schemas", "strict", json!({"text": "a b"}));
    failed(&env, ErrorKind::OutputSchemaMismatch);
    assert_eq!(env.data.exit_code, Some(0));
    assert_eq!(env.data.output_data.as_ref().unwrap()["words"], 2);
    assert!(message(&env).contains("sentiment"), "{env:?}");
    let env = envelope(&host, "schemas", "loose", json!({"text": "a b"}));
    assert_eq!(succeeded(&env)["words"], 2);
}

#[test]
fn components_that_cannot_run_are_refused_with_their_kind() {
    let fx = Fixture::new();
    let yaml = "components:
  - {name: echo, type: wasm, path: components/echo.wasm}
  - {name: guide, type: reference, path: references/guide.md}
  - {name: tool, type: script, path: scripts/x.py}
  - {name: junk, type: wasm, path: components/junk.wasm}
  - {name: core, type: wasm, path: components/core.wasm}
  - {name: gone, type: wasm, path: components/gone.wasm}
";
    let dir = yaml_skill(&fx, "kinds", yaml);
    fx.file(&dir, "references/guide.md", "# Guide\n");
    fx.file(&dir, "scripts/x.py", "print('hi')\n");
    let noise: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    fx.file(&dir, "components/junk.wasm", noise);
    fx.file(&dir, "components/core.wasm", b"\0asm\x01\0\0\0");
    let broken = "components:\n  - {name: echo, type: wasm, path: components/echo.wasm, x: 1}\n";
    yaml_skill(&fx, "broken", broken);
    let host = host(&fx);
    let kind = |skill: &str, component: &str| refused(&host, skill, component, json!({}));
    let error = kind("kinds", "nope");
    assert_eq!(error.kind, ErrorKind::ComponentNotFound);
    let all = "it has: echo, guide, tool, junk, core, gone";
    assert!(error.message.contains(all), "{error}");
    assert_eq!(kind("kinds", "guide").kind, ErrorKind::InvalidComponentType);
    assert_eq!(kind("kinds", "junk").kind, ErrorKind::InvalidComponentType);
    assert_eq!(kind("kinds", "core").kind, ErrorKind::InvalidComponentType);
    assert_eq!(kind("kinds", "gone").kind, ErrorKind::FileNotFound);
    let error = kind("broken", "echo");
    assert_eq!(error.kind, ErrorKind::ComponentNotFound);
    assert!(error.message.contains("skill.yaml"), "{error}");
    assert_eq!(kind("no-such-skill", "echo").kind, ErrorKind::SkillNotFound);
    succeeded(&envelope(&host, "kinds", "echo", json!({})));
}

#[test]
fn without_a_manifest_component_files_are_runnable_by_stem() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "implied", "No manifest");
    copy_guest(&dir, "echo", "components/echo.wasm");
    let host = host(&fx);
    let loaded = host.load("implied").unwrap();
    let names: Vec<_> = loaded
        .components
        .iter()
        .map(|c| (&*c.name, &*c.path))
        .collect();
    assert_eq!(names, [("echo", "components/echo.wasm")]);
    let env = envelope(&host, "implied", "echo", json!({"k": "v"}));
    assert_eq!(succeeded(&env), &json!({"k": "v"}));
    assert_eq!(env.data.limits.timeout_ms, 30_000);
}

#[test]
fn a_revision_pins_the_skill_and_component_bytes() {
    let fx = Fixture::new();
    let dir = yaml_skill(&fx, "rev", ECHO);
    let host = host(&fx);
    let pinned = |revision: &str| {
        let mut req = request("rev", "echo", json!({}));
        req.revision = Some(revision.to_string());
        host.run(&req, &RunContext::default())
    };
    let rev = envelope(&host, "rev", "echo", json!({})).data.revision_id;
    assert_eq!(pinned(&rev).unwrap().data.revision_id, rev);
    let error = pinned(&format!("sha256:{}", "0".repeat(64))).unwrap_err();
    assert_eq!(error.kind, ErrorKind::RevisionNotFound);
    assert!(error.message.contains(&rev), "{error}");
    fs::write(dir.join("skill.yaml"), format!("version: 2.0.0\n{ECHO}")).unwrap();
    assert_eq!(pinned(&rev).unwrap_err().kind, ErrorKind::RevisionNotFound);
    let second = envelope(&host, "rev", "echo", json!({})).data.revision_id;
    assert_ne!(second, rev);
    assert_eq!(pinned(&second).unwrap().data.revision_id, second);
    // The component's bytes count too.
    copy_guest(&dir, "word-count", "components/echo.wasm");
    let error = pinned(&second).unwrap_err();
    assert_eq!(error.kind, ErrorKind::RevisionNotFound);
}

#[test]
fn timeout_seconds_must_be_within_bounds() {
    let fx = Fixture::new();
    yaml_skill(&fx, "t", ECHO);
    let host = host(&fx);
    let with = |seconds: f64| {
        let mut req = request("t", "echo", json!({}));
        req.timeout_seconds = Some(seconds);
        host.run(&req, &RunContext::default())
    };
    for bad in [0.5, 1000.0, 60.5, -1.0, f64::NAN] {
        let error = with(bad).unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidInput, "{bad}: {error}");
    }
    let env = with(1.0).unwrap();
    succeeded(&env);
    assert_eq!(env.data.limits.timeout_ms, 1000);
    assert_eq!(with(60.0).unwrap().data.limits.timeout_ms, 60_000);
}

fn artifacts(state: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(state.join("cache/wasm"))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.retain(|p| p.extension().is_some_and(|e| e == "cwasm"));
    out.sort();
    out
}

#[test]
fn compiled_artifacts_are_reused_across_hosts_and_rebuilt_when_corrupt() {
    use std::os::unix::fs::MetadataExt;
    let fx = Fixture::new();
    yaml_skill(&fx, "cached", ECHO);
    let input = json!({"cached": 1});
    let echo = || envelope(&host(&fx), "cached", "echo", input.clone());
    assert!(artifacts(&fx.state_dir()).is_empty());
    assert_eq!(succeeded(&echo()), &input);
    let found = artifacts(&fx.state_dir());
    assert_eq!(found.len(), 1, "{found:?}");
    let artifact = found[0].clone();
    let stamp = |p: &Path| {
        let m = fs::metadata(p).unwrap();
        (m.ino(), m.mtime(), m.mtime_nsec(), m.len())
    };
    let before = stamp(&artifact);
    sleep(Duration::from_millis(20));
    assert_eq!(succeeded(&echo()), &input);
    assert_eq!(stamp(&artifact), before, "a new host rewrote the artifact");
    assert_eq!(artifacts(&fx.state_dir()), std::slice::from_ref(&artifact));

    let garbage = b"not a compiled component ".repeat(64);
    fs::write(&artifact, &garbage).unwrap();
    assert_eq!(succeeded(&echo()), &input);
    let rebuilt = fs::read(&artifact).unwrap();
    assert!(rebuilt.starts_with(b"\x7fELF"), "not rebuilt");
}

#[test]
fn validate_reports_worlds_and_every_kind_of_problem() {
    let fx = Fixture::new();
    let host = host(&fx);
    let good = skill_at(
        &fx.path().join("v/good"),
        "components:
  - {name: wc, type: wasm, path: components/word-count.wasm}
  - {name: greet, type: wasm, path: components/greeter.wasm, permissions: {filesystem: [{path: data}]}}
  - {name: tool, type: script, path: scripts/x.py}
",
    );
    fx.file(&good, "scripts/x.py", "print(1)\n");
    fs::create_dir_all(good.join("data")).unwrap();
    let report = host.validate(&good);
    assert!(report.ok && report.errors.is_empty(), "{report:#?}");
    assert_eq!(report.skill.as_deref(), Some("good"));
    let worlds: Vec<_> = report
        .components
        .iter()
        .map(|c| (&*c.name, c.world.as_deref()))
        .collect();
    let expected = [
        ("wc", Some("wasi:cli/command")),
        ("greet", Some("skillhost:skill/skill")),
        ("tool", None),
    ];
    assert_eq!(worlds, expected);

    let cases = [
        "path: gone.wasm => gone.wasm",
        "path: c.wasm, input_schema: {type: nope} => input_schema is not a valid JSON Schema",
        "path: junk.wasm => not a valid WebAssembly component",
        "path: c.wasm, permissions: {filesystem: [{path: data}]} => `data` does not exist",
        "path: c.wasm, permissions: {network: [example.com]} => example.com",
    ];
    for (i, case) in cases.into_iter().enumerate() {
        let (component, why) = case.split_once(" => ").unwrap();
        let yaml = format!("components:\n  - {{name: c, type: wasm, {component}}}\n");
        let dir = skill_at(&fx.path().join(format!("v/bad{i}")), &yaml);
        copy_guest(&dir, "word-count", "c.wasm");
        fx.file(&dir, "junk.wasm", "definitely not wasm");
        let report = host.validate(&dir);
        let errors = &report.errors;
        assert!(!report.ok && errors.len() == 1, "{component}: {report:#?}");
        assert!(errors[0].starts_with("component `c`:"), "{report:#?}");
        assert!(errors[0].contains(why), "{component}: {report:#?}");
    }
}

/// `validate` should refuse what `run` refuses: a declared directory that is
/// a symlink leading outside the skill is ACCESS_DENIED at run time.
#[test]
fn validate_flags_a_declared_directory_that_leads_outside_the_skill() {
    let fx = Fixture::new();
    let yaml = "components:
  - {name: c, type: wasm, path: components/echo.wasm, permissions: {filesystem: [{path: etc}]}}
";
    let dir = yaml_skill(&fx, "escape", yaml);
    symlink("/etc", dir.join("etc")).unwrap();
    let host = host(&fx);
    let error = refused(&host, "escape", "c", json!({}));
    assert_eq!(error.kind, ErrorKind::AccessDenied, "{error}");
    let report = host.validate(&dir);
    assert!(!report.ok, "validate accepts what run refuses: {report:#?}");
    let flagged = report.errors.iter().any(|e| e.contains("`etc`"));
    assert!(flagged, "{report:#?}");
}
