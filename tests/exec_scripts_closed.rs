//! The bubblewrap script executor fails closed without a usable sandbox
//! (missing, too old, unreadable skill), runs unsandboxed only when the
//! operator allows it, and keeps the fixes for bugs the tests found.
//!
//! Every test starts with `bwrap_available` and skips without bubblewrap.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;
use skillhost::ErrorKind;
use skillhost::exec::{SandboxKind, Status};
use skillhost::skill::manifest::Runtime;

use common::scripts::{
    self, contain, contained, exclusive, fake_bwrap, hostile_skill, ran, script_well_formed, setup,
    shared,
};
use common::skills::{envelope, host_with, skill_at};
use common::{Fixture, bwrap_available};

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

#[test]
fn a_missing_bwrap_fails_closed() {
    let _user = need_bwrap!("a_missing_bwrap_fails_closed");
    let (fx, host) = setup(|c| c.exec.bwrap_path = Some("/nonexistent/bwrap".into()));
    // Not refused up front: an envelope that says nothing ran.
    let env = envelope(&host, "hostile", "ok", json!({}));
    contained(&env, ErrorKind::SandboxUnavailable);
    let d = &env.data;
    assert_eq!((d.exit_code, d.stdout.as_str()), (None, ""));
    assert!(
        d.error_message
            .as_deref()
            .unwrap()
            .contains("/nonexistent/bwrap")
    );
    let report = host.validate(&fx.project_dir().join("hostile"));
    assert!(!report.ok, "{report:#?}");
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("component `ok`") && e.contains("bubblewrap")),
        "{report:#?}"
    );
}

#[test]
fn validate_accepts_scripts_with_a_usable_sandbox() {
    let _user = need_bwrap!("validate_accepts_scripts_with_a_usable_sandbox");
    let (fx, host) = setup(|_| {});
    let report = host.validate(&fx.project_dir().join("hostile"));
    assert!(report.ok, "{report:#?}");
    let ok = report.components.iter().find(|c| c.name == "ok").unwrap();
    assert_eq!(
        (ok.runtime, ok.world.as_deref()),
        (Some(Runtime::Python), None)
    );
}

#[test]
fn a_too_old_bwrap_fails_closed() {
    let _user = need_bwrap!("a_too_old_bwrap_fails_closed");
    let fx = Fixture::new();
    hostile_skill(&fx, "unused");
    let fake = fake_bwrap(fx.path(), "0.7.0");
    let host = host_with(&fx, |c| c.exec.bwrap_path = Some(fake));
    let env = envelope(&host, "hostile", "ok", json!({}));
    contained(&env, ErrorKind::SandboxUnavailable);
    assert!(
        env.data.error_message.as_deref().unwrap().contains("0.7.0"),
        "{env:#?}"
    );
}

#[test]
fn unsandboxed_scripts_run_only_when_allowed() {
    let _user = need_bwrap!("unsandboxed_scripts_run_only_when_allowed");
    let (_fx, host) = setup(|c| {
        c.exec.bwrap_path = Some("/nonexistent/bwrap".into());
        c.exec.allow_unsandboxed_scripts = true;
    });
    let env = envelope(&host, "hostile", "ok", json!({"x": 1}));
    script_well_formed(&env, Runtime::Python, SandboxKind::None);
    assert_eq!(
        serde_json::to_value(&env).unwrap()["data"]["sandbox"],
        "none"
    );
    assert_eq!(
        (env.data.status, env.data.exit_code),
        (Status::Succeeded, Some(0))
    );
    assert_eq!(
        env.data.output_data.as_ref().unwrap()["echo"],
        json!({"x": 1})
    );
}

/// A host running as root starts bwrap as `nobody`: a skill it cannot
/// enter is refused with SANDBOX_UNAVAILABLE, not blamed on the script.
#[test]
fn a_skill_nobody_cannot_enter_is_sandbox_unavailable() {
    let _user = need_bwrap!("a_skill_nobody_cannot_enter_is_sandbox_unavailable");
    // SAFETY: a plain syscall without arguments.
    if unsafe { libc::geteuid() } != 0 {
        return; // the sandbox runs as this user, who can read the skill
    }
    let (fx, host) = setup(|_| {});
    let private = fs::Permissions::from_mode(0o700);
    fs::set_permissions(fx.path(), private).unwrap();
    let env = envelope(&host, "hostile", "ok", json!({}));
    contained(&env, ErrorKind::SandboxUnavailable);
    let why = env.data.error_message.as_deref().unwrap();
    let root = fx.path().display().to_string();
    assert!(why.contains(&root) && why.contains("chmod"), "{why}");
    assert_eq!(env.data.exit_code, None);
}

// ---- Regressions: bugs these tests found ----

/// `validate` of a skill without skill.yaml only implies wasm components:
/// the `scripts/*.py` that `load` and `run` treat as components are neither
/// listed nor checked.
#[test]
fn validate_checks_implied_script_components() {
    let _user = need_bwrap!("validate_checks_implied_script_components");
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "implied", "No skill.yaml");
    fx.file(&dir, "scripts/hello.py", scripts::ECHO_PY);
    let report = host_with(&fx, |_| {}).validate(&dir);
    let names: Vec<&str> = report.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["hello"], "{report:#?}");
    let broken = host_with(&fx, |c| {
        c.exec.bwrap_path = Some("/nonexistent/bwrap".into())
    });
    assert!(!broken.validate(&dir).ok);
}

/// "64 extra processes": the RLIMIT_NPROC budget is every task on the host
/// (from /proc/loadavg) plus 64, so the more loaded the host, the more a
/// script may fork.
#[test]
fn a_run_gets_at_most_64_extra_processes() {
    let _user = need_bwrap!("a_run_gets_at_most_64_extra_processes", exclusive);
    let fx = Fixture::new();
    let manifest = "components:\n  - {name: count, type: script, path: scripts/count.py}\n";
    let dir = skill_at(&fx.project_dir().join("counter"), manifest);
    let count = "import json, os, time\nn = 0\nwhile True:\n    try: pid = os.fork()\n    except OSError: break\n    if pid == 0:\n        time.sleep(30); os._exit(0)\n    n += 1\nprint(json.dumps({\"forked\": n}))\n";
    fx.file(&dir, "scripts/count.py", count);
    let host = host_with(&fx, |_| {});
    let env = envelope(&host, "counter", "count", json!({}));
    let forked = ran(&env)["forked"].as_u64().unwrap();
    assert!(forked <= 64, "a script forked {forked} processes");
}

/// A run killed at its deadline reports the CPU time of bwrap alone (a few
/// ms), not of the script that spun for the whole timeout.
#[test]
fn a_timed_out_cpu_loop_reports_the_cpu_it_used() {
    let _user = need_bwrap!("a_timed_out_cpu_loop_reports_the_cpu_it_used");
    contain("cpuloop", ErrorKind::ExecutionTimeout, |env, _| {
        assert!(
            env.data.cpu_time_ms >= 1000.0,
            "cpu_time_ms {}",
            env.data.cpu_time_ms
        );
    });
}
