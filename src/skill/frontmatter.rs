//! `SKILL.md` parsing and validation per the Agent Skills format, lenient
//! where real skills are: soft violations load with a warning, only what makes
//! a skill unusable (no frontmatter, no usable name or description) is refused.

use serde_json::{Map, Value};

/// Keys defined by the Agent Skills specification.
const SPEC_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_COMPATIBILITY_CHARS: usize = 500;

/// A parsed, validated `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSkillMd {
    pub name: String,
    pub description: String,
    /// Every frontmatter key, converted to JSON.
    pub frontmatter: Map<String, Value>,
    /// The Markdown after the closing `---`.
    pub instructions: String,
    /// Soft violations; the skill still loads.
    pub warnings: Vec<String>,
}

/// Parse `SKILL.md` text found in directory `dir_name`. `Err` carries the
/// reason the skill is unusable (it is then skipped with a warning).
pub fn parse_skill_md(text: &str, dir_name: &str) -> Result<ParsedSkillMd, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let normalized;
    let text = if text.contains('\r') {
        normalized = text.replace("\r\n", "\n").replace('\r', "\n");
        normalized.as_str()
    } else {
        text
    };
    let (yaml, instructions) = split_frontmatter(text)?;
    let mut warnings = Vec::new();
    let frontmatter = parse_yaml_mapping(yaml, &mut warnings)?;

    let name = skill_name(&frontmatter, dir_name, &mut warnings)?;

    let description = match frontmatter.get("description") {
        None | Some(Value::Null) => return Err("frontmatter has no `description`".into()),
        Some(value) => scalar_string(value).ok_or("`description` must be a string")?,
    };
    let description = description.trim().to_string();
    if description.is_empty() {
        return Err("`description` is empty".into());
    }
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        warnings.push(format!(
            "description is {chars} characters; the spec allows {MAX_DESCRIPTION_CHARS}"
        ));
    }

    check_optional_fields(&frontmatter, &mut warnings);
    Ok(ParsedSkillMd {
        name,
        description,
        frontmatter,
        instructions: instructions.to_string(),
        warnings,
    })
}

/// Split normalized text into (frontmatter YAML, body). The file must open
/// with a `---` line; the frontmatter ends at the next `---` (or `...`) line.
fn split_frontmatter(text: &str) -> Result<(&str, &str), String> {
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err("SKILL.md does not start with a `---` YAML frontmatter block".into());
    }
    let yaml_start = first.len();
    let mut offset = yaml_start;
    for line in lines {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed == "..." {
            let yaml = &text[yaml_start..offset];
            let body = &text[offset + line.len()..];
            return Ok((yaml, body));
        }
        offset += line.len();
    }
    Err("the frontmatter block is never closed with a `---` line".into())
}

fn parse_yaml_mapping(
    yaml: &str,
    warnings: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    if yaml.trim().is_empty() {
        return Err("the frontmatter is empty".into());
    }
    match serde_yaml::from_str::<serde_yaml::Value>(yaml) {
        Ok(serde_yaml::Value::Mapping(mapping)) => Ok(mapping
            .into_iter()
            .map(|(k, v)| (yaml_key(&k), yaml_to_json(v)))
            .collect()),
        Ok(_) => Err("the frontmatter is not a YAML mapping of keys to values".into()),
        Err(error) => {
            if let Some((repaired, keys)) = quote_values_with_colons(yaml)
                && let Ok(serde_yaml::Value::Mapping(mapping)) =
                    serde_yaml::from_str::<serde_yaml::Value>(&repaired)
            {
                warnings.push(format!(
                    "frontmatter is not valid YAML ({error}); read the value of {} as plain text",
                    keys.iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                return Ok(mapping
                    .into_iter()
                    .map(|(k, v)| (yaml_key(&k), yaml_to_json(v)))
                    .collect());
            }
            match parse_plain_lines(yaml) {
                Some(map) => {
                    warnings.push(format!(
                        "frontmatter is not valid YAML ({error}); read it as plain `key: value` lines"
                    ));
                    Ok(map)
                }
                None => Err(format!("the frontmatter is not valid YAML: {error}")),
            }
        }
    }
}

/// The most common YAML mistake in real skills is an unquoted value that
/// contains `: ` (`description: Use when: ...`). Quote every such top-level
/// value so the rest of the frontmatter (nested `metadata`, lists) can still
/// be parsed as YAML. Returns the repaired text and the keys it quoted.
fn quote_values_with_colons(yaml: &str) -> Option<(String, Vec<String>)> {
    let mut keys = Vec::new();
    let mut out = String::with_capacity(yaml.len() + 16);
    for line in yaml.split_inclusive('\n') {
        let content = line.trim_end_matches('\n');
        let repaired = top_level_pair(content).and_then(|(key, value)| {
            let plain = !value.starts_with(['"', '\'', '|', '>', '[', '{', '&', '*', '!', '#']);
            (plain && value.contains(": ")).then(|| {
                keys.push(key.to_string());
                format!("{key}: '{}'", value.trim_end().replace('\'', "''"))
            })
        });
        match repaired {
            Some(text) => {
                out.push_str(&text);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    (!keys.is_empty()).then_some((out, keys))
}

/// `key: value` on an unindented line with a simple key and a non-empty value.
fn top_level_pair(line: &str) -> Option<(&str, &str)> {
    if line.starts_with(char::is_whitespace) || line.starts_with('#') {
        return None;
    }
    let (key, value) = line.split_once(':')?;
    let simple_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let value = value.strip_prefix([' ', '\t'])?.trim();
    (simple_key && !value.is_empty()).then_some((key, value))
}

/// Fallback for frontmatter that other loaders accept although it is not
/// YAML, typically an unquoted `description: Use when: ...`. Succeeds only
/// when every line is a top-level `key: value` pair, a comment or blank.
fn parse_plain_lines(yaml: &str) -> Option<Map<String, Value>> {
    let mut map = Map::new();
    for line in yaml.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (key, value) = top_level_pair(line)?;
        if map.contains_key(key) {
            return None;
        }
        map.insert(key.to_string(), Value::String(unquote(value).to_string()));
    }
    (!map.is_empty()).then_some(map)
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(quote) && value.ends_with(quote) {
            return &value[1..value.len() - 1];
        }
    }
    value
}

/// The skill's name: the frontmatter `name` when it is valid; otherwise,
/// as Claude Code does, the directory name (with a warning) when that is
/// valid; otherwise the skill is refused.
fn skill_name(
    frontmatter: &Map<String, Value>,
    dir_name: &str,
    warnings: &mut Vec<String>,
) -> Result<String, String> {
    let declared = match frontmatter.get("name") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            scalar_string(value)
                .ok_or("`name` must be a string")?
                .trim()
                .to_string(),
        ),
    };
    let problem = match &declared {
        None => "frontmatter has no `name`".to_string(),
        Some(name) => match name_problem(name) {
            None => {
                let name = name.clone();
                if name != dir_name {
                    warnings.push(format!(
                        "name `{name}` differs from its directory `{dir_name}`; the skill is listed as `{name}`"
                    ));
                }
                hyphen_warning(&name, warnings);
                return Ok(name);
            }
            Some(problem) => problem,
        },
    };
    if name_problem(dir_name).is_some() {
        return Err(format!(
            "{problem}, and the directory name `{dir_name}` is not a valid name either"
        ));
    }
    warnings.push(format!(
        "{problem}; the skill is listed under its directory name `{dir_name}`"
    ));
    hyphen_warning(dir_name, warnings);
    Ok(dir_name.to_string())
}

/// Why `name` cannot identify a skill: empty, too long, or characters
/// outside `[a-z0-9-]`.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("`name` is empty".into());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Some(format!(
            "name `{name}` contains {bad:?} (names use only lowercase letters, digits and `-`)"
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!(
            "name `{name}` is longer than {MAX_NAME_CHARS} characters"
        ));
    }
    None
}

fn hyphen_warning(name: &str, warnings: &mut Vec<String>) {
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        warnings.push(format!(
            "name `{name}` has a leading, trailing or doubled `-`, which the spec does not allow"
        ));
    }
}

fn check_optional_fields(frontmatter: &Map<String, Value>, warnings: &mut Vec<String>) {
    if let Some(license) = frontmatter.get("license")
        && !license.is_string()
    {
        warnings.push("`license` should be a string".into());
    }
    if let Some(compat) = frontmatter.get("compatibility") {
        match compat.as_str() {
            Some(s) if s.chars().count() > MAX_COMPATIBILITY_CHARS => warnings.push(format!(
                "compatibility is {} characters; the spec allows {MAX_COMPATIBILITY_CHARS}",
                s.chars().count()
            )),
            Some(_) => {}
            None => warnings.push("`compatibility` should be a string".into()),
        }
    }
    if let Some(metadata) = frontmatter.get("metadata") {
        match metadata {
            Value::Object(map) => {
                let mut non_strings: Vec<&str> = map
                    .iter()
                    .filter(|(_, v)| !v.is_string())
                    .map(|(k, _)| k.as_str())
                    .collect();
                if !non_strings.is_empty() {
                    non_strings.sort_unstable();
                    warnings.push(format!(
                        "metadata values should be strings; not strings: {}",
                        non_strings.join(", ")
                    ));
                }
            }
            _ => warnings.push("`metadata` should be a map of strings".into()),
        }
    }
    if let Some(tools) = frontmatter.get("allowed-tools") {
        let ok = match tools {
            Value::String(_) => true,
            Value::Array(items) => items.iter().all(Value::is_string),
            _ => false,
        };
        if !ok {
            warnings.push("`allowed-tools` should be a space-separated string".into());
        }
    }
    let mut unknown: Vec<&str> = frontmatter
        .keys()
        .map(String::as_str)
        .filter(|k| !SPEC_KEYS.contains(k))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        warnings.push(format!(
            "frontmatter keys outside the Agent Skills spec (kept as given): {}",
            unknown.join(", ")
        ));
    }
}

/// Strings as they are; numbers and booleans in their YAML spelling.
fn scalar_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn yaml_key(key: &serde_yaml::Value) -> String {
    match key {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Null => "null".into(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Number(n) => n.to_string(),
        other => serde_yaml::to_string(other)
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default(),
    }
}

/// Convert YAML to JSON without failing: non-string keys become their YAML
/// spelling, tags are dropped, non-finite floats become strings.
fn yaml_to_json(value: serde_yaml::Value) -> Value {
    match value {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or_else(|| Value::String(n.to_string()))
            }
        }
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(items) => {
            Value::Array(items.into_iter().map(yaml_to_json).collect())
        }
        serde_yaml::Value::Mapping(mapping) => Value::Object(
            mapping
                .into_iter()
                .map(|(k, v)| (yaml_key(&k), yaml_to_json(v)))
                .collect(),
        ),
        serde_yaml::Value::Tagged(tagged) => yaml_to_json(tagged.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> ParsedSkillMd {
        parse_skill_md(text, "demo").expect("should parse")
    }

    #[test]
    fn minimal_skill_parses_without_warnings() {
        let p = ok("---\nname: demo\ndescription: Does a thing\n---\n# Body\n");
        assert_eq!(p.name, "demo");
        assert_eq!(p.description, "Does a thing");
        assert_eq!(p.instructions, "# Body\n");
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }

    #[test]
    fn block_scalars_and_quoted_escapes() {
        let p = ok(
            "---\nname: demo\ndescription: |-\n  line one\n  line two\nlicense: \"Apache\\t2.0 \\u00e9\"\n---\n",
        );
        assert_eq!(p.description, "line one\nline two");
        assert_eq!(p.frontmatter["license"], "Apache\t2.0 é");
        let folded = ok("---\nname: demo\ndescription: >\n  folded\n  text\n---\n");
        assert_eq!(folded.description, "folded text");
    }

    #[test]
    fn crlf_and_bom_are_accepted() {
        let p = ok("\u{feff}---\r\nname: demo\r\ndescription: x\r\n---\r\nBody\r\nmore\r\n");
        assert_eq!(p.name, "demo");
        assert_eq!(p.instructions, "Body\nmore\n");
    }

    #[test]
    fn soft_violations_warn() {
        let long = "x".repeat(1068);
        let text = format!(
            "---\nname: other\ndescription: {long}\nwhen_to_use: now\nmetadata:\n  version: 2\n---\n"
        );
        let p = parse_skill_md(&text, "demo").unwrap();
        assert_eq!(p.name, "other");
        let all = p.warnings.join("\n");
        assert!(all.contains("1068 characters"), "{all}");
        assert!(all.contains("differs from its directory"), "{all}");
        assert!(all.contains("when_to_use"), "{all}");
        assert!(all.contains("metadata values should be strings"), "{all}");
        assert_eq!(p.frontmatter["metadata"]["version"], 2);
    }

    #[test]
    fn unusable_skills_are_refused() {
        for (text, why) in [
            ("# no frontmatter\n", "does not start"),
            ("---\nname: demo\ndescription: x\n", "never closed"),
            ("---\n---\nbody", "empty"),
            ("---\nname: demo\n---\n", "no `description`"),
            ("---\nname: demo\ndescription: \"\"\n---\n", "empty"),
            ("---\nname: [a]\ndescription: x\n---\n", "must be a string"),
            ("---\n- a\n- b\n---\n", "not a YAML mapping"),
            (
                "---\nname: demo\n  description: : x\n---\n",
                "not valid YAML",
            ),
        ] {
            let err = parse_skill_md(text, "demo").unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
        // A bad or missing name is refused only when the directory name is no better.
        for text in [
            "---\ndescription: x\n---\n",
            "---\nname: Bad Name\ndescription: x\n---\n",
        ] {
            let err = parse_skill_md(text, "Bad Dir").unwrap_err();
            assert!(
                err.contains("directory name `Bad Dir` is not a valid name"),
                "{err}"
            );
        }
    }

    #[test]
    fn bad_or_missing_names_fall_back_to_the_directory_name() {
        for (text, why) in [
            ("---\ndescription: x\n---\n", "no `name`"),
            (
                "---\nname: Condition-Based Waiting\ndescription: x\n---\n",
                "contains 'C'",
            ),
            (
                "---\nname: cortx:auto\ndescription: x\n---\n",
                "contains ':'",
            ),
            ("---\nname: \"\"\ndescription: x\n---\n", "is empty"),
        ] {
            let p = parse_skill_md(text, "demo").unwrap();
            assert_eq!(p.name, "demo");
            assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
            assert!(p.warnings[0].contains(why), "{:?}", p.warnings);
            assert!(p.warnings[0].contains("listed under its directory name `demo`"));
        }
        let long = format!("---\nname: {}\ndescription: x\n---\n", "a".repeat(65));
        let p = parse_skill_md(&long, "demo").unwrap();
        assert!(p.warnings[0].contains("longer than 64"), "{:?}", p.warnings);
    }

    #[test]
    fn unquoted_colons_are_repaired_without_losing_nested_blocks() {
        let p = ok(
            "---\nname: demo\ndescription: Plan only: never edit files\nmetadata:\n  short-description: Plan\n  it's: fine\n---\n",
        );
        assert_eq!(p.description, "Plan only: never edit files");
        assert_eq!(p.frontmatter["metadata"]["short-description"], "Plan");
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        assert!(p.warnings[0].contains("read the value of `description` as plain text"));
        let quoted = ok("---\nname: demo\ndescription: It's simple: use it\n---\n");
        assert_eq!(quoted.description, "It's simple: use it");
    }

    #[test]
    fn unquoted_colon_in_description_falls_back_with_warning() {
        let p = ok("---\nname: demo\ndescription: Use when: the user asks\n---\n");
        assert_eq!(p.description, "Use when: the user asks");
        assert!(p.warnings[0].contains("not valid YAML"), "{:?}", p.warnings);
    }

    #[test]
    fn hyphen_oddities_warn_but_load() {
        let p = parse_skill_md("---\nname: a--b\ndescription: x\n---\n", "a--b").unwrap();
        assert!(p.warnings.iter().any(|w| w.contains("doubled")));
    }
}
