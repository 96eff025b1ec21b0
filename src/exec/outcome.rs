//! What a runtime reports about one run, before it becomes an envelope.

use std::time::Duration;

use super::envelope::Artifact;
use crate::error::ErrorKind;

#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) exit_code: Option<i32>,
    /// What a typed component's `run` returned.
    pub(crate) returned: Option<String>,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stdout_truncated: bool,
    pub(crate) stderr: Vec<u8>,
    pub(crate) stderr_truncated: bool,
    pub(crate) memory_peak_bytes: u64,
    /// WebAssembly only.
    pub(crate) fuel_consumed: Option<u64>,
    pub(crate) cpu_time: Duration,
    /// Files a script left in its scratch directory (scripts only).
    pub(crate) artifacts: Vec<Artifact>,
    /// Why the run failed, when it did.
    pub(crate) error: Option<(ErrorKind, String)>,
}

impl Outcome {
    /// An outcome for a run that never started.
    pub(crate) fn failed(kind: ErrorKind, message: impl Into<String>) -> Self {
        Outcome {
            error: Some((kind, message.into())),
            ..Outcome::default()
        }
    }
}
