//! Path safety, read limits, encodings, `load` output and the human and
//! `--json` output discipline of the real `skillhost` binary.

mod common;

use std::fs;

use base64::Engine as _;
use common::Fixture;
use common::cli_json::*;
use serde_json::{Value, json};

// ----------------------------------------------------------- hostile paths

#[test]
fn traversal_and_absolute_paths_are_outside_the_skill() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    fx.file(&dir, "references/a.md", "inside");
    // Real targets exist, so a broken check would succeed in reading them.
    fs::write(fx.project_dir().join("secret.txt"), "secret").unwrap();
    fs::write(fx.workspace().join("top.txt"), "top").unwrap();
    let inside_abs = dir.join("references/a.md");

    for path in [
        "../secret.txt",
        "references/../../secret.txt",
        "a/../../secret.txt",
        "../../../top.txt",
        "..",
        "/etc/passwd",
        inside_abs.to_str().unwrap(),
        "..\\secret.txt",
        "references\\..\\..\\secret.txt",
        "\\etc\\passwd",
        "C:\\Windows\\win.ini",
    ] {
        let (code, value) = fx.json(&["read", "demo", path]);
        assert_eq!(
            (code, &value["error"]["kind"]),
            (1, &json!("PATH_OUTSIDE_SKILL")),
            "{path:?}: {value:#}"
        );
    }
    // The inside file itself is fine, also in a harmless spelling.
    let (code, value) = fx.json(&["read", "demo", "./references//a.md"]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(value["path"], "references/a.md");
    assert_eq!(value["content"], "inside");
}

#[test]
fn missing_file_directory_and_unknown_skill_errors() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    fx.file(&dir, "references/a.md", "inside");

    assert_error(
        fx.json(&["read", "demo", "references/nope.md"]),
        "FILE_NOT_FOUND",
        1,
    );
    assert_error(
        fx.json(&["read", "demo", "references/a.md/deeper"]),
        "FILE_NOT_FOUND",
        1,
    );
    assert_error(fx.json(&["read", "demo", "references"]), "INVALID_PATH", 1);
    // Bad ranges are caller errors too.
    assert_error(
        fx.json(&["read", "demo", "references/a.md", "--offset", "7"]),
        "INVALID_INPUT",
        1,
    );
    assert_error(
        fx.json(&["read", "demo", "references/a.md", "--length", "0"]),
        "INVALID_INPUT",
        1,
    );
    assert_error(
        fx.json(&["read", "nope", "references/a.md"]),
        "SKILL_NOT_FOUND",
        1,
    );
    assert_error(fx.json(&["load", "nope"]), "SKILL_NOT_FOUND", 1);
    // Names are exact.
    assert_error(fx.json(&["load", "Demo"]), "SKILL_NOT_FOUND", 1);
}

// ------------------------------------------------------------ read limits

#[test]
fn file_over_limit_is_too_large_but_readable_in_parts() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    // 5000 ASCII bytes whose position is recognisable.
    let bytes: Vec<u8> = (0..5000u32).map(|i| b'a' + (i % 26) as u8).collect();
    fx.file(&dir, "references/big.txt", &bytes);

    assert_error(
        fx.json(&[
            "read",
            "demo",
            "references/big.txt",
            "--max-file-bytes",
            "1000",
        ]),
        "FILE_TOO_LARGE",
        2,
    );

    let (code, value) = fx.json(&[
        "read",
        "demo",
        "references/big.txt",
        "--max-file-bytes",
        "1000",
        "--offset",
        "1000",
        "--length",
        "500",
    ]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(value["encoding"], "utf-8");
    assert_eq!(
        value["content"],
        std::str::from_utf8(&bytes[1000..1500]).unwrap()
    );
    assert_eq!(value["offset"], 1000);
    assert_eq!(value["length"], 500);
    assert_eq!(value["size"], 5000);
    assert_eq!(value["truncated"], true);
    assert_eq!(value["name"], "demo");
    assert_eq!(value["path"], "references/big.txt");

    // A length above the limit is capped at the limit.
    let (code, value) = fx.json(&[
        "read",
        "demo",
        "references/big.txt",
        "--max-file-bytes",
        "1000",
        "--offset",
        "4500",
        "--length",
        "4000",
    ]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(
        (&value["offset"], &value["length"], &value["truncated"]),
        (&json!(4500), &json!(500), &json!(false))
    );
    assert_eq!(
        value["content"],
        std::str::from_utf8(&bytes[4500..]).unwrap()
    );
}

#[test]
fn binary_file_comes_back_base64() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    let bytes: Vec<u8> = vec![0x89, b'P', b'N', b'G', 0, 0, 0xff, 0xfe, 0x80, b'\n', 0, 7];
    fx.file(&dir, "assets/logo.png", &bytes);
    // Invalid UTF-8 without any NUL is binary too.
    fx.file(&dir, "assets/latin1.txt", b"caf\xe9 cr\xe8me");

    let (code, value) = fx.json(&["read", "demo", "assets/logo.png"]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(value["encoding"], "base64");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, bytes);
    assert_eq!(value["size"], bytes.len());
    assert_eq!(value["length"], bytes.len());
    assert_eq!(value["truncated"], false);

    let (code, value) = fx.json(&["read", "demo", "assets/latin1.txt"]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(value["encoding"], "base64");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(value["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, b"caf\xe9 cr\xe8me");
}

#[test]
fn utf8_text_comes_back_verbatim() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    let text = "Grüße, naïve café — 日本語 ✓ 🦀\n\ttabbed line\r\nend";
    fx.file(&dir, "references/intl.md", text);

    let (code, value) = fx.json(&["read", "demo", "references/intl.md"]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(value["encoding"], "utf-8");
    assert_eq!(value["content"], text);
    assert_eq!(value["size"], text.len());
    assert_eq!(value["length"], text.len());
    assert_eq!(value["offset"], 0);
    assert_eq!(value["truncated"], false);
}

// -------------------------------------------------------------------- load

#[test]
fn load_returns_instructions_frontmatter_and_classified_files() {
    let fx = Fixture::new();
    let dir = fx.skill_md(
        &fx.project_dir(),
        "pdf",
        "---\nname: pdf\ndescription: Work with PDFs\nlicense: MIT\nallowed-tools: Bash Read\n---\n# PDF\n\nRun `scripts/x.py`.\n---\nnot frontmatter\n",
    );
    fx.file(&dir, "scripts/x.py", "print('x')\n");
    fx.file(&dir, "references/a.md", "# A\n");
    fx.file(&dir, "assets/logo.png", [0u8, 1, 2]);
    fx.file(&dir, "templates/form.txt", "form");
    fx.file(&dir, "data.csv", "a,b\n");
    fx.file(&dir, "helper.sh", "echo\n");
    // Never listed: hidden entries, caches, dependency trees.
    fx.file(&dir, ".git/config", "[core]\n");
    fx.file(&dir, ".env", "TOKEN=secret\n");
    fx.file(&dir, "scripts/.hidden.py", "");
    fx.file(&dir, "__pycache__/x.cpython-312.pyc", [0u8; 8]);
    fx.file(&dir, "scripts/__pycache__/x.cpython-312.pyc", [0u8; 8]);
    fx.file(&dir, "node_modules/pkg/index.js", "");

    let loaded = load(&fx, "pdf");
    assert_eq!(loaded["name"], "pdf");
    assert_eq!(loaded["description"], "Work with PDFs");
    assert_eq!(loaded["source"], "project");
    assert_eq!(loaded["skill_dir"], dir.display().to_string().as_str());
    assert_eq!(
        loaded["instructions"],
        "# PDF\n\nRun `scripts/x.py`.\n---\nnot frontmatter\n"
    );
    assert_eq!(
        loaded["frontmatter"],
        json!({
            "name": "pdf",
            "description": "Work with PDFs",
            "license": "MIT",
            "allowed-tools": "Bash Read",
        })
    );
    assert_eq!(
        loaded["files"],
        json!([
            {"path": "assets/logo.png", "size": 3, "kind": "asset"},
            {"path": "data.csv", "size": 4, "kind": "file"},
            {"path": "helper.sh", "size": 5, "kind": "script"},
            {"path": "references/a.md", "size": 4, "kind": "reference"},
            {"path": "scripts/x.py", "size": 11, "kind": "script"},
            {"path": "templates/form.txt", "size": 4, "kind": "template"},
        ])
    );
    assert_eq!(loaded["warnings"], json!([]));

    // `list` shows the same paths.
    let list = list(&fx, &[]);
    assert_eq!(
        skill(&list, "pdf")["files"],
        json!([
            "assets/logo.png",
            "data.csv",
            "helper.sh",
            "references/a.md",
            "scripts/x.py",
            "templates/form.txt",
        ])
    );
}

#[test]
fn max_files_listed_bounds_the_listing() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "many", "Many files");
    for name in ["e.md", "b.md", "d.md", "a.md", "c.md"] {
        fx.file(&dir, name, name);
    }
    let expected_warning = "5 related files found; only the first 3 are listed (max_files_listed)";

    let list = list(&fx, &["--max-files-listed", "3"]);
    let s = only_skill(&list, "many");
    assert_eq!(s["files"], json!(["a.md", "b.md", "c.md"]));
    assert_eq!(strings(&s["warnings"]), [expected_warning]);

    let (code, loaded) = fx.json(&["load", "many", "--max-files-listed", "3"]);
    assert_eq!(code, 0, "{loaded:#}");
    let paths: Vec<&str> = loaded["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.md", "b.md", "c.md"]);
    assert_eq!(strings(&loaded["warnings"]), [expected_warning]);

    // Files beyond the listing are still readable.
    let (code, read) = fx.json(&["read", "many", "e.md", "--max-files-listed", "3"]);
    assert_eq!(code, 0, "{read:#}");
    assert_eq!(read["content"], "e.md");
}

// ------------------------------------------------------------ human output

#[test]
fn human_list_prints_names_on_stdout() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "alpha", "First skill");
    fx.skill(&fx.managed_dir(), "beta", "Second skill");
    fx.file(&fx.project_dir().join("broken"), "README.md", "x");

    let out = fx.run(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("alpha ")
            && lines[0].contains("project")
            && lines[0].ends_with("First skill"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("beta ")
            && lines[1].contains("managed")
            && lines[1].ends_with("Second skill"),
        "{stdout}"
    );
    assert!(serde_json::from_str::<Value>(&stdout).is_err(), "{stdout}");
    // Warnings go to stderr, not stdout.
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("warning: skipped") && stderr.contains("it has no SKILL.md"),
        "{stderr}"
    );
    assert!(!stdout.contains("no SKILL.md"), "{stdout}");
}

#[test]
fn human_read_prints_raw_bytes() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    let bytes: Vec<u8> = vec![0, 1, 2, 0xff, b'\n', 0x80, b'x'];
    fx.file(&dir, "assets/blob.bin", &bytes);
    fx.file(&dir, "references/a.md", "héllo\n");

    let out = fx.run(&["read", "demo", "assets/blob.bin"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, bytes);

    let out = fx.run(&["read", "demo", "references/a.md"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, "héllo\n".as_bytes());

    let out = fx.run(&[
        "read",
        "demo",
        "references/a.md",
        "--offset",
        "1",
        "--length",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, "é".as_bytes());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("returned bytes 1..3 of 7"), "{stderr}");
}

#[test]
fn human_errors_go_to_stderr() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    fx.file(&dir, "big.txt", "x".repeat(5000));

    for (args, kind, code) in [
        (vec!["read", "demo", "../x"], "PATH_OUTSIDE_SKILL", 1),
        (vec!["read", "demo", "nope.md"], "FILE_NOT_FOUND", 1),
        (vec!["load", "nope"], "SKILL_NOT_FOUND", 1),
        (
            vec!["read", "demo", "big.txt", "--max-file-bytes", "1000"],
            "FILE_TOO_LARGE",
            2,
        ),
    ] {
        let out = fx.run(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.starts_with(&format!("error: {kind}")),
            "{args:?}: {stderr}"
        );
    }
}

// ------------------------------------------------------- stdout discipline

#[test]
fn json_stdout_is_only_the_document_even_with_debug_logs() {
    let fx = Fixture::new();
    let dir = fx.skill_md(
        &fx.project_dir(),
        "noisy",
        "---\nname: noisy\ndescription: Use when: noisy\nodd-key: 1\n---\nBody\n",
    );
    fx.file(&dir, "references/a.md", "text");
    fx.file(&fx.project_dir().join("broken"), "README.md", "x");

    for args in [
        vec!["list", "--json"],
        vec!["load", "noisy", "--json"],
        vec!["read", "noisy", "references/a.md", "--json"],
        vec!["read", "noisy", "references/missing.md", "--json"],
    ] {
        // Quiet by default: nothing on stderr either.
        let out = fx.run(&args);
        let stdout = String::from_utf8(out.stdout).unwrap();
        serde_json::from_str::<Value>(&stdout).unwrap_or_else(|e| {
            panic!("{args:?}: stdout is not one JSON document ({e}):\n{stdout}")
        });
        assert!(
            out.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );

        // Debug logs go to stderr only.
        let mut debug = args.clone();
        debug.extend(["--log-level", "debug"]);
        let out = fx.run(&debug);
        let stdout = String::from_utf8(out.stdout).unwrap();
        let doc: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!("{debug:?}: stdout is not one JSON document ({e}):\n{stdout}")
        });
        assert!(doc.is_object(), "{debug:?}");
        assert!(stdout.trim_start().starts_with('{'), "{stdout}");
        assert!(!stdout.contains("WARN"), "{debug:?}: {stdout}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("WARN") && stderr.contains("odd-key"),
            "{debug:?}: expected the parse warnings logged on stderr:\n{stderr}"
        );

        // RUST_LOG is honoured the same way.
        let out = fx.command(&args).env("RUST_LOG", "trace").output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        serde_json::from_str::<Value>(&stdout)
            .unwrap_or_else(|e| panic!("{args:?} RUST_LOG=trace: ({e}):\n{stdout}"));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("WARN"),
            "{args:?} RUST_LOG=trace"
        );
    }
}

#[test]
fn hidden_files_are_never_served() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "secretive", "Has dotfiles");
    fx.file(&dir, ".env", "API_KEY=hunter2\n");
    fx.file(
        &dir,
        ".git/config",
        "[remote]\nurl = https://token@example.com/x.git\n",
    );
    fx.file(&dir, "notes.md", "visible\n");
    for path in [".env", ".git/config", "./.env", "sub/../.env"] {
        let (code, body) = fx.json(&["read", "secretive", path]);
        let kind = body["error"]["kind"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            kind == "ACCESS_DENIED" || (path.contains("..") && kind == "PATH_OUTSIDE_SKILL"),
            "{path}: {body}"
        );
        assert_eq!(code, 1, "{path}");
        assert!(!body.to_string().contains("hunter2"), "{path}");
    }
    let (code, body) = fx.json(&["read", "secretive", "notes.md"]);
    assert_eq!((code, body["content"].as_str()), (0, Some("visible\n")));
}
