//! `skill.yaml`: the optional manifest beside `SKILL.md` that declares a
//! skill's components (what can run, with which schemas, limits and
//! permissions). `SKILL.md` stays pure Agent Skills format.
//!
//! Without a manifest, every `components/**/*.wasm` file is a runnable `wasm`
//! component with default limits and no permissions.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::fsguard;

/// The manifest's file name, beside `SKILL.md`.
pub const MANIFEST_FILE: &str = "skill.yaml";

/// A parsed `skill.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The skill's own version (free-form, e.g. `1.0.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub components: Vec<Component>,
    /// Settings the skill needs, set with `skillhost config set` / `skill_config_set`.
    /// Every component of the skill receives them (scripts as environment
    /// variables, typed wasm components through `config-get`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, ConfigField>,
}

/// One setting of a skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigField {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(rename = "type", default)]
    pub kind: ConfigType,
    /// Never shown in any output, log or envelope.
    #[serde(default)]
    pub secret: bool,
    /// A run fails with INVALID_INPUT while this has no value and no default.
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// The allowed values of a `select`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ConfigType {
    #[default]
    Text,
    Number,
    Select,
    Switch,
}

impl ConfigField {
    /// Check a value against the field's type; returns it as the string a
    /// component receives.
    pub fn check(&self, key: &str, value: &Value) -> Result<String, String> {
        match (self.kind, value) {
            (ConfigType::Text, Value::String(s)) => Ok(s.clone()),
            (ConfigType::Text, Value::Number(n)) => Ok(n.to_string()),
            (ConfigType::Text, Value::Bool(b)) => Ok(b.to_string()),
            (ConfigType::Number, Value::Number(n)) => Ok(n.to_string()),
            (ConfigType::Number, Value::String(s)) if s.trim().parse::<f64>().is_ok() => {
                Ok(s.trim().to_string())
            }
            (ConfigType::Switch, Value::Bool(b)) => Ok(b.to_string()),
            (ConfigType::Switch, Value::String(s)) if s == "true" || s == "false" => Ok(s.clone()),
            (ConfigType::Select, Value::String(s)) if self.values.contains(s) => Ok(s.clone()),
            (ConfigType::Select, _) => Err(format!(
                "`{key}` must be one of: {}",
                self.values.join(", ")
            )),
            (kind, _) => Err(format!(
                "`{key}` must be a {} value",
                format!("{kind:?}").to_lowercase()
            )),
        }
    }
}

/// What a component is. Only `wasm` and `script` components can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ComponentType {
    Wasm,
    Script,
    Reference,
    Example,
    Template,
    Document,
    Artifact,
}

impl ComponentType {
    pub fn is_executable(self) -> bool {
        matches!(self, ComponentType::Wasm | ComponentType::Script)
    }
}

/// Which runtime executes a component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// A WebAssembly component in wasmtime.
    Wasi,
    /// A Python script in the bubblewrap sandbox.
    Python,
    /// A Bash script in the bubblewrap sandbox.
    Bash,
}

/// One declared component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Component {
    /// Unique within the skill; the `component` argument of `skill_run`.
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ComponentType,
    /// File path relative to the skill directory.
    pub path: String,
    /// `wasi` for `wasm` components (the default); `python` or `bash` for scripts
    /// (default from the file extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema the input object must satisfy before anything runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema `output_data` must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub limits: LimitRequest,
    #[serde(default)]
    pub permissions: Permissions,
}

impl Component {
    /// The runtime that executes it: declared, or implied by type and extension.
    pub fn effective_runtime(&self) -> Option<Runtime> {
        if let Some(runtime) = self.runtime {
            return Some(runtime);
        }
        match self.kind {
            ComponentType::Wasm => Some(Runtime::Wasi),
            ComponentType::Script if self.path.ends_with(".py") => Some(Runtime::Python),
            ComponentType::Script if self.path.ends_with(".sh") => Some(Runtime::Bash),
            _ => None,
        }
    }
}

/// Limits a component asks for; each unset one takes the host's default, and
/// the host's bounds cap them all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// WebAssembly work budget (roughly one unit per instruction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Bytes of stdout and of stderr kept (each); the rest is counted and dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
}

/// What a component may touch. Everything not declared is denied.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Skill-relative directories the component may read (or write, into a
    /// per-execution copy).
    #[serde(default)]
    pub filesystem: Vec<FsPermission>,
    /// Names of configuration values the host may pass (as environment
    /// variables, and through `config-get`).
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts the component may reach. Network access is not granted yet:
    /// a component that declares hosts is refused.
    #[serde(default)]
    pub network: Vec<String>,
}

/// One skill-relative directory and how it may be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsPermission {
    pub path: String,
    #[serde(default)]
    pub access: Access,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    #[default]
    Read,
    Write,
}

/// Parse `skill.yaml` text. `Err` is a message naming what is wrong.
pub fn parse_manifest(text: &str) -> Result<Manifest, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Ok(Manifest::default());
    }
    let manifest: Manifest =
        serde_yaml::from_str(text).map_err(|e| format!("skill.yaml is invalid: {e}"))?;
    check(&manifest)?;
    Ok(manifest)
}

/// Rules serde cannot express: unique names, safe paths, known runtimes.
fn check(manifest: &Manifest) -> Result<(), String> {
    for (key, field) in &manifest.config {
        let valid = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "skill.yaml: config key `{key}` must look like an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            ));
        }
        if field.kind == ConfigType::Select && field.values.is_empty() {
            return Err(format!(
                "skill.yaml: config `{key}` is a select without `values`"
            ));
        }
        if let Some(default) = &field.default {
            field
                .check(key, default)
                .map_err(|why| format!("skill.yaml: config default: {why}"))?;
        }
    }
    let mut names = BTreeSet::new();
    for component in &manifest.components {
        let name = &component.name;
        if name.trim().is_empty() {
            return Err("skill.yaml: a component has an empty name".into());
        }
        if !names.insert(name.as_str()) {
            return Err(format!("skill.yaml: component `{name}` is declared twice"));
        }
        fsguard::normalize_relative(&component.path)
            .map_err(|e| format!("skill.yaml: component `{name}`: path: {}", e.message))?;
        for permission in &component.permissions.filesystem {
            fsguard::normalize_relative(&permission.path).map_err(|e| {
                format!(
                    "skill.yaml: component `{name}`: filesystem permission: {}",
                    e.message
                )
            })?;
        }
        if component.kind.is_executable() && component.effective_runtime().is_none() {
            return Err(format!(
                "skill.yaml: component `{name}` is a script but its runtime is unknown; set `runtime: python` or `runtime: bash`"
            ));
        }
        if let (ComponentType::Wasm, Some(runtime)) = (component.kind, component.runtime)
            && runtime != Runtime::Wasi
        {
            return Err(format!(
                "skill.yaml: component `{name}` is `wasm` but declares runtime `{runtime:?}`; wasm components run on `wasi`"
            ));
        }
        for (label, schema) in [
            ("input_schema", &component.input_schema),
            ("output_schema", &component.output_schema),
        ] {
            if let Some(schema) = schema
                && !(schema.is_object() || schema.is_boolean())
            {
                return Err(format!(
                    "skill.yaml: component `{name}`: {label} must be a JSON Schema object"
                ));
            }
        }
    }
    Ok(())
}

/// Components implied by the files of a skill without a manifest: every
/// `components/**/*.wasm` and every `scripts/*.py` and `scripts/*.sh`, named
/// after the file stem (or, when two files share a stem, their path).
pub fn implied_components<'a>(files: impl Iterator<Item = &'a str>) -> Vec<Component> {
    let mut out: Vec<Component> = Vec::new();
    for path in files {
        let (kind, runtime, stem) = if let Some(rest) = path.strip_prefix("components/")
            && let Some(stem) = rest.strip_suffix(".wasm")
        {
            (ComponentType::Wasm, Runtime::Wasi, stem)
        } else if let Some(rest) = path.strip_prefix("scripts/")
            && !rest.contains('/')
        {
            match (rest.strip_suffix(".py"), rest.strip_suffix(".sh")) {
                (Some(stem), _) => (ComponentType::Script, Runtime::Python, stem),
                (_, Some(stem)) => (ComponentType::Script, Runtime::Bash, stem),
                _ => continue,
            }
        } else {
            continue;
        };
        let short = stem.rsplit('/').next().unwrap_or(stem);
        let name = if out.iter().any(|c| c.name == short) {
            path.to_string()
        } else {
            short.to_string()
        };
        out.push(Component {
            name,
            kind,
            path: path.to_string(),
            runtime: Some(runtime),
            description: None,
            input_schema: None,
            output_schema: None,
            limits: LimitRequest::default(),
            permissions: Permissions::default(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
version: 1.0.0
components:
  - name: word-count          # unique within the skill
    type: wasm                # wasm | script | reference | example | template | document | artifact
    path: components/word_count.wasm
    description: Count words in a text
    input_schema: { type: object, properties: { text: { type: string } }, required: [text] }
    output_schema: { type: object }
    limits: { timeout_ms: 5000, memory_mb: 64, fuel: 1000000000, max_output_bytes: 1048576 }
    permissions:
      filesystem: [ { path: data, access: read } ]   # skill-relative; read | write
      env: [ API_KEY ]                                # names passed from the host's config
      network: []                                     # hosts; empty = none
"#;

    #[test]
    fn the_documented_example_parses() {
        let manifest = parse_manifest(EXAMPLE).unwrap();
        assert_eq!(manifest.version.as_deref(), Some("1.0.0"));
        let c = &manifest.components[0];
        assert_eq!(
            (c.name.as_str(), c.kind),
            ("word-count", ComponentType::Wasm)
        );
        assert_eq!(c.effective_runtime(), Some(Runtime::Wasi));
        assert_eq!(c.limits.fuel, Some(1_000_000_000));
        assert_eq!(c.permissions.filesystem[0].access, Access::Read);
        assert_eq!(c.permissions.env, ["API_KEY"]);
        assert_eq!(c.input_schema.as_ref().unwrap()["required"][0], "text");
    }

    #[test]
    fn minimal_component_takes_defaults() {
        let m = parse_manifest("components:\n  - {name: a, type: script, path: scripts/a.py}\n")
            .unwrap();
        assert_eq!(m.components[0].effective_runtime(), Some(Runtime::Python));
        assert_eq!(m.components[0].limits, LimitRequest::default());
        assert!(parse_manifest("").unwrap().components.is_empty());
    }

    #[test]
    fn mistakes_are_reported() {
        for (text, why) in [
            (
                "components:\n  - {name: a, type: wasm, path: a.wasm, colour: red}\n",
                "unknown field `colour`",
            ),
            (
                "components:\n  - {name: a, type: binary, path: a}\n",
                "unknown variant `binary`",
            ),
            (
                "components:\n  - {name: a, type: wasm, path: a.wasm}\n  - {name: a, type: wasm, path: b.wasm}\n",
                "declared twice",
            ),
            (
                "components:\n  - {name: a, type: wasm, path: ../a.wasm}\n",
                "contains `..`",
            ),
            (
                "components:\n  - {name: a, type: wasm, path: a.wasm, permissions: {filesystem: [{path: /etc}]}}\n",
                "absolute",
            ),
            (
                "components:\n  - {name: a, type: script, path: a.rb}\n",
                "runtime is unknown",
            ),
            (
                "components:\n  - {name: a, type: wasm, path: a.wasm, runtime: python}\n",
                "run on `wasi`",
            ),
            (
                "components:\n  - {name: a, type: wasm, path: a.wasm, input_schema: 3}\n",
                "JSON Schema object",
            ),
            ("components: [\n", "skill.yaml is invalid"),
        ] {
            let err = parse_manifest(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn wasm_files_and_scripts_are_implied() {
        let files = [
            "components/echo.wasm",
            "components/x/echo.wasm",
            "scripts/run.py",
            "scripts/run.sh",
            "scripts/lib/helper.py",
            "scripts/notes.txt",
            "lib.wasm",
        ];
        let implied = implied_components(files.into_iter());
        let names: Vec<&str> = implied.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["echo", "components/x/echo.wasm", "run", "scripts/run.sh"]
        );
        assert_eq!(implied[2].effective_runtime(), Some(Runtime::Python));
        assert_eq!(implied[3].effective_runtime(), Some(Runtime::Bash));
    }
}
