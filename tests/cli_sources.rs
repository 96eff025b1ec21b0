//! Source precedence and symlinks, driven through the real `skillhost`
//! binary (`list`, `load`, `read`).

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use common::Fixture;
use common::cli_json::*;
use serde_json::json;

// ------------------------------------------------------------- precedence

#[test]
fn precedence_project_managed_global_extra() {
    let fx = Fixture::new();
    let extra_src = fx.path().join("extra-skills");
    let project = fx.skill(&fx.project_dir(), "dup", "from project");
    let managed = fx.skill(&fx.managed_dir(), "dup", "from managed");
    let global = fx.skill(&fx.global_dir(), "dup", "from global");
    let extra = fx.skill(&extra_src, "dup", "from extra");
    // Unique skills in the lower sources are still listed.
    fx.skill(&fx.global_dir(), "only-global", "g");
    fx.skill(&extra_src, "only-extra", "e");
    let extra_arg = extra_src.to_str().unwrap();

    let list = list(&fx, &["--skills-dir", extra_arg]);
    assert_eq!(names(&list), ["dup", "only-extra", "only-global"]);
    let dup = skill(&list, "dup");
    assert_eq!(dup["source"], "project");
    assert_eq!(dup["description"], "from project");
    assert_eq!(
        dup["source_path"],
        fx.project_dir().display().to_string().as_str()
    );
    assert_eq!(skill(&list, "only-global")["source"], "global");
    assert_eq!(
        skill(&list, "only-global")["source_path"],
        fx.global_dir().display().to_string().as_str()
    );
    assert_eq!(skill(&list, "only-extra")["source"], "extra");

    let shadowed = |kind: &str, dir: &Path| {
        format!(
            "{kind} skill `dup` at {} is shadowed by the project one at {}",
            dir.display(),
            project.display()
        )
    };
    assert_eq!(
        strings(&list["warnings"]),
        [
            shadowed("managed", &managed),
            shadowed("global", &global),
            shadowed("extra", &extra),
        ]
    );
    assert_eq!(
        list["skills_dirs"],
        json!([
            {"source": "project", "path": fx.project_dir().display().to_string(), "exists": true},
            {"source": "managed", "path": fx.state_dir().join("store").display().to_string(), "exists": false},
            {"source": "managed", "path": fx.managed_dir().display().to_string(), "exists": true},
            {"source": "global", "path": fx.global_dir().display().to_string(), "exists": true},
            {"source": "extra", "path": extra_arg, "exists": true},
        ])
    );

    // Peel the winners off one by one: the next source takes over.
    fs::remove_dir_all(&project).unwrap();
    let list = self::list(&fx, &["--skills-dir", extra_arg]);
    let dup = skill(&list, "dup");
    assert_eq!(
        (&dup["source"], &dup["description"]),
        (&json!("managed"), &json!("from managed"))
    );
    assert_eq!(
        dup["source_path"],
        fx.managed_dir().display().to_string().as_str()
    );
    let warnings = strings(&list["warnings"]);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("is shadowed by the managed one at")),
        "{warnings:?}"
    );

    fs::remove_dir_all(&managed).unwrap();
    let list = self::list(&fx, &["--skills-dir", extra_arg]);
    assert_eq!(skill(&list, "dup")["source"], "global");
    assert_eq!(
        strings(&list["warnings"]),
        [format!(
            "extra skill `dup` at {} is shadowed by the global one at {}",
            extra.display(),
            global.display()
        )]
    );

    fs::remove_dir_all(&global).unwrap();
    let list = self::list(&fx, &["--skills-dir", extra_arg]);
    let dup = skill(&list, "dup");
    assert_eq!(dup["source"], "extra");
    assert_eq!(dup["source_path"], extra_arg);
    assert_eq!(list["warnings"], json!([]));
    let (code, loaded) = fx.json(&["load", "dup", "--skills-dir", extra_arg]);
    assert_eq!(code, 0, "{loaded:#}");
    assert_eq!(loaded["description"], "from extra");
    assert_eq!(loaded["source"], "extra");
}

#[test]
fn skills_dirs_report_missing_sources() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "one", "one");
    let missing = fx.path().join("no-such-dir");
    let list = list(&fx, &["--skills-dir", missing.to_str().unwrap()]);
    assert_eq!(names(&list), ["one"]);
    assert_eq!(list["warnings"], json!([]));
    assert_eq!(
        list["skills_dirs"],
        json!([
            {"source": "project", "path": fx.project_dir().display().to_string(), "exists": true},
            {"source": "managed", "path": fx.state_dir().join("store").display().to_string(), "exists": false},
            {"source": "managed", "path": fx.managed_dir().display().to_string(), "exists": false},
            {"source": "global", "path": fx.global_dir().display().to_string(), "exists": false},
            {"source": "extra", "path": missing.display().to_string(), "exists": false},
        ])
    );
}

// ---------------------------------------------------------------- symlinks

#[test]
fn skill_directory_that_is_a_symlink_loads() {
    let fx = Fixture::new();
    let real = fx.skill_md(
        &fx.path().join("elsewhere"),
        "real-target",
        &md("linked", "Lives elsewhere"),
    );
    fx.file(&real, "references/a.md", "through the link");
    fs::create_dir_all(fx.project_dir()).unwrap();
    let link = fx.project_dir().join("linked");
    symlink(&real, &link).unwrap();

    let list = list(&fx, &[]);
    let s = only_skill(&list, "linked");
    assert_eq!(s["source"], "project");
    assert_eq!(s["files"], json!(["references/a.md"]));
    assert_eq!(s["warnings"], json!([]));

    let loaded = load(&fx, "linked");
    assert_eq!(loaded["skill_dir"], link.display().to_string().as_str());
    assert_eq!(
        loaded["files"],
        json!([{"path": "references/a.md", "size": 16, "kind": "reference"}])
    );
    let (code, read) = fx.json(&["read", "linked", "references/a.md"]);
    assert_eq!(code, 0, "{read:#}");
    assert_eq!(read["content"], "through the link");
}

#[test]
fn symlink_to_file_outside_is_not_listed_nor_readable() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    fx.file(&dir, "ok.md", "fine");
    symlink("/etc/passwd", dir.join("passwd")).unwrap();
    // A relative link that climbs out of the skill is just as outside.
    fs::write(fx.project_dir().join("secret.txt"), "secret").unwrap();
    symlink("../secret.txt", dir.join("secret")).unwrap();

    let list = list(&fx, &[]);
    let s = only_skill(&list, "demo");
    assert_eq!(s["files"], json!(["ok.md"]));
    // Listing warnings follow directory order; compare them sorted.
    let mut warnings = strings(&s["warnings"]);
    warnings.sort();
    assert_eq!(
        warnings,
        [
            "`passwd` is a symlink that is absolute, leads outside the skill or nowhere; it is not listed and cannot be read",
            "`secret` is a symlink that is absolute, leads outside the skill or nowhere; it is not listed and cannot be read",
        ]
    );
    let loaded = load(&fx, "demo");
    assert_eq!(
        loaded["files"],
        json!([{"path": "ok.md", "size": 4, "kind": "reference"}])
    );

    assert_error(
        fx.json(&["read", "demo", "passwd"]),
        "PATH_OUTSIDE_SKILL",
        1,
    );
    assert_error(
        fx.json(&["read", "demo", "secret"]),
        "PATH_OUTSIDE_SKILL",
        1,
    );
}

#[test]
fn symlinked_directory_outside_is_not_readable() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    symlink("/etc", dir.join("etc")).unwrap();

    let list = list(&fx, &[]);
    let s = only_skill(&list, "demo");
    assert_eq!(s["files"], json!([]));
    assert_eq!(
        strings(&s["warnings"]),
        [
            "`etc` is a symlink that is absolute, leads outside the skill or nowhere; it is not listed and cannot be read"
        ]
    );
    assert_error(
        fx.json(&["read", "demo", "etc/passwd"]),
        "PATH_OUTSIDE_SKILL",
        1,
    );
    assert_error(
        fx.json(&["read", "demo", "./etc//hostname"]),
        "PATH_OUTSIDE_SKILL",
        1,
    );
}

#[test]
fn symlink_to_file_inside_the_skill_is_listed_and_readable() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    fx.file(&dir, "references/guide.md", "the guide");
    symlink("references/guide.md", dir.join("alias.md")).unwrap();
    // A directory link inside the skill too.
    symlink("references", dir.join("docs")).unwrap();

    let list = list(&fx, &[]);
    let s = only_skill(&list, "demo");
    assert_eq!(s["warnings"], json!([]));
    // The file link is listed under its own name. The linked directory is
    // walked once, under whichever of its two names comes last in directory
    // order, so its file appears exactly once under one of them.
    let files = strings(&s["files"]);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files[0], "alias.md", "{files:?}");
    assert!(
        files[1] == "docs/guide.md" || files[1] == "references/guide.md",
        "{files:?}"
    );

    for path in ["alias.md", "docs/guide.md", "references/guide.md"] {
        let (code, read) = fx.json(&["read", "demo", path]);
        assert_eq!(code, 0, "{path}: {read:#}");
        assert_eq!(read["content"], "the guide", "{path}");
        assert_eq!(read["size"], 9, "{path}");
    }
}

/// Every file that `load` lists must be readable with `read`: the listing
/// and the reader must agree on which symlinks stay inside the skill.
/// An absolute symlink (or a relative one that steps out of the skill and
/// back in) to a file inside the skill is a common way to alias a file.
#[test]
fn every_listed_file_is_readable() {
    let fx = Fixture::new();
    let dir = fx.skill(&fx.project_dir(), "demo", "Demo");
    fx.file(&dir, "references/guide.md", "the guide");
    symlink(dir.join("references/guide.md"), dir.join("absolute.md")).unwrap();
    symlink("../demo/references/guide.md", dir.join("roundabout.md")).unwrap();

    let loaded = load(&fx, "demo");
    let listed: Vec<String> = loaded["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    assert!(
        listed.contains(&"references/guide.md".to_string()),
        "{listed:?}"
    );
    let mut unreadable = Vec::new();
    for path in &listed {
        let (code, read) = fx.json(&["read", "demo", path]);
        if code != 0 || read["content"] != "the guide" {
            unreadable.push(format!("{path}: exit {code}, {read}"));
        }
    }
    assert!(
        unreadable.is_empty(),
        "files listed by load but not readable:\n{}",
        unreadable.join("\n")
    );
}
