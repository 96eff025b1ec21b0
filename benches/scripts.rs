//! Script components through `skill_run` against the same bare bubblewrap
//! command, in one run. Target: overhead ratio <= 1.15 for Python and Bash
//! hello scripts.
//!
//! Run with `cargo bench --bench scripts` (needs bubblewrap).

use std::fs;
use std::hint::black_box;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use skillhost::api::RunRequest;
use skillhost::exec::{RunContext, Status};
use skillhost::{Host, HostConfig};

const PYTHON: &str =
    "import json, sys\nprint(json.dumps({\"hello\": json.load(sys.stdin)[\"name\"]}))\n";
const BASH: &str = "read -r line\necho \"{\\\"hello\\\": ${#line}}\"\n";

/// The flags skillhost uses, for the bare comparison.
fn bare(skill: &Path, interpreter: &str, script: &str) -> Command {
    let mut command = Command::new("/usr/bin/bwrap");
    command.args([
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup",
        "--as-pid-1",
        "--disable-userns",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        "/work",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/work",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
    ]);
    command
        .arg(skill)
        .args(["/skill", "--chdir", "/skill", "--", interpreter, script]);
    command
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        command.uid(65534).gid(65534);
    }
    command
}

fn run_bare(command: &mut Command, input: &[u8]) {
    let mut child = command.spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input).unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success() && !out.stdout.is_empty());
    black_box(out);
}

fn benches(c: &mut Criterion) {
    if !Path::new("/usr/bin/bwrap").is_file() {
        eprintln!("SKIPPED: bubblewrap is not installed");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let skill = root.path().join("ws/.agents/skills/hello");
    fs::create_dir_all(skill.join("scripts")).unwrap();
    fs::write(
        skill.join("SKILL.md"),
        "---\nname: hello\ndescription: Hello scripts\n---\nBody\n",
    )
    .unwrap();
    fs::write(skill.join("scripts/hello.py"), PYTHON).unwrap();
    fs::write(skill.join("scripts/hello.sh"), BASH).unwrap();
    // The sandbox user must be able to read the skill.
    for dir in [root.path().to_path_buf(), root.path().join("ws")] {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut config =
        HostConfig::new(root.path().join("ws")).with_state_dir(root.path().join("state"));
    config.global_dir = None;
    config.exec.artifact_retention_secs = 0;
    let host = Host::new(config);
    let input = json!({"name": "bench"});

    let mut group = c.benchmark_group("script_hello");
    group
        .sample_size(40)
        .measurement_time(Duration::from_secs(8));
    for (component, interpreter, script) in [
        ("hello", "/usr/bin/python3", "scripts/hello.py"),
        ("hello.sh", "/usr/bin/bash", "scripts/hello.sh"),
    ] {
        let runtime = if interpreter.ends_with("bash") {
            "bash"
        } else {
            "python"
        };
        let request = RunRequest {
            name: "hello".into(),
            component: if component == "hello.sh" {
                "scripts/hello.sh".into()
            } else {
                component.into()
            },
            input: Some(input.clone()),
            revision: None,
            timeout_seconds: None,
        };
        group.bench_function(format!("{runtime}/skill_run"), |b| {
            b.iter(|| {
                let envelope = host.run(&request, &RunContext::default()).unwrap();
                assert_eq!(
                    envelope.data.status,
                    Status::Succeeded,
                    "{:?}",
                    envelope.data.stderr
                );
                black_box(envelope);
            })
        });
        let bytes = input.to_string().into_bytes();
        group.bench_function(format!("{runtime}/bare_bwrap"), |b| {
            b.iter(|| run_bare(&mut bare(&skill, interpreter, script), &bytes))
        });
    }
    group.finish();
}

criterion_group!(scripts, benches);
criterion_main!(scripts);
