//! The WebAssembly executor: wasmtime with fuel, an epoch-based wall-clock
//! deadline, a memory limiter, capped output and only the capabilities a
//! component declared.

mod cache;
mod guest;
mod output;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wasmtime::component::{Linker, ResourceTable};
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, PoolConcurrencyLimitError, PoolingAllocationConfig,
    Store, Trap, UpdateDeadline,
};
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

pub(crate) use self::cache::Prepared as PreparedComponent;
use self::cache::{ComponentCache, Prepared, World};
use self::guest::{GuestState, MemoryLimiter, Skill, Stop};
use self::output::CappedOutput;
use super::ProgressFn;
use super::outcome::Outcome;
use crate::config::{ExecConfig, HostConfig};
use crate::error::{ErrorKind, HostError};

/// How often the epoch advances while runs are active; the deadline and
/// cancellation are checked at each tick.
const TICK: Duration = Duration::from_millis(5);
/// How often it advances while idle.
const IDLE_TICK: Duration = Duration::from_millis(100);

/// A directory the guest sees.
pub(crate) struct Preopen {
    pub(crate) host: PathBuf,
    /// Guest path, e.g. `data`.
    pub(crate) guest: String,
    pub(crate) write: bool,
}

/// Everything one run needs besides the component.
pub(crate) struct Job {
    /// The input JSON document.
    pub(crate) input: String,
    pub(crate) timeout: Duration,
    pub(crate) memory_bytes: u64,
    pub(crate) fuel: u64,
    pub(crate) max_output_bytes: u64,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) preopens: Vec<Preopen>,
    pub(crate) cancel: Option<Arc<AtomicBool>>,
    pub(crate) progress: Option<ProgressFn>,
    /// `skill/component`, for logs.
    pub(crate) label: String,
}

/// The engine, the linker and the compiled-component cache.
pub(crate) struct WasmRuntime {
    engine: Engine,
    linker: Linker<GuestState>,
    cache: ComponentCache,
    active: Arc<ActiveRuns>,
    exec: ExecConfig,
}

impl WasmRuntime {
    pub(crate) fn new(config: &HostConfig) -> Result<Self, HostError> {
        let exec = config.exec.clone();
        let engine = build_engine(&exec)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(internal)?;
        Skill::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |state| state)
            .map_err(internal)?;
        let active = Arc::new(ActiveRuns::default());
        start_ticker(&engine, Arc::clone(&active));
        Ok(WasmRuntime {
            cache: ComponentCache::new(config.wasm_cache_dir(), &engine),
            engine,
            linker,
            active,
            exec,
        })
    }

    /// Compile (or load from cache) the component in `file`, opened from `path`.
    pub(crate) fn prepare(
        &self,
        path: &Path,
        file: std::fs::File,
    ) -> Result<Arc<Prepared>, HostError> {
        self.cache.load(
            &self.engine,
            &self.linker,
            path,
            file,
            self.exec.max_component_bytes,
        )
    }

    /// The world a prepared component targets.
    pub(crate) fn world_name(prepared: &Prepared) -> &'static str {
        prepared.world.name()
    }

    /// Run a prepared component under the job's limits.
    pub(crate) fn run(&self, prepared: &Prepared, job: Job) -> Outcome {
        let started = Instant::now();
        let deadline = started + job.timeout;
        let _active = self.active.enter();
        let cap = job.max_output_bytes as usize;
        let stdout = CappedOutput::new(cap);
        let stderr = CappedOutput::new(cap);
        let state = match guest_state(&job, prepared, &stdout, &stderr) {
            Ok(state) => state,
            Err(error) => {
                return Outcome {
                    error: Some((error.kind, error.message)),
                    ..Outcome::default()
                };
            }
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        let fuel_set = store.set_fuel(job.fuel).is_ok();
        store.set_epoch_deadline(1);
        let cancel = job.cancel.clone();
        store.epoch_deadline_callback(move |_| {
            if cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(wasmtime::Error::new(Stop::Cancelled));
            }
            if Instant::now() >= deadline {
                return Err(wasmtime::Error::new(Stop::Deadline));
            }
            Ok(UpdateDeadline::Continue(1))
        });

        let cpu_before = thread_cpu_time();
        let result = call(&prepared.world, &mut store, &job.input);
        let cpu_time = thread_cpu_time().saturating_sub(cpu_before);
        let fuel_left = if fuel_set {
            store.get_fuel().unwrap_or(0)
        } else {
            job.fuel
        };
        let state = store.into_data();
        drop(state.wasi);
        let (stdout, stdout_truncated) = stdout.take();
        let (stderr, stderr_truncated) = stderr.take();
        let mut outcome = Outcome {
            stdout,
            stdout_truncated,
            stderr,
            stderr_truncated,
            memory_peak_bytes: state.limiter.peak as u64,
            fuel_consumed: Some(job.fuel.saturating_sub(fuel_left)),
            cpu_time,
            ..Outcome::default()
        };
        match result {
            Ok(Returned::Exit(code)) => {
                outcome.exit_code = Some(code);
                if code != 0 {
                    outcome.error = Some((
                        ErrorKind::ScriptExecutionError,
                        format!("the component exited with status {code}"),
                    ));
                }
            }
            Ok(Returned::Value(value)) => {
                outcome.exit_code = Some(0);
                outcome.returned = Some(value);
            }
            Ok(Returned::Error { code, message }) => {
                outcome.exit_code = Some(1);
                outcome.error = Some((
                    ErrorKind::ScriptExecutionError,
                    format!("the component returned error `{code}`: {message}"),
                ));
            }
            Err(error) => {
                let (exit_code, failure) =
                    classify(&error, state.limiter.hit, &job, started.elapsed());
                outcome.exit_code = exit_code;
                outcome.error = failure;
            }
        }
        outcome
    }
}

/// How a call ended when it did not trap.
enum Returned {
    /// A command's exit status.
    Exit(i32),
    /// A typed component's result.
    Value(String),
    Error {
        code: String,
        message: String,
    },
}

fn call(world: &World, store: &mut Store<GuestState>, input: &str) -> wasmtime::Result<Returned> {
    match world {
        World::Command(pre) => {
            let command = pre.instantiate(&mut *store)?;
            Ok(match command.wasi_cli_run().call_run(&mut *store)? {
                Ok(()) => Returned::Exit(0),
                Err(()) => Returned::Exit(1),
            })
        }
        World::Typed(pre) => {
            let skill = pre.instantiate(&mut *store)?;
            Ok(match skill.call_run(&mut *store, input)? {
                Ok(value) => Returned::Value(value),
                Err(error) => Returned::Error {
                    code: error.code,
                    message: error.message,
                },
            })
        }
    }
}

/// Map a trap or host error to an exit code and an error kind.
fn classify(
    error: &wasmtime::Error,
    memory_limit_hit: bool,
    job: &Job,
    elapsed: Duration,
) -> (Option<i32>, Option<(ErrorKind, String)>) {
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        let failure = (exit.0 != 0).then(|| {
            (
                ErrorKind::ScriptExecutionError,
                format!("the component exited with status {}", exit.0),
            )
        });
        return (Some(exit.0), failure);
    }
    let failure = match error.downcast_ref::<Stop>() {
        Some(Stop::Cancelled) => (
            ErrorKind::Cancelled,
            "the request was cancelled".to_string(),
        ),
        Some(Stop::Deadline) => (
            ErrorKind::ExecutionTimeout,
            format!(
                "the run passed its {} ms deadline (stopped after {} ms)",
                job.timeout.as_millis(),
                elapsed.as_millis()
            ),
        ),
        Some(Stop::MemoryLimit) => memory_failure(job),
        None if memory_limit_hit => memory_failure(job),
        None => match error.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => (
                ErrorKind::ExecutionTimeout,
                format!("the run used its whole fuel budget of {}", job.fuel),
            ),
            Some(Trap::StackOverflow) => (
                ErrorKind::ResourceExhausted,
                "the run overflowed its WebAssembly stack (unbounded recursion?)".to_string(),
            ),
            Some(Trap::Interrupt) => (
                ErrorKind::ExecutionTimeout,
                format!(
                    "the run was interrupted at its {} ms deadline",
                    job.timeout.as_millis()
                ),
            ),
            Some(trap) => (
                ErrorKind::ScriptExecutionError,
                format!("the component trapped: {trap}"),
            ),
            None if error.downcast_ref::<PoolConcurrencyLimitError>().is_some() => (
                ErrorKind::ResourceExhausted,
                format!("too many components are running at once: {error}"),
            ),
            None => (
                ErrorKind::ScriptExecutionError,
                format!("the component failed: {error:#}"),
            ),
        },
    };
    (None, Some(failure))
}

fn memory_failure(job: &Job) -> (ErrorKind, String) {
    (
        ErrorKind::ResourceExhausted,
        format!(
            "the run tried to use more than its memory limit of {} bytes",
            job.memory_bytes
        ),
    )
}

/// The WASI context: stdin (commands only), capped stdout/stderr, declared
/// env and preopens, no network, no args, no host environment.
fn guest_state(
    job: &Job,
    prepared: &Prepared,
    stdout: &CappedOutput,
    stderr: &CappedOutput,
) -> Result<GuestState, HostError> {
    let mut builder = WasiCtxBuilder::new();
    if matches!(prepared.world, World::Command(_)) {
        builder.stdin(MemoryInputPipe::new(job.input.clone().into_bytes()));
    }
    builder
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .envs(&job.env);
    for preopen in &job.preopens {
        let perms = if preopen.write {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        };
        builder
            .preopened_dir(&preopen.host, &preopen.guest, perms)
            .map_err(|e| {
                HostError::new(
                    ErrorKind::IoError,
                    format!("cannot give the component `{}`: {e}", preopen.guest),
                )
            })?;
    }
    Ok(GuestState {
        wasi: builder.build(),
        table: ResourceTable::new(),
        limiter: MemoryLimiter::new(job.memory_bytes as usize),
        stderr: stderr.clone(),
        config: job.env.iter().cloned().collect(),
        progress: job.progress.clone(),
        label: job.label.clone(),
    })
}

fn build_engine(exec: &ExecConfig) -> Result<Engine, HostError> {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(exec.max_wasm_stack_bytes)
        .memory_init_cow(true)
        .parallel_compilation(true);
    let runs = exec.max_concurrent_runs.max(1);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(runs)
        .total_core_instances(runs * 32)
        .max_core_instances_per_component(32)
        .total_memories(runs * 8)
        .total_tables(runs * 32)
        .max_memory_size((exec.max_memory_mb * 1024 * 1024) as usize);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    match Engine::new(&config) {
        Ok(engine) => Ok(engine),
        Err(error) => {
            // The pooling allocator reserves address space up front; where
            // that is refused (e.g. a low `ulimit -v`), allocate on demand.
            tracing::warn!(%error, "the pooling allocator is unavailable; instances are allocated on demand");
            config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            Engine::new(&config).map_err(internal)
        }
    }
}

fn internal(error: wasmtime::Error) -> HostError {
    HostError::new(
        ErrorKind::SandboxUnavailable,
        format!("the WebAssembly runtime cannot start: {error}"),
    )
}

/// CPU time of the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; CLOCK_THREAD_CPUTIME_ID exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec.max(0) as u64, ts.tv_nsec.max(0) as u32)
}

/// Counts runs in progress, so the ticker can slow down when idle.
#[derive(Default)]
struct ActiveRuns(std::sync::atomic::AtomicUsize);

struct ActiveGuard<'a>(&'a ActiveRuns);

impl ActiveRuns {
    fn enter(&self) -> ActiveGuard<'_> {
        self.0.fetch_add(1, Ordering::SeqCst);
        ActiveGuard(self)
    }
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Advance the engine's epoch while it lives: every `TICK` while runs are
/// active, every `IDLE_TICK` otherwise.
fn start_ticker(engine: &Engine, active: Arc<ActiveRuns>) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("skillhost-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                let busy = active.0.load(Ordering::SeqCst) > 0;
                std::thread::sleep(if busy { TICK } else { IDLE_TICK });
            }
        });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot start the epoch thread; runs will only stop on fuel");
    }
}
