//! Human and `--json` output of the CLI, and exit codes for errors.

use std::io::Write;

use base64::Engine as _;
use serde::Serialize;

use crate::api::Encoding;
use crate::error::{ErrorBody, HostError};

pub(super) fn print_json<T: Serialize>(value: &T) -> i32 {
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer_pretty(&mut out, value) {
        Ok(()) => {
            let _ = writeln!(out);
            0
        }
        Err(error) => {
            eprintln!("error: cannot write JSON: {error}");
            2
        }
    }
}

pub(super) fn report(error: HostError, json: bool) -> i32 {
    let code = error.kind.exit_code();
    if json {
        print_json(&ErrorBody::from(error));
    } else {
        eprintln!("error: {error}");
    }
    code
}

pub(super) fn render_list(list: &crate::api::SkillList) {
    let mut out = std::io::stdout().lock();
    let width = list.skills.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for skill in &list.skills {
        let description = first_line(&skill.description, 100);
        let _ = writeln!(
            out,
            "{:width$}  {:8} {}",
            skill.name,
            skill.source.as_str(),
            description
        );
    }
    if list.skills.is_empty() {
        let _ = writeln!(out, "no skills found");
    }
    let _ = writeln!(out, "\nskills directories (first wins):");
    for dir in &list.skills_dirs {
        let missing = if dir.exists { "" } else { "  (missing)" };
        let _ = writeln!(out, "  {:8} {}{missing}", dir.source.as_str(), dir.path);
    }
    let skill_warnings = list
        .skills
        .iter()
        .flat_map(|s| s.warnings.iter().map(move |w| format!("{}: {w}", s.name)));
    for warning in list.warnings.iter().cloned().chain(skill_warnings) {
        eprintln!("warning: {warning}");
    }
}

/// Print a management result as JSON, or the error body; the exit code.
pub(super) fn answer<T: Serialize>(result: Result<T, HostError>) -> i32 {
    match result {
        Ok(value) => print_json(&value),
        Err(error) => report(error, true),
    }
}

pub(super) fn render_validation(path: &std::path::Path, report: &crate::validate::Report) {
    let mut out = std::io::stdout().lock();
    let name = report.skill.as_deref().unwrap_or("?");
    let verdict = if report.ok { "ok" } else { "invalid" };
    let _ = writeln!(out, "{verdict}: skill `{name}` at {}", path.display());
    for component in &report.components {
        let runtime = component
            .runtime
            .map(|r| format!("{r:?}").to_lowercase())
            .unwrap_or_else(|| "not executable".into());
        let world = component
            .world
            .as_deref()
            .map(|w| format!(", {w}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  component {} ({}): {runtime}{world}",
            component.name, component.path
        );
    }
    for error in &report.errors {
        let _ = writeln!(out, "  error: {error}");
    }
    for warning in &report.warnings {
        let _ = writeln!(out, "  warning: {warning}");
    }
}

pub(super) fn render_load(skill: &crate::api::LoadedSkill) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "skill: {} ({})", skill.name, skill.source.as_str());
    let _ = writeln!(out, "dir:   {}", skill.skill_dir);
    if !skill.files.is_empty() {
        let _ = writeln!(out, "files:");
        for file in &skill.files {
            let kind = serde_json::to_value(file.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let _ = writeln!(out, "  {}  ({} bytes, {kind})", file.path, file.size);
        }
    }
    let _ = writeln!(out, "---\n{}", skill.instructions.trim_start_matches('\n'));
    for warning in &skill.warnings {
        eprintln!("warning: {warning}");
    }
}

pub(super) fn render_read(content: &crate::api::FileContent) -> i32 {
    let bytes = match content.encoding {
        Encoding::Utf8 => content.content.as_bytes().to_vec(),
        Encoding::Base64 => {
            match base64::engine::general_purpose::STANDARD.decode(&content.content) {
                Ok(bytes) => bytes,
                Err(error) => {
                    eprintln!("error: {error}");
                    return 2;
                }
            }
        }
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(&bytes).and_then(|_| out.flush()).is_err() {
        return 2;
    }
    if content.truncated {
        eprintln!(
            "note: returned bytes {}..{} of {}; use --offset {} for more",
            content.offset,
            content.offset + content.length,
            content.size,
            content.offset + content.length
        );
    }
    0
}

fn first_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > max_chars || text.lines().nth(1).is_some() {
        let cut: String = line.chars().take(max_chars.saturating_sub(1)).collect();
        format!("{}…", cut.trim_end())
    } else {
        line.to_string()
    }
}
