//! Per-run guest state: the WASI context, the memory limiter, captured
//! output, and the host services of the typed `skillhost:skill` world.

use std::collections::BTreeMap;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::output::CappedOutput;
use crate::exec::ProgressFn;

wasmtime::component::bindgen!({
    world: "skill",
    path: "wit",
});

pub(crate) use self::skillhost::skill::host::LogLevel;

/// Errors raised from host callbacks to stop a guest, told apart afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Stop {
    #[error("the run passed its wall-clock deadline")]
    Deadline,
    #[error("the request was cancelled")]
    Cancelled,
    #[error("the run tried to grow its memory past the limit")]
    MemoryLimit,
}

/// Tracks linear memory across all of a run's instances and refuses growth
/// past the limit, remembering that it did (a guest whose allocation fails
/// usually aborts, which would otherwise look like a plain trap).
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    limit: usize,
    total: usize,
    pub(crate) peak: usize,
    pub(crate) hit: bool,
}

/// Table elements one run may hold (function references).
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl MemoryLimiter {
    pub(crate) fn new(limit: usize) -> Self {
        MemoryLimiter {
            limit,
            total: 0,
            peak: 0,
            hit: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.total + desired.saturating_sub(current);
        if total > self.limit {
            self.hit = true;
            return Err(wasmtime::Error::new(Stop::MemoryLimit));
        }
        self.total = total;
        self.peak = self.peak.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        16
    }
}

/// Everything one run's `Store` holds.
pub(crate) struct GuestState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    /// The guest's stderr; `log` lines are appended to it too.
    pub(crate) stderr: CappedOutput,
    /// Values of the keys the component declared (for `config-get`).
    pub(crate) config: BTreeMap<String, String>,
    pub(crate) progress: Option<ProgressFn>,
    /// `skill/component`, for log lines.
    pub(crate) label: String,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl skillhost::skill::types::Host for GuestState {}

impl skillhost::skill::host::Host for GuestState {
    fn log(&mut self, level: LogLevel, message: String) {
        let label = &self.label;
        match level {
            LogLevel::Trace => tracing::trace!(component = %label, "{message}"),
            LogLevel::Debug => tracing::debug!(component = %label, "{message}"),
            LogLevel::Info => tracing::info!(component = %label, "{message}"),
            LogLevel::Warn => tracing::warn!(component = %label, "{message}"),
            LogLevel::Error => tracing::error!(component = %label, "{message}"),
        }
        let name = match level {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        self.stderr.push(format!("[{name}] {message}\n").as_bytes());
    }

    fn config_get(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }

    fn progress(&mut self, done: u64, total: Option<u64>, message: Option<String>) {
        if let Some(progress) = &self.progress {
            progress(done, total, message);
        }
    }
}
