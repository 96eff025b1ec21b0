//! Request and response types shared by every face. MCP tool schemas are
//! generated from these types, so the CLI, MCP and HTTP bodies cannot drift.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::SourceKind;
use crate::skill::Component;

/// Arguments of `skill_list`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// Also list disabled skills (skills can be disabled once the managed store lands; today every skill is enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_disabled: Option<bool>,
}

/// Arguments of `skill_load`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadRequest {
    /// Exact skill name as returned by skill_list.
    pub name: String,
    /// A revision of a skill installed in the managed store (see skill_revisions); default: the active one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// Arguments of `skill_read`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadRequest {
    /// Exact skill name as returned by skill_list.
    pub name: String,
    /// File path relative to the skill directory, as listed by skill_load (e.g. `references/api.md`).
    pub path: String,
    /// Byte offset to start reading at (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Maximum number of bytes to return (default: the rest of the file, up to the host's read limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    /// A revision of a skill installed in the managed store; default: the active one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// Arguments of `skill_run`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Exact skill name as returned by skill_list.
    pub name: String,
    /// Component name as listed by skill_load (`components[].name`).
    pub component: String,
    /// The input JSON object, checked against the component's input_schema (default `{}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub input: Option<Value>,
    /// Insist on this revision (the `revision_id` of an earlier run); fails with REVISION_NOT_FOUND when the skill changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Wall-clock limit for this run, from 1 second to the host's bound (default: the component's own limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
}

/// Result of `skill_list`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkillList {
    /// Accepted skills, sorted by name.
    pub skills: Vec<SkillSummary>,
    /// Every skills directory in priority order (first wins on a name clash).
    pub skills_dirs: Vec<SkillsDir>,
    /// Skipped and shadowed skills, unreadable directories, limits reached.
    pub warnings: Vec<String>,
}

/// One skill in `skill_list`: enough to choose it, without its instructions.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkillSummary {
    pub name: String,
    pub description: String,
    /// Which source it came from: project, managed, global or extra.
    pub source: SourceKind,
    /// The skills directory it was found in.
    pub source_path: String,
    /// Absolute path of its SKILL.md.
    pub entry_path: String,
    /// Related files, relative to the skill directory (bounded; see warnings).
    pub files: Vec<String>,
    /// False for a disabled skill (listed only with include_disabled).
    pub enabled: bool,
    /// The active revision, for skills installed in the managed store.
    pub revision_id: Option<String>,
    /// Non-fatal problems with this skill.
    pub warnings: Vec<String>,
}

/// A skills directory and whether it exists now.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkillsDir {
    pub source: SourceKind,
    pub path: String,
    pub exists: bool,
}

/// Result of `skill_load`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LoadedSkill {
    pub name: String,
    pub description: String,
    pub source: SourceKind,
    /// Every frontmatter key of SKILL.md, as JSON.
    pub frontmatter: Map<String, Value>,
    /// The Markdown instructions (SKILL.md without its frontmatter).
    pub instructions: String,
    /// Absolute path of the skill directory; related file paths are relative to it.
    pub skill_dir: String,
    /// Related files with their sizes and kinds (bounded; see warnings).
    pub files: Vec<FileInfo>,
    /// Components declared in `skill.yaml` (or, without one, every
    /// `components/**/*.wasm` and `scripts/*.py|*.sh`); run the executable ones with skill_run.
    pub components: Vec<Component>,
    /// The revision shown, for skills installed in the managed store.
    pub revision_id: Option<String>,
    /// Non-fatal problems with this skill.
    pub warnings: Vec<String>,
}

/// A related file of a skill.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FileInfo {
    /// Path relative to the skill directory; pass it to skill_read.
    pub path: String,
    pub size: u64,
    pub kind: FileKind,
}

/// What a related file is, guessed from its folder and extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// Documentation to read when needed (`references/`, `*.md`, `*.txt`).
    Reference,
    /// A Python or shell script (`scripts/`, `*.py`, `*.sh`).
    Script,
    /// A WebAssembly module or component (`*.wasm`).
    Wasm,
    /// A file meant to be filled in or copied (`templates/`).
    Template,
    /// Static material such as images or fonts (`assets/`).
    Asset,
    /// Anything else.
    File,
}

impl FileKind {
    /// Classify a `/`-separated skill-relative path.
    pub fn classify(path: &str) -> FileKind {
        let ext = path
            .rsplit('/')
            .next()
            .and_then(|name| name.rsplit_once('.'))
            .map(|(_, ext)| ext.to_ascii_lowercase())
            .unwrap_or_default();
        let top = path.split('/').next().unwrap_or("");
        let in_dir = |names: &[&str]| path.contains('/') && names.contains(&top);
        if ext == "wasm" {
            FileKind::Wasm
        } else if in_dir(&["scripts", "script", "bin"])
            || matches!(ext.as_str(), "py" | "sh" | "bash")
        {
            FileKind::Script
        } else if in_dir(&["templates", "template"]) {
            FileKind::Template
        } else if in_dir(&["assets", "asset", "static"]) {
            FileKind::Asset
        } else if in_dir(&["references", "reference", "docs"])
            || matches!(ext.as_str(), "md" | "markdown" | "txt" | "rst")
        {
            FileKind::Reference
        } else {
            FileKind::File
        }
    }
}

/// How `content` is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Encoding {
    /// Text, returned as is.
    #[serde(rename = "utf-8")]
    Utf8,
    /// Binary data (or text with NUL bytes), base64-encoded.
    #[serde(rename = "base64")]
    Base64,
}

/// Result of `skill_read`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FileContent {
    pub name: String,
    /// The normalized skill-relative path that was read.
    pub path: String,
    pub encoding: Encoding,
    pub content: String,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// Where the returned bytes start.
    pub offset: u64,
    /// Number of file bytes returned (before base64).
    pub length: u64,
    /// True when the file continues after the returned bytes.
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::FileKind;

    #[test]
    fn classifies_by_folder_then_extension() {
        assert_eq!(FileKind::classify("scripts/run.py"), FileKind::Script);
        assert_eq!(FileKind::classify("helper.sh"), FileKind::Script);
        assert_eq!(FileKind::classify("components/x.wasm"), FileKind::Wasm);
        assert_eq!(FileKind::classify("templates/form.md"), FileKind::Template);
        assert_eq!(FileKind::classify("assets/logo.png"), FileKind::Asset);
        assert_eq!(FileKind::classify("references/api.md"), FileKind::Reference);
        assert_eq!(FileKind::classify("REFERENCE.md"), FileKind::Reference);
        assert_eq!(FileKind::classify("data/table.csv"), FileKind::File);
        assert_eq!(FileKind::classify("scripts"), FileKind::File);
    }
}

/// Arguments of `skill_install`: exactly one of `path`, `package_base64`
/// or `skill_md` (with optional `files`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallRequest {
    /// A skill directory or a `.tar.gz` package on the host (over MCP: inside the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A `.tar.gz` package, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package_base64: Option<String>,
    /// The SKILL.md text, for an install from raw parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_md: Option<String>,
    /// Further files for a raw-parts install (scripts, references, skill.yaml, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<InstallFile>>,
    /// The version skill_revisions reported (0 for a new skill); VERSION_CONFLICT if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
}

/// One file of a raw-parts install.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallFile {
    /// Path relative to the skill directory.
    pub path: String,
    pub content: String,
    /// `utf-8` (default) or `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
}

/// Result of `skill_install`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Installed {
    pub name: String,
    pub revision_id: String,
    pub version: u64,
    /// False when the content equals a revision already kept (it is made active again).
    pub new_revision: bool,
    pub warnings: Vec<String>,
}

/// Arguments of `skill_remove`, `skill_enable`, `skill_disable`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangeRequest {
    pub name: String,
    /// The version skill_revisions reported; VERSION_CONFLICT if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
}

/// Arguments of `skill_activate` (rollback).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActivateRequest {
    pub name: String,
    /// A revision id from skill_revisions.
    pub revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
}

/// Arguments of `skill_config_set`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigSetRequest {
    pub name: String,
    /// A key declared under `config` in the skill's skill.yaml.
    pub key: String,
    /// The value (checked against the field's type); null or absent to unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_version: Option<u64>,
}

/// Arguments of `skill_revisions`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevisionsRequest {
    pub name: String,
}

/// An installed skill's state in the store (result of every management tool).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StoredSkill {
    pub name: String,
    /// False after skill_remove.
    pub installed: bool,
    pub version: u64,
    pub enabled: bool,
    pub active_revision: Option<String>,
    /// Oldest first.
    pub revisions: Vec<StoredRevision>,
    /// Config values set through the store; secret ones shown as `***`.
    pub config: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StoredRevision {
    pub id: String,
    pub created_at: String,
    pub source: String,
    pub files: u64,
    pub bytes: u64,
    pub active: bool,
}
