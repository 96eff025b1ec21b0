//! Fixture skills with Python and Bash components (the hostile scripts and
//! a few well-behaved ones), envelope checks for sandboxed runs, and probes
//! of the host's process table.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use skillhost::exec::{Envelope, SandboxKind, Status};
use skillhost::skill::manifest::Runtime;
use skillhost::{ErrorKind, Host, HostConfig};

use super::Fixture;
use super::skills::{envelope, host_with, message, skill_at};

/// The uid the host (running as root) starts bubblewrap as.
pub const SANDBOX_UID: u32 = 65534;

/// Echoes its JSON input back with the working directory.
pub const ECHO_PY: &str = r#"import json, os, sys
data = json.load(sys.stdin)
print(json.dumps({"echo": data, "cwd": os.getcwd(), "home": os.environ.get("HOME")}))
"#;

/// Reads stdin (the input JSON, one line) and reports its length.
pub const STDIN_SH: &str = "read -r line\necho \"{\\\"len\\\": ${#line}}\"\n";

/// For each of `paths`: `missing`, `read N` (file), `listed N` (dir) or `error: Kind`.
pub const PROBE_PY: &str = r#"import json, os, sys
out = {}
for p in json.load(sys.stdin)["paths"]:
    try:
        if not os.path.lexists(p):
            out[p] = "missing"
        elif os.path.isdir(p):
            out[p] = "listed %d" % len(os.listdir(p))
        else:
            with open(p, "rb") as f: out[p] = "read %d" % len(f.read())
    except Exception as e: out[p] = "error: %s" % type(e).__name__
print(json.dumps(out))
"#;

/// Tries to overwrite SKILL.md (absolute and relative) and to create a file.
pub const WRITE_SKILL_SH: &str = r#"if echo pwned > /skill/SKILL.md; then echo wrote; else echo refused; fi
if echo pwned > SKILL.md; then echo wrote; else echo refused; fi
if echo pwned > scripts/new.sh; then echo wrote; else echo refused; fi
"#;

/// Connects to 127.0.0.1:`port` and resolves example.com.
pub const NET_PY: &str = r#"import json, socket, sys
req = json.load(sys.stdin); out = {}
try:
    socket.create_connection(("127.0.0.1", req["port"]), timeout=2); out["connect"] = "connected"
except Exception as e: out["connect"] = type(e).__name__
try:
    socket.getaddrinfo("example.com", 80); out["dns"] = "resolved"
except Exception as e: out["dns"] = type(e).__name__
print(json.dumps(out))
"#;

pub const FORKBOMB_PY: &str = "import os\nwhile True:\n    os.fork()\n";
pub const MEMBOMB_PY: &str = "x = []\nwhile True: x.append(bytearray(10*1024*1024))\n";
pub const CPULOOP_PY: &str = "while True: pass\n";
pub const SLEEP_SH: &str = "sleep 100\n";
pub const FLOOD_PY: &str = "import sys\nwhile True: sys.stdout.write(\"x\"*65536)\n";

/// PID 1's environment, a separator, then `env`.
pub const ENVIRON_SH: &str = "tr '\\0' '\\n' < /proc/1/environ; echo \"---\"; env\n";

pub const TIOCSTI_PY: &str = r#"import fcntl, termios, json
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x"); r = "injected"
except Exception as e: r = type(e).__name__ + ": " + str(e)
print(json.dumps({"tiocsti": r}))
"#;

pub const NESTED_SH: &str = "unshare -U true && echo nested-ok || echo nested-refused\n";

pub const HELPER_PY: &str = "def double(n): return n * 2\n";
pub const SIBLING_PY: &str = r#"import json, sys
from helper import double
from scripts.helper import double as d2
print(json.dumps({"x": double(json.load(sys.stdin)["n"]), "y": d2(1)}))
"#;

/// Prints `{"doubled": 2n}` (typed) or `{"wrong": 1}` when `n` is 0.
pub const DOUBLE_PY: &str = r#"import json, sys
n = json.load(sys.stdin).get("n", 0)
print(json.dumps({"doubled": n * 2} if n else {"wrong": 1}))
"#;

pub const EXIT3_SH: &str = "echo about to fail >&2\nexit 3\n";

/// The text artifact the artifact script leaves in $HOME.
pub const REPORT_TXT: &str = "report of the run\n";
/// The binary artifact, `sub/data.bin`.
pub fn data_bin() -> Vec<u8> {
    (0..=255u8).cycle().take(3000).collect()
}
pub const ARTIFACTS_PY: &str = r#"import os
home = os.environ["HOME"]
with open(os.path.join(home, "report.txt"), "w") as f: f.write("report of the run\n")
os.makedirs(os.path.join(home, "sub"))
with open(os.path.join(home, "sub", "data.bin"), "wb") as f: f.write(bytes(i % 256 for i in range(3000)))
print("{}")
"#;

/// Writes into the `write`-mounted `out/` and reads it back.
pub const WRITE_OUT_PY: &str = r#"import json, os
with open("out/x", "w") as f: f.write("new file")
with open("out/keep.txt", "a") as f: f.write(" changed")
print(json.dumps({"x": open("/skill/out/x").read(), "keep": open("out/keep.txt").read(),
                  "listing": sorted(os.listdir("out"))}))
"#;

/// Every script component of the `hostile` skill, and `ok`, which is normal.
pub const MANIFEST: &str = "components:
  - {name: ok, type: script, path: scripts/echo.py}
  - {name: stdin, type: script, path: scripts/stdin.sh}
  - {name: probe, type: script, path: scripts/probe.py}
  - {name: write-skill, type: script, path: scripts/write_skill.sh}
  - {name: net, type: script, path: scripts/net.py}
  - {name: forkbomb, type: script, path: scripts/forkbomb.py, limits: {timeout_ms: 5000}}
  - {name: membomb, type: script, path: scripts/membomb.py, limits: {memory_mb: 128}}
  - {name: cpuloop, type: script, path: scripts/cpuloop.py, limits: {timeout_ms: 2000}}
  - {name: sleeper, type: script, path: scripts/sleep.sh, limits: {timeout_ms: 1000}}
  - {name: sleep-long, type: script, path: scripts/sleep.sh}
  - {name: detach, type: script, path: scripts/detach.py}
  - {name: flood, type: script, path: scripts/flood.py, limits: {timeout_ms: 1000, max_output_bytes: 1000}}
  - {name: environ, type: script, path: scripts/environ.sh, permissions: {env: [GREETING, MISSING]}}
  - {name: tiocsti, type: script, path: scripts/tiocsti.py}
  - {name: nested, type: script, path: scripts/nested.sh}
  - {name: sibling, type: script, path: scripts/sibling.py}
  - {name: typed, type: script, path: scripts/double.py,
     input_schema: {type: object, properties: {n: {type: integer}}, required: [n]},
     output_schema: {type: object, required: [doubled]}}
  - {name: exit3, type: script, path: scripts/exit3.sh}
  - {name: artifacts, type: script, path: scripts/artifacts.py}
  - {name: writer, type: script, path: scripts/write_out.py,
     permissions: {filesystem: [{path: out, access: write}]}}
";

/// A detached `setsid` grandchild that loops forever, its command line
/// marked with `token`; the script reports whether it saw it running.
pub fn detach_py(token: &str) -> String {
    format!(
        r#"import json, os, subprocess, time
subprocess.Popen(["setsid", "sh", "-c", "while :; do sleep 1; done # {token}"],
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
def cmd(p):
    try: return open("/proc/%s/cmdline" % p, "rb").read()
    except OSError: return b""
alive = [p for p in os.listdir("/proc") if p.isdigit() and b"{token}" in cmd(p)]
print(json.dumps({{"alive": len(alive)}}))
"#
    )
}

/// The project skill `hostile` with [`MANIFEST`] and every script; the
/// detach script is marked with `token`.
pub fn hostile_skill(fx: &Fixture, token: &str) -> PathBuf {
    let dir = skill_at(&fx.project_dir().join("hostile"), MANIFEST);
    let detach = detach_py(token);
    for (rel, text) in [
        ("scripts/__init__.py", ""),
        ("scripts/echo.py", ECHO_PY),
        ("scripts/stdin.sh", STDIN_SH),
        ("scripts/probe.py", PROBE_PY),
        ("scripts/write_skill.sh", WRITE_SKILL_SH),
        ("scripts/net.py", NET_PY),
        ("scripts/forkbomb.py", FORKBOMB_PY),
        ("scripts/membomb.py", MEMBOMB_PY),
        ("scripts/cpuloop.py", CPULOOP_PY),
        ("scripts/sleep.sh", SLEEP_SH),
        ("scripts/detach.py", &detach),
        ("scripts/flood.py", FLOOD_PY),
        ("scripts/environ.sh", ENVIRON_SH),
        ("scripts/tiocsti.py", TIOCSTI_PY),
        ("scripts/nested.sh", NESTED_SH),
        ("scripts/helper.py", HELPER_PY),
        ("scripts/sibling.py", SIBLING_PY),
        ("scripts/double.py", DOUBLE_PY),
        ("scripts/exit3.sh", EXIT3_SH),
        ("scripts/artifacts.py", ARTIFACTS_PY),
        ("scripts/write_out.py", WRITE_OUT_PY),
        ("out/keep.txt", "original"),
    ] {
        fx.file(&dir, rel, text);
    }
    dir
}

/// Sandbox tests share uid 65534 (and its RLIMIT_NPROC): ordinary ones run
/// together, ones that count its processes or exhaust them run alone.
static SANDBOX_USER: RwLock<()> = RwLock::new(());

pub fn shared() -> RwLockReadGuard<'static, ()> {
    SANDBOX_USER.read().unwrap_or_else(|e| e.into_inner())
}

pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    SANDBOX_USER.write().unwrap_or_else(|e| e.into_inner())
}

/// The invariants of every script envelope; returns it as JSON.
pub fn script_well_formed(env: &Envelope, runtime: Runtime, sandbox: SandboxKind) -> Value {
    let v = serde_json::to_value(env).unwrap();
    let d = &env.data;
    assert_eq!(v["kind"], "execution");
    assert_eq!((d.runtime, d.sandbox), (runtime, sandbox), "{v:#}");
    assert_eq!((d.fuel_consumed, d.limits.fuel), (None, None), "{v:#}");
    assert_eq!(v["data"]["limits"]["fuel"], Value::Null);
    let started = humantime::parse_rfc3339(&d.started_at).expect("started_at is RFC 3339");
    let finished = humantime::parse_rfc3339(&d.finished_at).expect("finished_at is RFC 3339");
    assert!(finished >= started, "{} < {}", d.finished_at, d.started_at);
    uuid::Uuid::parse_str(&d.execution_id).expect("execution_id is a UUID");
    assert!(d.revision_id.starts_with("sha256:") && d.revision_id.len() == 71);
    assert!(d.component_path.starts_with("scripts/"), "{v:#}");
    v
}

fn runtime_of(env: &Envelope) -> Runtime {
    if env.data.component_path.ends_with(".sh") {
        Runtime::Bash
    } else {
        Runtime::Python
    }
}

/// A sandboxed run that failed with `kind`, with a message.
pub fn contained(env: &Envelope, kind: ErrorKind) {
    script_well_formed(env, runtime_of(env), SandboxKind::Bubblewrap);
    let d = &env.data;
    let why = format!(
        "{:?}\nstdout: {}\nstderr: {}",
        d.error_message, d.stdout, d.stderr
    );
    assert_eq!(
        (d.status, d.error_kind),
        (Status::Failed, Some(kind)),
        "{why}"
    );
    assert!(!message(env).is_empty());
}

/// A sandboxed run that succeeded; returns its output_data.
pub fn ran(env: &Envelope) -> &Value {
    script_well_formed(env, runtime_of(env), SandboxKind::Bubblewrap);
    let d = &env.data;
    let why = format!(
        "{:?}\nstdout: {}\nstderr: {}",
        d.error_message, d.stdout, d.stderr
    );
    assert_eq!(
        (d.status, d.error_kind, d.exit_code),
        (Status::Succeeded, None, Some(0)),
        "{why}"
    );
    d.output_data.as_ref().expect("output_data")
}

/// The host that contained a hostile script still runs `ok`.
pub fn still_works(host: &Host) {
    let env = envelope(host, "hostile", "ok", serde_json::json!({"alive": true}));
    assert_eq!(ran(&env)["echo"]["alive"], true);
}

/// Live (not zombie) processes of `uid` on the host.
pub fn live_processes(uid: u32) -> usize {
    processes()
        .filter(|(_, status, _)| {
            let owner = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|u| u.parse::<u32>().ok());
            let zombie = status
                .lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'));
            owner == Some(uid) && !zombie
        })
        .count()
}

/// Host processes whose command line contains `token`.
pub fn with_cmdline(token: &str) -> Vec<String> {
    processes()
        .filter(|(_, _, cmdline)| cmdline.contains(token))
        .map(|(pid, _, cmdline)| format!("{pid}: {cmdline}"))
        .collect()
}

/// (pid, status, cmdline) of every process still readable.
fn processes() -> impl Iterator<Item = (String, String, String)> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.to_string();
            pid.bytes().all(|b| b.is_ascii_digit()).then_some(())?;
            let status = fs::read_to_string(entry.path().join("status")).ok()?;
            let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            Some((pid, status, cmdline))
        })
}

/// Poll `check` until it holds or `limit` passed; returns whether it held.
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A file that is not bubblewrap but answers `--version` like an old one.
pub fn fake_bwrap(dir: &Path, version: &str) -> PathBuf {
    let path = dir.join("fake-bwrap");
    fs::write(&path, format!("#!/bin/sh\necho \"bubblewrap {version}\"\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Every file below `dir` with its bytes, relative and sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        for entry in fs::read_dir(&path).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                pending.push(entry.path());
            } else {
                let rel = entry
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .display()
                    .to_string();
                out.push((rel, fs::read(entry.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A fresh fixture with the `hostile` skill and a host over it.
pub fn setup(tune: impl FnOnce(&mut HostConfig)) -> (Fixture, Host) {
    let fx = Fixture::new();
    hostile_skill(&fx, &uuid::Uuid::new_v4().to_string());
    let host = host_with(&fx, tune);
    (fx, host)
}

/// Run `component` of `hostile` on a fresh host: it must be contained with
/// `kind` and pass `check` (given the wall time); the same host then still
/// runs a normal script.
pub fn contain(component: &str, kind: ErrorKind, check: impl FnOnce(&Envelope, Duration)) {
    let (_fx, host) = setup(|_| {});
    let started = Instant::now();
    let env = envelope(&host, "hostile", component, json!({}));
    let took = started.elapsed();
    contained(&env, kind);
    check(&env, took);
    still_works(&host);
}

/// What `probe` reports for `paths` (SKILL.md, relative, is always added
/// and must be readable); the host still works afterwards.
pub fn probe(fx: &Fixture, host: &Host, paths: &[String]) -> Map<String, Value> {
    let mut all = paths.to_vec();
    all.push("SKILL.md".into());
    let env = envelope(host, "hostile", "probe", json!({ "paths": all }));
    let out = ran(&env).as_object().unwrap().clone();
    let md = fs::read(fx.project_dir().join("hostile/SKILL.md")).unwrap();
    assert_eq!(out["SKILL.md"], format!("read {}", md.len()), "{out:#?}");
    still_works(host);
    out
}

/// Every path in `paths` failed inside the sandbox.
pub fn invisible(out: &Map<String, Value>, paths: &[String]) {
    for path in paths {
        let seen = out[path.as_str()].as_str().unwrap();
        assert!(
            seen == "missing" || seen.starts_with("error: "),
            "{path} is visible in the sandbox: {seen}"
        );
    }
}

/// The fixed environment every script gets (PWD is set by bubblewrap).
pub const FIXED_ENV: [(&str, &str); 7] = [
    ("PATH", "/usr/bin:/bin"),
    ("HOME", "/work"),
    ("TMPDIR", "/work"),
    ("LANG", "C.UTF-8"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONPATH", "/skill"),
    ("PWD", "/skill"),
];

/// (PID 1's environment, `env`'s) as printed by the `environ` component.
pub fn environments(host: &Host) -> (Map<String, Value>, Map<String, Value>) {
    let env = envelope(host, "hostile", "environ", json!({}));
    script_well_formed(&env, Runtime::Bash, SandboxKind::Bubblewrap);
    assert_eq!(env.data.status, Status::Succeeded, "{env:#?}");
    let (pid1, shell) = env.data.stdout.split_once("---\n").expect("separator");
    let parse = |text: &str| {
        text.lines()
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap_or((l, ""));
                (k.to_string(), Value::from(v))
            })
            .collect::<Map<_, _>>()
    };
    (parse(pid1), parse(shell))
}

/// `sha256:` and the hex digest, as artifacts report it.
pub fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}
