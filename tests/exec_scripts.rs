//! The bubblewrap script executor through the library `Host`: hostile
//! scripts are contained (and the host keeps working), well-behaved ones get
//! their input, imports, artifacts, permissions and schemas, and the
//! executor fails closed without a usable sandbox.
//!
//! Every test starts with `bwrap_available` and skips without bubblewrap.

mod common;

use std::fs;
use std::io::ErrorKind as IoKind;
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use skillhost::ErrorKind;
use skillhost::exec::{RunContext, SandboxKind, Status};
use skillhost::skill::manifest::{ComponentType, Runtime};

use common::scripts::{
    self, FIXED_ENV, REPORT_TXT, SANDBOX_UID, contain, contained, data_bin, environments,
    eventually, exclusive, hostile_skill, invisible, live_processes, probe, ran,
    script_well_formed, setup, sha256, shared, still_works, tree, with_cmdline,
};
use common::skills::{envelope, host_with, refused, request};
use common::{Fixture, bwrap_available};

const MIB: u64 = 1024 * 1024;

/// Skip the test (return) when bubblewrap is missing; otherwise hold the
/// sandbox user's lock: shared, or `exclusive` for tests that count or
/// exhaust its processes.
macro_rules! need_bwrap {
    ($test:literal) => {
        need_bwrap!($test, shared)
    };
    ($test:literal, $lock:ident) => {{
        if !bwrap_available($test) {
            return;
        }
        $lock()
    }};
}

/// The paths cannot be read inside the sandbox; SKILL.md can.
fn probe_invisible(paths: &[String]) {
    let (fx, host) = setup(|_| {});
    invisible(&probe(&fx, &host, paths), paths);
}

#[test]
fn host_system_files_are_invisible() {
    let _user = need_bwrap!("host_system_files_are_invisible");
    probe_invisible(&["/etc/shadow".into(), "/etc/passwd".into()]);
}

#[test]
fn the_host_home_is_invisible() {
    let _user = need_bwrap!("the_host_home_is_invisible");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    probe_invisible(&[home.clone(), format!("{home}/.bashrc"), "/root".into()]);
}

#[test]
fn a_secret_in_the_state_dir_is_invisible() {
    let _user = need_bwrap!("a_secret_in_the_state_dir_is_invisible");
    let (fx, host) = setup(|_| {});
    let secret = fx.state_dir().join("secret.txt");
    fs::write(&secret, "hunter2").unwrap();
    let paths = [
        secret.display().to_string(),
        fx.state_dir().display().to_string(),
    ];
    invisible(&probe(&fx, &host, &paths), &paths);
}

#[test]
fn files_of_the_test_crate_and_the_skill_host_path_are_invisible() {
    let _user = need_bwrap!("files_of_the_test_crate_and_the_skill_host_path_are_invisible");
    let (fx, host) = setup(|_| {});
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let paths = [
        format!("{crate_dir}/Cargo.toml"),
        format!("{crate_dir}/src/lib.rs"),
        fx.project_dir()
            .join("hostile/SKILL.md")
            .display()
            .to_string(),
    ];
    invisible(&probe(&fx, &host, &paths), &paths);
}

#[test]
fn the_skill_dir_is_read_only() {
    let _user = need_bwrap!("the_skill_dir_is_read_only");
    let (fx, host) = setup(|_| {});
    let dir = fx.project_dir().join("hostile");
    let before = tree(&dir);
    let env = envelope(&host, "hostile", "write-skill", json!({}));
    script_well_formed(&env, Runtime::Bash, SandboxKind::Bubblewrap);
    assert_eq!(env.data.stdout, "refused\nrefused\nrefused\n", "{env:#?}");
    assert!(
        env.data.stderr.contains("Read-only file system"),
        "{env:#?}"
    );
    assert_eq!(tree(&dir), before, "the installed skill changed");
    still_works(&host);
}

#[test]
fn the_network_is_unreachable() {
    let _user = need_bwrap!("the_network_is_unreachable");
    let (_fx, host) = setup(|_| {});
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let env = envelope(&host, "hostile", "net", json!({"port": port}));
    let out = ran(&env);
    assert_ne!(out["connect"], "connected", "{out}");
    assert!(
        out["connect"].is_string() && out["dns"].is_string(),
        "{out}"
    );
    assert_ne!(out["dns"], "resolved", "{out}");
    match listener.accept() {
        Err(e) if e.kind() == IoKind::WouldBlock => {}
        other => panic!("the host listener was reached: {other:?}"),
    }
    still_works(&host);
}

#[test]
fn a_fork_bomb_is_resource_exhausted_and_leaves_no_processes() {
    let _user = need_bwrap!(
        "a_fork_bomb_is_resource_exhausted_and_leaves_no_processes",
        exclusive
    );
    let before = live_processes(SANDBOX_UID);
    contain("forkbomb", ErrorKind::ResourceExhausted, |env, took| {
        assert!(took < Duration::from_secs(6), "{took:?}");
        assert!(
            env.data
                .error_message
                .as_deref()
                .unwrap()
                .contains("resource limit")
        );
        let settled = eventually(Duration::from_secs(1), || {
            live_processes(SANDBOX_UID) <= before
        });
        let after = live_processes(SANDBOX_UID);
        assert!(
            settled,
            "uid {SANDBOX_UID} had {before} processes, now {after}"
        );
    });
}

#[test]
fn a_memory_bomb_is_resource_exhausted_within_its_limit() {
    let _user = need_bwrap!("a_memory_bomb_is_resource_exhausted_within_its_limit");
    contain("membomb", ErrorKind::ResourceExhausted, |env, _| {
        let d = &env.data;
        assert_eq!(d.limits.memory_bytes, 128 * MIB);
        assert!(d.memory_peak_bytes <= 128 * MIB, "{}", d.memory_peak_bytes);
        assert!(d.memory_peak_bytes > 32 * MIB, "{}", d.memory_peak_bytes);
        assert!(d.stderr.contains("MemoryError"), "{}", d.stderr);
    });
}

#[test]
fn a_cpu_loop_times_out() {
    let _user = need_bwrap!("a_cpu_loop_times_out");
    contain("cpuloop", ErrorKind::ExecutionTimeout, |env, _| {
        let d = &env.data;
        assert!(
            (2000.0..5000.0).contains(&d.duration_ms),
            "{}",
            d.duration_ms
        );
        assert_eq!((d.exit_code, d.limits.timeout_ms), (None, 2000));
    });
}

#[test]
fn sleeping_past_the_timeout_times_out() {
    let _user = need_bwrap!("sleeping_past_the_timeout_times_out");
    contain("sleeper", ErrorKind::ExecutionTimeout, |env, took| {
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(env.data.duration_ms >= 1000.0, "{}", env.data.duration_ms);
        assert_eq!(env.data.exit_code, None);
    });
}

#[test]
fn a_detached_grandchild_does_not_outlive_the_run() {
    let _user = need_bwrap!("a_detached_grandchild_does_not_outlive_the_run");
    let fx = Fixture::new();
    let token = format!("skillhost-detach-{}", uuid::Uuid::new_v4());
    hostile_skill(&fx, &token);
    let host = host_with(&fx, |_| {});
    let env = envelope(&host, "hostile", "detach", json!({}));
    let alive = ran(&env)["alive"].as_u64().unwrap();
    assert!(alive >= 1, "the grandchild never started");
    let gone = eventually(Duration::from_secs(1), || with_cmdline(&token).is_empty());
    assert!(gone, "outlived the run: {:?}", with_cmdline(&token));
    still_works(&host);
}

#[test]
fn a_stdout_flood_is_truncated_and_times_out() {
    let _user = need_bwrap!("a_stdout_flood_is_truncated_and_times_out");
    contain("flood", ErrorKind::ExecutionTimeout, |env, took| {
        assert!(took < Duration::from_secs(3), "{took:?}");
        let d = &env.data;
        assert_eq!((d.stdout.len(), d.stdout_truncated), (1000, true));
        assert!(d.stdout.bytes().all(|b| b == b'x'));
        assert_eq!(d.output_data, None);
    });
}

#[test]
fn the_environment_is_the_fixed_minimum() {
    let _user = need_bwrap!("the_environment_is_the_fixed_minimum");
    let (_fx, host) = setup(|_| {});
    let (pid1, shell) = environments(&host);
    let fixed: Map<String, Value> = FIXED_ENV
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    assert_eq!(pid1, fixed);
    let mut shell = shell;
    for bash_own in ["SHLVL", "_"] {
        shell.remove(bash_own);
    }
    assert_eq!(shell, fixed);
    // The test process's own variables (set by cargo) never get in.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    for key in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "RUST_BACKTRACE"] {
        assert!(!pid1.contains_key(key), "{key}");
    }
    still_works(&host);
}

#[test]
fn only_declared_and_provided_env_keys_are_visible() {
    let _user = need_bwrap!("only_declared_and_provided_env_keys_are_visible");
    let (_fx, host) = setup(|c| {
        c.exec.env.insert("GREETING".into(), "hello there".into());
        c.exec
            .env
            .insert("SECRET_TOKEN".into(), "undeclared".into());
    });
    let (pid1, shell) = environments(&host);
    for seen in [&pid1, &shell] {
        assert_eq!(seen["GREETING"], "hello there", "{seen:#?}");
        assert!(!seen.contains_key("SECRET_TOKEN"), "{seen:#?}");
        assert!(
            !seen.contains_key("MISSING"),
            "declared, not provided: {seen:#?}"
        );
    }
    assert_eq!(pid1.len(), FIXED_ENV.len() + 1, "{pid1:#?}");
}

#[test]
fn tiocsti_injection_fails() {
    let _user = need_bwrap!("tiocsti_injection_fails");
    let (_fx, host) = setup(|_| {});
    let env = envelope(&host, "hostile", "tiocsti", json!({}));
    let result = ran(&env)["tiocsti"].as_str().unwrap().to_string();
    assert_ne!(result, "injected");
    assert!(result.contains("Error"), "{result}");
    still_works(&host);
}

#[test]
fn a_nested_user_namespace_fails() {
    let _user = need_bwrap!("a_nested_user_namespace_fails");
    let (_fx, host) = setup(|_| {});
    let env = envelope(&host, "hostile", "nested", json!({}));
    script_well_formed(&env, Runtime::Bash, SandboxKind::Bubblewrap);
    assert_eq!(env.data.stdout, "nested-refused\n", "{env:#?}");
    still_works(&host);
}

#[test]
fn a_python_script_reads_and_writes_json() {
    let _user = need_bwrap!("a_python_script_reads_and_writes_json");
    let (_fx, host) = setup(|_| {});
    let env = envelope(&host, "hostile", "ok", json!({"text": "hi", "n": [1, 2]}));
    let out = ran(&env);
    assert_eq!(out["echo"], json!({"text": "hi", "n": [1, 2]}));
    assert_eq!(
        (&out["cwd"], &out["home"]),
        (&json!("/skill"), &json!("/work"))
    );
    let d = &env.data;
    assert_eq!(
        (d.runtime, d.component_path.as_str()),
        (Runtime::Python, "scripts/echo.py")
    );
    assert!(d.cpu_time_ms > 0.0, "{}", d.cpu_time_ms);
    assert!(d.memory_peak_bytes > MIB, "{}", d.memory_peak_bytes);
    assert_eq!((d.fuel_consumed, d.limits.fuel), (None, None));
    assert_eq!(d.stderr, "");
    assert!(d.artifacts.is_empty(), "{:?}", d.artifacts);
}

#[test]
fn a_bash_script_reads_stdin() {
    let _user = need_bwrap!("a_bash_script_reads_stdin");
    let (_fx, host) = setup(|_| {});
    let input = json!({"text": "abc"});
    let env = envelope(&host, "hostile", "stdin", input.clone());
    assert_eq!(ran(&env)["len"], input.to_string().len());
    assert_eq!(env.data.runtime, Runtime::Bash);
}

#[test]
fn sibling_and_package_imports_work() {
    let _user = need_bwrap!("sibling_and_package_imports_work");
    let (_fx, host) = setup(|_| {});
    let env = envelope(&host, "hostile", "sibling", json!({"n": 21}));
    assert_eq!(ran(&env), &json!({"x": 42, "y": 2}));
}

#[test]
fn artifacts_are_listed_and_kept() {
    let _user = need_bwrap!("artifacts_are_listed_and_kept");
    let (fx, host) = setup(|_| {});
    let env = envelope(&host, "hostile", "artifacts", json!({}));
    ran(&env);
    let mut artifacts = env.data.artifacts.clone();
    artifacts.sort_by(|a, b| a.path.cmp(&b.path));
    let paths: Vec<&str> = artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(paths, ["report.txt", "sub/data.bin"]);
    let (report, data) = (&artifacts[0], &artifacts[1]);
    assert_eq!(
        (
            report.size,
            report.sha256.clone(),
            report.content.as_deref()
        ),
        (
            REPORT_TXT.len() as u64,
            sha256(REPORT_TXT.as_bytes()),
            Some(REPORT_TXT)
        )
    );
    let bin = data_bin();
    assert_eq!(
        (data.size, data.sha256.clone(), data.content.clone()),
        (bin.len() as u64, sha256(&bin), None)
    );
    let run_dir = fx
        .state_dir()
        .join("artifacts")
        .join(&env.data.execution_id);
    for (artifact, bytes) in [(report, REPORT_TXT.as_bytes()), (data, &bin[..])] {
        let kept = Path::new(artifact.kept_at.as_deref().expect("kept_at"));
        assert!(kept.starts_with(&run_dir), "{kept:?} not under {run_dir:?}");
        assert_eq!(fs::read(kept).unwrap(), bytes);
    }
}

#[test]
fn artifacts_are_not_kept_without_retention() {
    let _user = need_bwrap!("artifacts_are_not_kept_without_retention");
    let (fx, host) = setup(|c| c.exec.artifact_retention_secs = 0);
    let env = envelope(&host, "hostile", "artifacts", json!({}));
    ran(&env);
    assert_eq!(env.data.artifacts.len(), 2, "{:?}", env.data.artifacts);
    assert!(env.data.artifacts.iter().all(|a| a.kept_at.is_none()));
    assert!(
        !fx.state_dir()
            .join("artifacts")
            .join(&env.data.execution_id)
            .exists()
    );
}

#[test]
fn a_write_permission_gets_a_private_copy() {
    let _user = need_bwrap!("a_write_permission_gets_a_private_copy");
    let (fx, host) = setup(|_| {});
    let out_dir = fx.project_dir().join("hostile/out");
    let before = tree(&out_dir);
    for _ in 0..2 {
        let env = envelope(&host, "hostile", "writer", json!({}));
        let out = ran(&env);
        assert_eq!(out["x"], "new file");
        // Each run starts from the installed content, not the last run's.
        assert_eq!(out["keep"], "original changed");
        assert_eq!(out["listing"], json!(["keep.txt", "x"]));
    }
    assert_eq!(tree(&out_dir), before, "the installed out/ changed");
}

#[test]
fn schemas_apply_to_scripts() {
    let _user = need_bwrap!("schemas_apply_to_scripts");
    let (_fx, host) = setup(|_| {});
    let error = refused(&host, "hostile", "typed", json!({"n": "three"}));
    assert_eq!(error.kind, ErrorKind::InvalidInput, "{error}");
    assert!(error.message.contains("input_schema"), "{error}");
    let env = envelope(&host, "hostile", "typed", json!({"n": 3}));
    assert_eq!(ran(&env), &json!({"doubled": 6}));
    let env = envelope(&host, "hostile", "typed", json!({"n": 0}));
    contained(&env, ErrorKind::OutputSchemaMismatch);
    assert_eq!(env.data.exit_code, Some(0));
    assert_eq!(env.data.output_data, Some(json!({"wrong": 1})));
}

#[test]
fn a_non_zero_exit_is_a_script_error() {
    let _user = need_bwrap!("a_non_zero_exit_is_a_script_error");
    contain("exit3", ErrorKind::ScriptExecutionError, |env, _| {
        assert_eq!(env.data.exit_code, Some(3));
        assert_eq!(env.data.stderr, "about to fail\n");
    });
}

#[test]
fn scripts_without_a_manifest_are_implied_components() {
    let _user = need_bwrap!("scripts_without_a_manifest_are_implied_components");
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "implied", "No skill.yaml");
    fx.file(&dir, "scripts/hello.py", scripts::ECHO_PY);
    let host = host_with(&fx, |_| {});
    let loaded = host.load("implied").unwrap();
    let hello = loaded.components.iter().find(|c| c.name == "hello");
    let hello = hello.unwrap_or_else(|| panic!("{:#?}", loaded.components));
    assert_eq!(hello.kind, ComponentType::Script);
    assert_eq!(hello.path, "scripts/hello.py");
    assert_eq!(hello.effective_runtime(), Some(Runtime::Python));
    let env = envelope(&host, "implied", "hello", json!({"k": 1}));
    assert_eq!(ran(&env)["echo"], json!({"k": 1}));
}

#[test]
fn cancelling_stops_a_sleeping_script() {
    let _user = need_bwrap!("cancelling_stops_a_sleeping_script");
    let (_fx, host) = setup(|_| {});
    let cancel = Arc::new(AtomicBool::new(false));
    let context = RunContext {
        cancel: Some(Arc::clone(&cancel)),
        progress: None,
    };
    let req = request("hostile", "sleep-long", json!({}));
    let started = Instant::now();
    let env = std::thread::scope(|s| {
        let run = s.spawn(|| host.run(&req, &context));
        std::thread::sleep(Duration::from_millis(500));
        cancel.store(true, Ordering::Relaxed);
        run.join().unwrap().unwrap()
    });
    let took = started.elapsed();
    script_well_formed(&env, Runtime::Bash, SandboxKind::Bubblewrap);
    let d = &env.data;
    assert_eq!(
        (d.status, d.error_kind),
        (Status::Cancelled, Some(ErrorKind::Cancelled))
    );
    assert_eq!(d.exit_code, None);
    assert!(took < Duration::from_secs(3), "{took:?}");
    still_works(&host);
}
