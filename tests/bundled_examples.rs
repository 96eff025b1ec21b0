//! The README's run command serves `guest-examples/workspace`: every bundled
//! skill must load cleanly and every file it lists must be readable.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn cli(args: &[&str], state: &Path) -> (i32, Value) {
    let out = Command::new(common::bin())
        .args(args)
        .args([
            "--workspace",
            concat!(env!("CARGO_MANIFEST_DIR"), "/guest-examples/workspace"),
        ])
        .arg("--state-dir")
        .arg(state)
        .args(["--no-global", "--json"])
        .output()
        .unwrap();
    let value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    (out.status.code().unwrap(), value)
}

#[test]
fn bundled_skills_load_without_warnings_and_all_files_read() {
    let state = tempfile::tempdir().unwrap();
    let (code, list) = cli(&["list"], state.path());
    assert_eq!(code, 0);
    let skills = list["skills"].as_array().unwrap();
    let names: Vec<&str> = skills.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["brand-palette", "commit-message", "csv-insights"]);
    assert_eq!(list["warnings"], Value::Array(vec![]), "{list:#}");
    for skill in skills {
        let name = skill["name"].as_str().unwrap();
        assert_eq!(skill["warnings"], Value::Array(vec![]), "{name}");
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
    }
}
