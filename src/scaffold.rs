//! `skillhost init NAME`: a new skill directory that validates and runs.

use std::fs;
use std::path::Path;

use crate::error::{ErrorKind, HostError};

/// Create `dir` with SKILL.md, skill.yaml and an example script component.
pub fn init(name: &str, dir: &Path) -> Result<(), HostError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !valid {
        return Err(HostError::new(
            ErrorKind::InvalidInput,
            format!(
                "`{name}` is not a valid skill name: use 1-64 lowercase letters, digits and single `-`"
            ),
        ));
    }
    if dir.exists() {
        return Err(HostError::new(
            ErrorKind::InvalidInput,
            format!("{} already exists; choose another --dir", dir.display()),
        ));
    }
    let files: [(&str, String); 4] = [
        (
            "SKILL.md",
            format!(
                "---\nname: {name}\ndescription: Describe what this skill does and when an agent should use it.\n---\n# {name}\n\nInstructions for the agent. Run the `hello` component with `{{\"name\": \"...\"}}` to greet\nsomeone; see `references/notes.md` for background.\n"
            ),
        ),
        (
            "skill.yaml",
            "version: 0.1.0\ncomponents:\n  - name: hello\n    type: script\n    runtime: python\n    path: scripts/hello.py\n    description: Greets `name`\n    input_schema:\n      type: object\n      properties: { name: { type: string } }\n      required: [name]\n    output_schema:\n      type: object\n      required: [message]\n    limits: { timeout_ms: 10000, memory_mb: 128 }\n".to_string(),
        ),
        (
            "scripts/hello.py",
            "\"\"\"Read {\"name\": ...} on stdin; print {\"message\": ...}.\"\"\"\nimport json\nimport sys\n\nrequest = json.load(sys.stdin)\njson.dump({\"message\": f\"Hello, {request['name']}!\"}, sys.stdout)\n".to_string(),
        ),
        (
            "references/notes.md",
            "# Notes\n\nBackground the agent reads only when the instructions point here.\n".to_string(),
        ),
    ];
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| {
                HostError::new(ErrorKind::IoError, format!("{}: {e}", parent.display()))
            })?;
        }
        fs::write(&path, text)
            .map_err(|e| HostError::new(ErrorKind::IoError, format!("{}: {e}", path.display())))?;
    }
    Ok(())
}
