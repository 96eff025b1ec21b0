//! `skillhost validate PATH`: check a skill's whole contract before it is
//! installed or served: frontmatter, `skill.yaml`, component files, schemas,
//! permissions, limits, and that each `wasm` component compiles and targets
//! a supported world.

use std::fs;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::ExecConfig;
use crate::exec::Executor;
use crate::fsguard;
use crate::registry::ENTRY_FILE;
use crate::skill::files::{load_entry, load_manifest};
use crate::skill::manifest::{Component, MANIFEST_FILE, Runtime, implied_components};

/// What `validate` found.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// True when there are no errors (warnings allowed).
    pub ok: bool,
    /// The skill's name, when SKILL.md could be parsed.
    pub skill: Option<String>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    pub components: Vec<ComponentReport>,
}

/// One component as validated.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ComponentReport {
    pub name: String,
    pub path: String,
    pub runtime: Option<Runtime>,
    /// For wasm components that compiled: `wasi:cli/command` or `skillhost:skill/skill`.
    pub world: Option<String>,
}

/// Validate the skill directory at `dir`. `host_checks`: also check what
/// this host needs to run the skill (an interpreter and a usable sandbox for
/// scripts); installs skip that.
pub(crate) fn validate(
    dir: &Path,
    executor: &Executor,
    exec: &ExecConfig,
    max_bytes: u64,
    host_checks: bool,
) -> Report {
    let mut report = Report {
        ok: false,
        skill: None,
        errors: Vec::new(),
        warnings: Vec::new(),
        components: Vec::new(),
    };
    let dir_name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let entry = dir.join(ENTRY_FILE);
    match fs::metadata(&entry) {
        Ok(meta) if meta.is_file() => {
            let loaded = load_entry(&entry, &meta, &dir_name, max_bytes);
            match loaded.result {
                Ok(parsed) => {
                    report.skill = Some(parsed.name.clone());
                    report.warnings.extend(parsed.warnings.iter().cloned());
                }
                Err(reason) => report.errors.push(format!("SKILL.md: {reason}")),
            }
        }
        _ => report
            .errors
            .push(format!("{} has no readable SKILL.md", dir.display())),
    }

    let manifest_path = dir.join(MANIFEST_FILE);
    let components: Vec<Component> = match fs::metadata(&manifest_path) {
        Ok(meta) if meta.is_file() => {
            match load_manifest(&manifest_path, &meta, max_bytes).result {
                Ok(manifest) => manifest.components.clone(),
                Err(reason) => {
                    report.errors.push(reason);
                    Vec::new()
                }
            }
        }
        _ => implied_components(implied_files(dir).iter().map(String::as_str)),
    };
    for component in &components {
        check_component(dir, component, executor, exec, host_checks, &mut report);
    }
    report.ok = report.errors.is_empty();
    report
}

fn check_component(
    dir: &Path,
    component: &Component,
    executor: &Executor,
    exec: &ExecConfig,
    host_checks: bool,
    report: &mut Report,
) {
    let name = &component.name;
    let runtime = component.effective_runtime();
    let mut world = None;
    let mut error = |message: String| report.errors.push(format!("component `{name}`: {message}"));
    match fsguard::normalize_relative(&component.path)
        .and_then(|rel| fsguard::open_in_skill(dir, &rel).map(|file| (rel, file)))
    {
        Err(problem) => error(format!("{}: {}", component.path, problem.message)),
        Ok((rel, file)) => match runtime {
            Some(Runtime::Wasi) => match executor.inspect(dir, &rel, file) {
                Ok(name) => world = Some(name.to_string()),
                Err(problem) => error(problem.message),
            },
            Some(runtime @ (Runtime::Python | Runtime::Bash)) if host_checks => {
                if let Err(problem) = executor.check_script_runtime(runtime) {
                    report.errors.push(format!("component `{name}`: {problem}"));
                }
            }
            _ => {}
        },
    }
    for (label, schema) in [
        ("input_schema", &component.input_schema),
        ("output_schema", &component.output_schema),
    ] {
        if let Some(schema) = schema
            && let Err(problem) = jsonschema::validator_for(schema)
        {
            report.errors.push(format!(
                "component `{name}`: {label} is not a valid JSON Schema: {problem}"
            ));
        }
    }
    for permission in &component.permissions.filesystem {
        let checked = fsguard::normalize_relative(&permission.path)
            .and_then(|rel| crate::exec::files::resolve_inside(dir, &rel));
        if let Err(problem) = checked {
            report.errors.push(format!(
                "component `{name}`: filesystem permission `{}`: {} (filesystem permissions name directories inside the skill)",
                permission.path, problem.message
            ));
        }
    }
    if !component.permissions.network.is_empty() {
        report.errors.push(format!(
            "component `{name}`: network access ({}) is not granted by this host yet; such a component is refused at run time",
            component.permissions.network.join(", ")
        ));
    }
    let limits = &component.limits;
    if limits.timeout_ms.is_some_and(|t| t > exec.max_timeout_ms) {
        report.warnings.push(format!(
            "component `{name}`: timeout_ms is above this host's bound of {} ms and will be capped",
            exec.max_timeout_ms
        ));
    }
    if limits.memory_mb.is_some_and(|m| m > exec.max_memory_mb) {
        report.warnings.push(format!(
            "component `{name}`: memory_mb is above this host's bound of {} MiB and will be capped",
            exec.max_memory_mb
        ));
    }
    report.components.push(ComponentReport {
        name: name.clone(),
        path: component.path.clone(),
        runtime,
        world,
    });
}

/// Files that imply components in a skill without a manifest, relative to
/// `dir`: everything below `components/` and the files directly in `scripts/`
/// (`implied_components` picks the `.wasm`, `.py` and `.sh` ones).
fn implied_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![
        (dir.join("components"), "components".to_string(), 0),
        (dir.join("scripts"), "scripts".to_string(), 8),
    ];
    while let Some((path, rel, depth)) = pending.pop() {
        let Ok(entries) = fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let child = format!("{rel}/{name}");
            if kind.is_dir() && depth < 8 {
                pending.push((entry.path(), child, depth + 1));
            } else if kind.is_file() {
                out.push(child);
            }
        }
    }
    out.sort();
    out
}
