//! Error kinds and the error type every face (CLI, MCP, HTTP) renders.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A stable, machine-readable error category. Serialized in
/// `SCREAMING_SNAKE_CASE` (`SKILL_NOT_FOUND`, ...); clients branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorKind {
    /// No enabled skill has this name in any source.
    SkillNotFound,
    /// The skill exists but is disabled.
    SkillDisabled,
    /// The requested revision is not the skill's (or no longer exists).
    RevisionNotFound,
    /// The skill declares no component with this name.
    ComponentNotFound,
    /// The component exists but cannot run (a reference, template, ...).
    InvalidComponentType,
    /// The skill exists but the file does not.
    FileNotFound,
    /// The path is absolute, contains `..`, or a symlink in it leads outside the skill.
    PathOutsideSkill,
    /// The path is empty, contains NUL, or names something that is not a regular file.
    InvalidPath,
    /// The file is larger than the configured read limit.
    FileTooLarge,
    /// A request argument is malformed, or the input does not match the input schema.
    InvalidInput,
    /// Not permitted: a hidden file, an undeclared capability, or the operating system said no.
    AccessDenied,
    /// The sandbox needed to run the component is not usable on this host.
    SandboxUnavailable,
    /// The component ran out of time (wall clock) or of fuel (its work budget).
    ExecutionTimeout,
    /// The component hit a memory, stack, output or concurrency limit.
    ResourceExhausted,
    /// The component failed: a trap, a non-zero exit or an error it returned.
    ScriptExecutionError,
    /// The component's output does not match its output schema.
    OutputSchemaMismatch,
    /// The client cancelled the request while the component ran.
    Cancelled,
    /// `expected_version` is stale: another writer changed the skill.
    VersionConflict,
    /// An unexpected I/O failure on the host side.
    IoError,
}

impl ErrorKind {
    /// The wire name, e.g. `SKILL_NOT_FOUND`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::SkillNotFound => "SKILL_NOT_FOUND",
            ErrorKind::SkillDisabled => "SKILL_DISABLED",
            ErrorKind::RevisionNotFound => "REVISION_NOT_FOUND",
            ErrorKind::ComponentNotFound => "COMPONENT_NOT_FOUND",
            ErrorKind::InvalidComponentType => "INVALID_COMPONENT_TYPE",
            ErrorKind::FileNotFound => "FILE_NOT_FOUND",
            ErrorKind::PathOutsideSkill => "PATH_OUTSIDE_SKILL",
            ErrorKind::InvalidPath => "INVALID_PATH",
            ErrorKind::FileTooLarge => "FILE_TOO_LARGE",
            ErrorKind::InvalidInput => "INVALID_INPUT",
            ErrorKind::AccessDenied => "ACCESS_DENIED",
            ErrorKind::SandboxUnavailable => "SANDBOX_UNAVAILABLE",
            ErrorKind::ExecutionTimeout => "EXECUTION_TIMEOUT",
            ErrorKind::ResourceExhausted => "RESOURCE_EXHAUSTED",
            ErrorKind::ScriptExecutionError => "SCRIPT_EXECUTION_ERROR",
            ErrorKind::OutputSchemaMismatch => "OUTPUT_SCHEMA_MISMATCH",
            ErrorKind::Cancelled => "CANCELLED",
            ErrorKind::VersionConflict => "VERSION_CONFLICT",
            ErrorKind::IoError => "IO_ERROR",
        }
    }

    /// CLI exit code (SPEC X4): 1 caller error, 2 system error (limits,
    /// sandbox, I/O), 3 external error (the skill's own code failed).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::SkillNotFound
            | ErrorKind::SkillDisabled
            | ErrorKind::RevisionNotFound
            | ErrorKind::ComponentNotFound
            | ErrorKind::InvalidComponentType
            | ErrorKind::FileNotFound
            | ErrorKind::PathOutsideSkill
            | ErrorKind::InvalidPath
            | ErrorKind::InvalidInput
            | ErrorKind::AccessDenied
            | ErrorKind::VersionConflict => 1,
            ErrorKind::FileTooLarge
            | ErrorKind::SandboxUnavailable
            | ErrorKind::ExecutionTimeout
            | ErrorKind::ResourceExhausted
            | ErrorKind::Cancelled
            | ErrorKind::IoError => 2,
            ErrorKind::ScriptExecutionError | ErrorKind::OutputSchemaMismatch => 3,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with a kind and a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct HostError {
    pub kind: ErrorKind,
    pub message: String,
}

impl HostError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        HostError {
            kind,
            message: message.into(),
        }
    }
}

/// The JSON body used for errors by every face: `{"error": {"kind", "message"}}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    pub error: HostError,
}

impl From<HostError> for ErrorBody {
    fn from(error: HostError) -> Self {
        ErrorBody { error }
    }
}
