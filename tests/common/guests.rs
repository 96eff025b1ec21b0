//! The example and hostile guests from `guest-examples/`, built once per test
//! binary for `wasm32-wasip2` (the target is installed with rustup when
//! missing), so a fresh clone needs nothing by hand.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const TARGET: &str = "wasm32-wasip2";

fn guest_workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guest-examples")
}

fn ensure_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    match installed {
        Ok(out)
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == TARGET) => {}
        Ok(_) => {
            eprintln!("installing the {TARGET} target with rustup");
            let status = Command::new("rustup")
                .args(["target", "add", TARGET])
                .status()
                .expect("run rustup");
            assert!(status.success(), "`rustup target add {TARGET}` failed");
        }
        // Without rustup the toolchain may still have the target; the build says.
        Err(_) => {}
    }
}

/// Build every guest (release, wasm32-wasip2) once; return the output directory.
pub fn build_dir() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        ensure_target();
        let workspace = guest_workspace();
        let target_dir = workspace.join("target");
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "--quiet", "--target", TARGET])
            .arg("--manifest-path")
            .arg(workspace.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir)
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .status()
            .expect("run cargo build for the guests");
        assert!(
            status.success(),
            "building guest-examples for {TARGET} failed"
        );
        target_dir.join(TARGET).join("release")
    })
}

/// Path of a built guest, e.g. `guest("word-count")` or `guest("spin")`.
pub fn guest(name: &str) -> PathBuf {
    let path = build_dir().join(format!("{name}.wasm"));
    assert!(path.is_file(), "no guest {}", path.display());
    path
}
