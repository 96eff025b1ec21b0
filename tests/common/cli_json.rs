//! JSON helpers for tests that drive the CLI with `--json`.
#![allow(dead_code)]

use serde_json::{Value, json};

use super::Fixture;

/// Names of the listed skills, in listed order.
pub fn names(list: &Value) -> Vec<String> {
    list["skills"]
        .as_array()
        .expect("skills array")
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

/// The listed skill with this name.
pub fn skill<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["skills"]
        .as_array()
        .expect("skills array")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("skill `{name}` not listed in {list:#}"))
}

/// A JSON array of strings as a Vec.
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|w| w.as_str().expect("string").to_string())
        .collect()
}

/// Run `list --json`, expecting exit 0.
pub fn list(fx: &Fixture, extra: &[&str]) -> Value {
    let mut args = vec!["list"];
    args.extend_from_slice(extra);
    let (code, value) = fx.json(&args);
    assert_eq!(code, 0, "{value:#}");
    value
}

/// Run `load NAME --json`, expecting exit 0.
pub fn load(fx: &Fixture, name: &str) -> Value {
    let (code, value) = fx.json(&["load", name]);
    assert_eq!(code, 0, "load {name}: {value:#}");
    value
}

/// Assert an error body `{"error": {"kind": KIND, ...}}` and the exit code.
pub fn assert_error(result: (i32, Value), kind: &str, code: i32) {
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
pub fn only_skill<'a>(list: &'a Value, name: &str) -> &'a Value {
    assert_eq!(names(list), vec![name.to_string()], "{list:#}");
    assert_eq!(list["warnings"], json!([]), "{list:#}");
    &list["skills"][0]
}

pub fn md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n")
}
