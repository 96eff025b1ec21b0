//! Frontmatter quirks that load with warnings and skills that are skipped,
//! driven through the real `skillhost` binary (`list`, `load`).

mod common;

use std::fs;

use common::Fixture;
use common::cli_json::*;
use serde_json::{Value, json};

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
fn unquoted_colon_in_description_is_repaired_with_warning() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "colon",
        "---\nname: colon\ndescription: Use when: the user asks for it\nmetadata:\n  short-description: Colon test\n---\nBody\n",
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
        warnings[0].ends_with("read the value of `description` as plain text"),
        "{warnings:?}"
    );
    // The nested block after the repaired line still parses as YAML.
    let loaded = load(&fx, "colon");
    assert_eq!(
        loaded["frontmatter"]["metadata"]["short-description"],
        "Colon test"
    );
}

#[test]
fn unescaped_inner_quotes_fall_back_to_plain_lines() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "quotes",
        "---\nname: quotes\ndescription: \"Make \"deck\" files\"\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "quotes");
    assert_eq!(s["description"], "Make \"deck\" files");
    let warnings = strings(&s["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
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
fn missing_name_falls_back_to_the_directory_name() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "nameless",
        "---\ndescription: No name here\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "nameless");
    assert_eq!(
        strings(&s["warnings"]),
        ["frontmatter has no `name`; the skill is listed under its directory name `nameless`"]
    );
    assert_eq!(load(&fx, "nameless")["instructions"], "Body\n");
}

#[test]
fn missing_name_in_an_invalid_directory_is_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let bad = fx.skill_md(
        &fx.project_dir(),
        "No Name",
        "---\ndescription: No name here\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    assert_eq!(
        skipped_warning(&list),
        format!(
            "skipped {}: frontmatter has no `name`, and the directory name `No Name` is not a valid name either",
            bad.display()
        )
    );
    assert_error(fx.json(&["load", "No Name"]), "SKILL_NOT_FOUND", 1);
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
fn invalid_name_characters_fall_back_to_the_directory_name() {
    let fx = Fixture::new();
    fx.skill_md(
        &fx.project_dir(),
        "my-skill",
        "---\nname: My Skill\ndescription: Bad name\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let s = only_skill(&list, "my-skill");
    let warnings = strings(&s["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("name `My Skill` contains 'M'"),
        "{warnings:?}"
    );
    assert!(
        warnings[0].ends_with("the skill is listed under its directory name `my-skill`"),
        "{warnings:?}"
    );
    assert_error(fx.json(&["load", "My Skill"]), "SKILL_NOT_FOUND", 1);
}

#[test]
fn invalid_name_characters_in_an_invalid_directory_are_skipped() {
    let fx = Fixture::new();
    fx.skill(&fx.project_dir(), "good", "Fine");
    let bad = fx.skill_md(
        &fx.project_dir(),
        "cortx:auto",
        "---\nname: cortx:auto\ndescription: Namespaced\n---\nBody\n",
    );
    let list = list(&fx, &[]);
    let warning = skipped_warning(&list);
    let prefix = format!("skipped {}: name `cortx:auto` contains ':'", bad.display());
    assert!(warning.starts_with(&prefix), "{warning}");
    assert!(
        warning.ends_with("and the directory name `cortx:auto` is not a valid name either"),
        "{warning}"
    );
    assert_error(fx.json(&["load", "cortx:auto"]), "SKILL_NOT_FOUND", 1);
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
