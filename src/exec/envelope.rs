//! The execution envelope (SPEC X3): what every run returns, success or not.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ErrorKind;
use crate::skill::manifest::Runtime;

/// `{"kind": "execution", "data": {...}}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    pub kind: EnvelopeKind,
    pub data: Execution,
}

/// The envelope's discriminator; always `execution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EnvelopeKind {
    Execution,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The component finished, exited 0 and its output matched its schema.
    Succeeded,
    /// Anything else; `error_kind` and `error_message` say what.
    Failed,
    /// The client cancelled the request.
    Cancelled,
}

/// One execution, with every field filled from what really happened.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Execution {
    /// A fresh UUID per run.
    pub execution_id: String,
    pub skill: String,
    /// What ran: `sha256:` of the skill's SKILL.md and skill.yaml together with the
    /// component file. Pass it back as `revision` to insist on exactly this code.
    pub revision_id: String,
    pub component: String,
    /// The component's file, relative to the skill directory.
    pub component_path: String,
    pub runtime: Runtime,
    /// What isolated the run: `wasmtime`, `bubblewrap`, or `none` (only when the
    /// operator allowed unsandboxed scripts and no sandbox was usable).
    pub sandbox: SandboxKind,
    pub status: Status,
    /// The process exit code: WASI `exit(n)`, 0 when `run` returned normally;
    /// `null` when the component never finished (trap, timeout, limit).
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The output as JSON: stdout (command components) or the returned string
    /// (typed components), when it parses as JSON.
    pub output_data: Option<Value>,
    pub duration_ms: f64,
    /// Peak linear memory of the component's instances, in bytes.
    pub memory_peak_bytes: u64,
    /// CPU time the run took on the host thread that executed it.
    pub cpu_time_ms: f64,
    /// Fuel used (WebAssembly only).
    pub fuel_consumed: Option<u64>,
    /// RFC 3339 timestamps.
    pub started_at: String,
    pub finished_at: String,
    pub error_kind: Option<ErrorKind>,
    pub error_message: Option<String>,
    /// The limits that applied to this run.
    pub limits: AppliedLimits,
    /// Files a script left in its scratch directory (`HOME`, `/work`), bounded.
    pub artifacts: Vec<Artifact>,
}

/// How a run was isolated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SandboxKind {
    Wasmtime,
    Bubblewrap,
    /// No sandbox: the operator passed `--unsafe-allow-unsandboxed-scripts`.
    None,
}

/// A file a script left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    /// Path relative to the scratch directory.
    pub path: String,
    pub size: u64,
    /// `sha256:` and 64 hex digits.
    pub sha256: String,
    /// The text, for small UTF-8 files.
    pub content: Option<String>,
    /// Where the host keeps it until the retention period ends, when it does.
    pub kept_at: Option<String>,
}

/// Effective limits of one run, after defaults and the host's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppliedLimits {
    pub timeout_ms: u64,
    pub memory_bytes: u64,
    /// WebAssembly work budget; `null` for scripts.
    pub fuel: Option<u64>,
    /// Bytes of stdout and of stderr kept, each.
    pub max_output_bytes: u64,
}
