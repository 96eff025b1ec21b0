//! Discovery, parsing, precedence, path safety and read limits, driven through
//! the real `skillhost` binary (`list`, `load`, `read`).

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use base64::Engine as _;
use common::Fixture;
use serde_json::{Value, json};

// ---------------------------------------------------------------- helpers

/// Names of the listed skills, in listed order.
fn names(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .expect("skills array")
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// The listed skill with this name.
fn skill<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["skills"]
        .as_array()
        .expect("skills array")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("skill `{name}` not listed in {list:#}"))
}

/// A JSON array of strings as a Vec.
fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|w| w.as_str().expect("string").to_string())
        .collect()
}

/// Run `list --json`, expecting exit 0.
fn list(fx: &Fixture, extra: &[&str]) -> Value {
    let mut args = vec!["list"];
    args.extend_from_slice(extra);
    let (code, value) = fx.json(&args);
    assert_eq!(code, 0, "{value:#}");
    value
}

/// Run `load NAME --json`, expecting exit 0.
fn load(fx: &Fixture, name: &str) -> Value {
    let (code, value) = fx.json(&["load", name]);
    assert_eq!(code, 0, "load {name}: {value:#}");
    value
}

/// Assert an error body `{"error": {"kind": KIND, ...}}` and the exit code.
fn assert_error(result: (i32, Value), kind: &str, code: i32) {
    let (exit, value) = result;
    assert_eq!(value["error"]["kind"], kind, "{value:#}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{value:#}"
    );
    assert_eq!(exit, code, "exit code for {kind}: {value:#}");
}

/// The one skill in a list, checked to be `name` with no top-level warnings.
fn only_skill<'a>(list: &'a Value, name: &str) -> &'a Value {
    assert_eq!(names(list), vec![name.to_string()], "{list:#}");
    assert_eq!(list["warnings"], json!([]), "{list:#}");
    &list["skills"][0]
}

fn md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n")
}

// ------------------------------------------------------ frontmatter quirks

#[test]
fn literal_block_scalar_description_loads() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "block",
        "---\nname: block\ndescription: |-\n  line one\n  line two\n---\n# Block\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "block");
    assert_eq!(s["description"], "line one\nline two");
    assert_eq!(s["source"], "project");
    assert_eq!(s["warnings"], json!([]));
    let loaded = load(&fx, "block");
    assert_eq!(loaded["frontmatter"]["description"], "line one\nline two");
    assert_eq!(loaded["instructions"], "# Block\n");
}

#[test]
fn folded_block_scalar_description_loads() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "folded",
        "---\nname: folded\ndescription: >\n  folded\n  text here\n\n  second paragraph\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "folded");
    assert_eq!(s["description"], "folded text here\nsecond paragraph");
    assert_eq!(s["warnings"], json!([]));
    // The frontmatter keeps the YAML value as parsed (clip chomping keeps one newline).
    let loaded = load(&fx, "folded");
    assert_eq!(
        loaded["frontmatter"]["description"],
        "folded text here\nsecond paragraph\n"
    );
}

#[test]
fn double_quoted_escapes_are_decoded() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "quoted",
        "---\nname: \"quoted\"\ndescription: \"Tab\\there, a \\\"quote\\\", \\u00e9t\\u00e9 and a \\\\ backslash\"\nlicense: \"MIT\\nor Apache\"\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "quoted");
    assert_eq!(
        s["description"],
        "Tab\there, a \"quote\", été and a \\ backslash"
    );
    assert_eq!(s["warnings"], json!([]));
    let loaded = load(&fx, "quoted");
    assert_eq!(loaded["frontmatter"]["license"], "MIT\nor Apache");
}

#[test]
fn description_over_1024_chars_loads_with_length_warning() {
    let fx = Fixture::new();
    // 1100 characters but 2200 bytes: the limit counts characters.
    let long = "é".repeat(1100);
    fx.skill_md(&fx.project_dir(), "long", &md("long", &long));
    // Exactly at the limit: no warning.
    let at_limit = "x".repeat(1024);
    fx.skill_md(&fx.project_dir(), "limit", &md("limit", &at_limit));

    let list = list(&fx, &[]);
    assert_eq!(names(&list), ["limit", "long"]);
    assert_eq!(list["warnings"], json!([]));
    let s = skill(&list, "long");
    assert_eq!(s["description"], long.as_str());
    assert_eq!(
        strings(&s["warnings"]),
        ["description is 1100 characters; the spec allows 1024"]
    );
    assert_eq!(skill(&list, "limit")["warnings"], json!([]));
    assert_eq!(
        strings(&load(&fx, "long")["warnings"]),
        ["description is 1100 characters; the spec allows 1024"]
    );
}

#[test]
fn name_differing_from_directory_loads_under_frontmatter_name() {
    let fx = Fixture::new();
    let dir = fx.skill_md(
        &fx.project_dir(),
        "dir-name",
        &md("real-name", "Named apart from its directory"),
    );
    fx.file(&dir, "references/a.md", "alpha");

    let list = list(&fx, &[]);
    let s = only_skill(&list, "real-name");
    assert_eq!(
        strings(&s["warnings"]),
        [
            "name `real-name` differs from its directory `dir-name`; the skill is listed as `real-name`"
        ]
    );
    assert_eq!(
        s["entry_path"],
        dir.join("SKILL.md").display().to_string().as_str()
    );

    let loaded = load(&fx, "real-name");
    assert_eq!(loaded["name"], "real-name");
    assert_eq!(loaded["skill_dir"], dir.display().to_string().as_str());
    let (code, read) = fx.json(&["read", "real-name", "references/a.md"]);
    assert_eq!(code, 0, "{read:#}");
    assert_eq!(read["content"], "alpha");

    assert_error(fx.json(&["load", "dir-name"]), "SKILL_NOT_FOUND", 1);
}

#[test]
fn unknown_frontmatter_keys_warn_and_are_kept() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "extra-keys",
        "---\nname: extra-keys\ndescription: Has extra keys\nwhen_to_use: now\nx-custom: 7\nlicense: MIT\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "extra-keys");
    assert_eq!(
        strings(&s["warnings"]),
        ["frontmatter keys outside the Agent Skills spec (kept as given): when_to_use, x-custom"]
    );
    let loaded = load(&fx, "extra-keys");
    assert_eq!(
        loaded["frontmatter"],
        json!({
            "name": "extra-keys",
            "description": "Has extra keys",
            "when_to_use": "now",
            "x-custom": 7,
            "license": "MIT",
        })
    );
}

#[test]
fn crlf_line_endings_load() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "crlf",
        "---\r\nname: crlf\r\ndescription: Windows line endings\r\n---\r\n# Title\r\nline two\r\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "crlf");
    assert_eq!(s["description"], "Windows line endings");
    assert_eq!(s["warnings"], json!([]));
    let loaded = load(&fx, "crlf");
    assert_eq!(loaded["instructions"], "# Title\nline two\n");
    assert_eq!(loaded["frontmatter"]["name"], "crlf");
}

#[test]
fn utf8_bom_loads() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "bom",
        "\u{feff}---\nname: bom\ndescription: Starts with a byte order mark\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "bom");
    assert_eq!(s["description"], "Starts with a byte order mark");
    assert_eq!(s["warnings"], json!([]));
    assert_eq!(load(&fx, "bom")["instructions"], "Body\n");
}

#[test]
fn metadata_with_non_string_values_warns() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "meta",
        "---\nname: meta\ndescription: Has metadata\nmetadata:\n  author: someone\n  version: 2\n  stable: true\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "meta");
    assert_eq!(
        strings(&s["warnings"]),
        ["metadata values should be strings; not strings: stable, version"]
    );
    let loaded = load(&fx, "meta");
    assert_eq!(
        loaded["frontmatter"]["metadata"],
        json!({"author": "someone", "version": 2, "stable": true})
    );
}

#[test]
fn unquoted_colon_in_description_falls_back_with_warning() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "colon",
        "---\nname: colon\ndescription: Use when: the user asks for it\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "colon");
    assert_eq!(s["description"], "Use when: the user asks for it");
    let warnings = strings(&s["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("frontmatter is not valid YAML"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].contains("read it as plain `key: value` lines"),
        "{warnings:?}"
    );
}

// -------------------------------------------------- skipped with a warning

/// A list with exactly the `good` skill and exactly one top-level warning, returned.
fn skipped_warning(list: &Value) -> String {
    assert_eq!(names(list), ["good"], "{list:#}");
    let warnings = strings(&list["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    warnings[0].clone()
}

#[test]
fn directory_without_skill_md_is_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let empty = fx.project_dir().join("empty");
    fx.file(&empty, "README.md", "not a skill");
    // A plain file beside the skills is ignored silently.
    fs::write(fx.project_dir().join("NOTES.md"), "notes").unwrap();

    let list = list(&fx, &[]);
    assert_eq!(
        skipped_warning(&list),
        format!("skipped {}: it has no SKILL.md", empty.display())
    );
}

#[test]
fn unparseable_yaml_is_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let bad = fx.skill_md(
        &fx.project_dir(),
        "bad-yaml",
        "---\nname: bad-yaml\n  description: : x\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let warning = skipped_warning(&list);
    let prefix = format!(
        "skipped {}: the frontmatter is not valid YAML",
        bad.display()
    );
    assert!(warning.starts_with(&prefix), "{warning}");
    assert_error(fx.json(&["load", "bad-yaml"]), "SKILL_NOT_FOUND", 1);
}

#[test]
fn missing_name_is_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let bad = fx.skill_md(
        &fx.project_dir(),
        "nameless",
        "---\ndescription: No name here\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    assert_eq!(
        skipped_warning(&list),
        format!("skipped {}: frontmatter has no `name`", bad.display())
    );
    assert_error(fx.json(&["load", "nameless"]), "SKILL_NOT_FOUND", 1);
}

#[test]
fn missing_description_is_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let bad = fx.skill_md(
        &fx.project_dir(),
        "undescribed",
        "---\nname: undescribed\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    assert_eq!(
        skipped_warning(&list),
        format!(
            "skipped {}: frontmatter has no `description`",
            bad.display()
        )
    );
    assert_error(fx.json(&["load", "undescribed"]), "SKILL_NOT_FOUND", 1);
}

#[test]
fn invalid_name_characters_are_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let bad = fx.skill_md(
        &fx.project_dir(),
        "my-skill",
        "---\nname: My Skill\ndescription: Bad name\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let warning = skipped_warning(&list);
    let prefix = format!("skipped {}: name `My Skill` contains", bad.display());
    assert!(warning.starts_with(&prefix), "{warning}");
    assert!(
        warning.ends_with("names use only lowercase letters, digits and `-`"),
        "{warning}"
    );
    assert_error(fx.json(&["load", "My Skill"]), "SKILL_NOT_FOUND", 1);
    assert_error(fx.json(&["load", "my-skill"]), "SKILL_NOT_FOUND", 1);
}

#[test]
fn oversized_skill_md_is_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let text = format!("{}{}\n", md("big", "Too big"), "x".repeat(400));
    let size = text.len();
    assert!(size > 300);
    let big = fx.skill_md(&fx.project_dir(), "big", &text);

    let list = list(&fx, &["--max-skill-md-bytes", "300"]);
    assert_eq!(
        skipped_warning(&list),
        format!(
            "skipped {}: SKILL.md is {size} bytes; the limit is 300 (--max-skill-md-bytes)",
            big.display()
        )
    );
    // With the default limit it loads.
    assert_eq!(names(&self::list(&fx, &[])), ["big", "good"]);
}

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
