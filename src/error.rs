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
    /// The skill exists but the file does not.
    FileNotFound,
    /// The path is absolute, contains `..`, or a symlink in it leads outside the skill.
    PathOutsideSkill,
    /// The path is empty, contains NUL, or names something that is not a regular file.
    InvalidPath,
    /// The file is larger than the configured read limit.
    FileTooLarge,
    /// A request argument is malformed (bad range, bad name, ...).
    InvalidInput,
    /// The file is not served: a hidden entry, or the operating system refused access.
    AccessDenied,
    /// An unexpected I/O failure on the host side.
    IoError,
}

impl ErrorKind {
    /// The wire name, e.g. `SKILL_NOT_FOUND`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::SkillNotFound => "SKILL_NOT_FOUND",
            ErrorKind::FileNotFound => "FILE_NOT_FOUND",
            ErrorKind::PathOutsideSkill => "PATH_OUTSIDE_SKILL",
            ErrorKind::InvalidPath => "INVALID_PATH",
            ErrorKind::FileTooLarge => "FILE_TOO_LARGE",
            ErrorKind::InvalidInput => "INVALID_INPUT",
            ErrorKind::AccessDenied => "ACCESS_DENIED",
            ErrorKind::IoError => "IO_ERROR",
        }
    }

    /// CLI exit code (SPEC X4): 1 for caller errors, 2 for system errors
    /// (limits, I/O).
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::SkillNotFound
            | ErrorKind::FileNotFound
            | ErrorKind::PathOutsideSkill
            | ErrorKind::InvalidPath
            | ErrorKind::InvalidInput
            | ErrorKind::AccessDenied => 1,
            ErrorKind::FileTooLarge | ErrorKind::IoError => 2,
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
