//! Running a skill's components: input checks, limits, capabilities, the
//! runtime for the component's kind, output checks, and the envelope.

pub mod envelope;
pub(crate) mod files;
mod outcome;
mod schema;
mod script;
mod slots;
mod wasm;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use sha2::{Digest, Sha256};

pub use self::envelope::{
    AppliedLimits, Artifact, Envelope, EnvelopeKind, Execution, SandboxKind, Status,
};
use self::outcome::Outcome;
use self::schema::{SchemaCache, SchemaError, Which};
use self::script::{ScriptJob, ScriptRuntime};
use self::slots::{NoSlot, Slots};
use self::wasm::{Job, Preopen, PreparedComponent, WasmRuntime};
use crate::api::RunRequest;
use crate::config::{ExecConfig, HostConfig};
use crate::error::{ErrorKind, HostError};
use crate::fsguard;
use crate::registry::Skill;
use crate::skill::files::hex;
use crate::skill::manifest::{Component, Runtime};

/// Progress reported by a running component: (done, total, message).
pub type ProgressFn = Arc<dyn Fn(u64, Option<u64>, Option<String>) + Send + Sync>;

/// What a face passes along with a run: a cancellation flag and a sink for
/// progress reports.
#[derive(Clone, Default)]
pub struct RunContext {
    pub cancel: Option<Arc<AtomicBool>>,
    pub progress: Option<ProgressFn>,
}

/// Owns the runtimes (started on first use) and the schema cache.
pub(crate) struct Executor {
    config: HostConfig,
    wasm: OnceLock<Result<WasmRuntime, HostError>>,
    scripts: ScriptRuntime,
    schemas: SchemaCache,
    slots: Slots,
}

impl Executor {
    pub(crate) fn new(config: HostConfig) -> Self {
        Executor {
            scripts: ScriptRuntime::new(&config),
            slots: Slots::new(
                config.exec.max_concurrent_runs as usize,
                config.exec.max_waiting_runs as usize,
            ),
            config,
            wasm: OnceLock::new(),
            schemas: SchemaCache::default(),
        }
    }

    /// Compile a wasm component of the skill in `dir` and name its world.
    pub(crate) fn inspect(
        &self,
        dir: &std::path::Path,
        rel: &str,
        file: std::fs::File,
    ) -> Result<&'static str, HostError> {
        let runtime = self.wasm()?;
        let prepared = runtime.prepare(&dir.join(rel), file)?;
        Ok(WasmRuntime::world_name(&prepared))
    }

    /// Whether scripts of `runtime` can run here: the interpreter exists and
    /// a sandbox is usable (or unsandboxed runs were explicitly allowed).
    pub(crate) fn check_script_runtime(&self, runtime: Runtime) -> Result<(), String> {
        self.scripts.check(runtime)
    }

    /// Runs executing now and runs waiting for a slot.
    pub(crate) fn occupancy(&self) -> (usize, usize) {
        self.slots.occupancy()
    }

    /// Whether the WebAssembly runtime starts (it is started if needed).
    pub(crate) fn wasm_status(&self) -> Result<(), String> {
        self.wasm().map(|_| ()).map_err(|e| e.message)
    }

    /// Whether the script sandbox is usable.
    pub(crate) fn sandbox_status(&self) -> Result<(), String> {
        self.scripts.sandbox().map(|_| ()).map_err(str::to_string)
    }

    /// Start the WebAssembly runtime now (engine, pools, linker) so the first
    /// run does not pay for it; failures are reported by the runs.
    pub(crate) fn warm_up(&self) {
        if let Err(error) = self.wasm() {
            tracing::warn!("{error}");
        }
    }

    fn wasm(&self) -> Result<&WasmRuntime, HostError> {
        self.wasm
            .get_or_init(|| WasmRuntime::new(&self.config))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Run `request.component` of `skill`. `Err` means nothing ran (unknown
    /// component, bad input, ...); a run that failed is an `Ok` envelope
    /// whose status says so.
    pub(crate) fn run(
        &self,
        skill: &Skill,
        request: &RunRequest,
        context: &RunContext,
    ) -> Result<Envelope, HostError> {
        let input = parse_input(request)?;
        let component = find_component(skill, &request.component)?;
        let runtime = executable_runtime(&component)?;
        if !component.permissions.network.is_empty() {
            return Err(HostError::new(
                ErrorKind::AccessDenied,
                format!(
                    "`{}` declares network access to [{}], which this host does not grant yet; components run without network",
                    component.name,
                    component.permissions.network.join(", ")
                ),
            ));
        }
        let limits = resolve_limits(
            &component,
            runtime,
            request.timeout_seconds,
            &self.config.exec,
        )?;
        if let Some(schema) = &component.input_schema {
            self.check_schema(skill, &component, Which::Input, schema, &input)
                .map_err(|e| match e {
                    SchemaError::Mismatch(why) => HostError::new(
                        ErrorKind::InvalidInput,
                        format!(
                            "the input does not match the input_schema of `{}`: {why}",
                            component.name
                        ),
                    ),
                    SchemaError::BadSchema(why) => {
                        HostError::new(ErrorKind::InvalidComponentType, why)
                    }
                })?;
        }

        let rel = fsguard::normalize_relative(&component.path)?;
        let file = fsguard::open_in_skill(&skill.skill_dir, &rel)?;
        let code = match runtime {
            Runtime::Wasi => {
                let prepared = self.wasm()?.prepare(&skill.skill_dir.join(&rel), file)?;
                Code::Wasm(prepared)
            }
            Runtime::Python | Runtime::Bash => Code::Script(script_digest(file, &rel)?),
        };
        let mut hasher = Sha256::new();
        hasher.update(skill.content_digest);
        hasher.update(code.digest());
        // A skill installed in the managed store is at a store revision;
        // elsewhere the revision is the digest of what is about to run.
        let revision_id = match &skill.store {
            Some(store) => store.revision.clone(),
            None => format!("sha256:{}", hex(&hasher.finalize())),
        };
        if let Some(wanted) = &request.revision
            && *wanted != revision_id
        {
            return Err(HostError::new(
                ErrorKind::RevisionNotFound,
                format!(
                    "skill `{}` component `{}` is at revision {revision_id}, not {wanted}; its code or declaration changed",
                    skill.name, component.name
                ),
            ));
        }
        let settings = skill_config(skill)?;
        let mut env: Vec<(String, String)> = component
            .permissions
            .env
            .iter()
            .filter(|key| !settings.values.iter().any(|(k, _)| k == *key))
            .filter_map(|key| {
                self.config
                    .exec
                    .env
                    .get(key)
                    .map(|value| (key.clone(), value.clone()))
            })
            .collect();
        env.extend(settings.values.iter().cloned());
        let run_files = files::prepare(
            &skill.skill_dir,
            &component.permissions.filesystem,
            self.config.exec.max_scratch_bytes,
        )?;

        let execution_id = uuid::Uuid::new_v4().to_string();
        let label = format!("{}/{}", skill.name, component.name);
        let started_at = SystemTime::now();
        let started = Instant::now();
        let timeout = Duration::from_millis(limits.timeout_ms);
        let sandbox_kind = match &code {
            Code::Wasm(_) => SandboxKind::Wasmtime,
            Code::Script(_) => SandboxKind::Bubblewrap,
        };
        let (outcome, sandbox) = match self
            .slots
            .acquire(started + timeout, context.cancel.as_deref())
        {
            Err(NoSlot::Cancelled) => (
                Outcome::failed(ErrorKind::Cancelled, "the request was cancelled"),
                sandbox_kind,
            ),
            // Nothing ran and nothing waited: refuse like any other check,
            // so HTTP answers 429 and MCP a plain tool error.
            Err(NoSlot::Full) => {
                return Err(HostError::new(
                    ErrorKind::ResourceExhausted,
                    format!(
                        "{} runs are executing and {} more are waiting (--max-concurrent-runs, --max-waiting-runs); try again later",
                        self.config.exec.max_concurrent_runs, self.config.exec.max_waiting_runs
                    ),
                ));
            }
            Err(NoSlot::Deadline) => (
                Outcome::failed(
                    ErrorKind::ResourceExhausted,
                    format!(
                        "{} runs were already executing until the deadline; try again later",
                        self.config.exec.max_concurrent_runs
                    ),
                ),
                sandbox_kind,
            ),
            Ok(_slot) => match &code {
                Code::Wasm(prepared) => {
                    let job = Job {
                        input: input.to_string(),
                        timeout: timeout.saturating_sub(started.elapsed()),
                        memory_bytes: limits.memory_bytes,
                        fuel: limits.fuel.unwrap_or(u64::MAX),
                        max_output_bytes: limits.max_output_bytes,
                        env,
                        preopens: run_files
                            .mounts
                            .iter()
                            .map(|m| Preopen {
                                host: m.host.clone(),
                                guest: m.guest.clone(),
                                write: m.write,
                            })
                            .collect(),
                        cancel: context.cancel.clone(),
                        progress: context.progress.clone(),
                        label: label.clone(),
                    };
                    (self.wasm()?.run(prepared, job), SandboxKind::Wasmtime)
                }
                Code::Script(_) => self.scripts.run(&ScriptJob {
                    skill_dir: skill.skill_dir.clone(),
                    script: rel.clone(),
                    runtime,
                    input: input.to_string(),
                    timeout: timeout.saturating_sub(started.elapsed()),
                    timeout_ms: limits.timeout_ms,
                    memory_bytes: limits.memory_bytes,
                    max_output_bytes: limits.max_output_bytes,
                    env,
                    writable: run_files
                        .mounts
                        .iter()
                        .filter(|m| m.write)
                        .map(|m| (m.host.clone(), m.guest.clone()))
                        .collect(),
                    cancel: context.cancel.clone(),
                    execution_id: execution_id.clone(),
                }),
            },
        };
        let duration = started.elapsed();
        drop(run_files);

        let output_data = match &outcome.returned {
            Some(text) => Some(serde_json::from_str(text).unwrap_or(Value::String(text.clone()))),
            None => {
                let text = String::from_utf8_lossy(&outcome.stdout);
                let text = text.trim();
                (!text.is_empty() && !outcome.stdout_truncated)
                    .then(|| serde_json::from_str(text).ok())
                    .flatten()
            }
        };
        let mut error = outcome.error.clone();
        if error.is_none()
            && let Some(schema) = &component.output_schema
        {
            error = match &output_data {
                None => Some((
                    ErrorKind::OutputSchemaMismatch,
                    format!(
                        "`{}` declares an output_schema but its output is not JSON",
                        component.name
                    ),
                )),
                Some(data) => {
                    match self.check_schema(skill, &component, Which::Output, schema, data) {
                        Ok(()) => None,
                        Err(SchemaError::Mismatch(why) | SchemaError::BadSchema(why)) => Some((
                            ErrorKind::OutputSchemaMismatch,
                            format!("the output does not match the output_schema: {why}"),
                        )),
                    }
                }
            };
        }
        let status = match &error {
            None => Status::Succeeded,
            Some((ErrorKind::Cancelled, _)) => Status::Cancelled,
            Some(_) => Status::Failed,
        };
        let (error_kind, error_message) = match error {
            Some((kind, message)) => (Some(kind), Some(message)),
            None => (None, None),
        };
        tracing::info!(
            component = %label,
            %execution_id,
            ?status,
            error_kind = error_kind.map(|k| k.as_str()),
            duration_ms = duration.as_secs_f64() * 1e3,
            "run finished"
        );
        let mut envelope = Envelope {
            kind: EnvelopeKind::Execution,
            data: Execution {
                execution_id,
                skill: skill.name.clone(),
                revision_id,
                component: component.name.clone(),
                component_path: rel,
                runtime,
                sandbox,
                status,
                exit_code: outcome.exit_code,
                stdout: String::from_utf8_lossy(&outcome.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&outcome.stderr).into_owned(),
                stdout_truncated: outcome.stdout_truncated,
                stderr_truncated: outcome.stderr_truncated,
                output_data,
                duration_ms: millis(duration),
                memory_peak_bytes: outcome.memory_peak_bytes,
                cpu_time_ms: millis(outcome.cpu_time),
                fuel_consumed: outcome.fuel_consumed,
                started_at: humantime::format_rfc3339_millis(started_at).to_string(),
                finished_at: humantime::format_rfc3339_millis(started_at + duration).to_string(),
                error_kind,
                error_message,
                limits,
                artifacts: outcome.artifacts,
            },
        };
        mask_secrets(&mut envelope.data, &settings.secrets);
        Ok(envelope)
    }

    fn check_schema(
        &self,
        skill: &Skill,
        component: &Component,
        which: Which,
        schema: &Value,
        instance: &Value,
    ) -> Result<(), SchemaError> {
        self.schemas.check(
            skill.content_digest,
            &component.name,
            which,
            schema,
            instance,
        )
    }
}

/// A skill's config values for one run.
struct Settings {
    /// (key, value as the component receives it).
    values: Vec<(String, String)>,
    /// Values never to show.
    secrets: Vec<String>,
}

/// The skill's declared config: values set in the store, else defaults; a
/// required key with neither is INVALID_INPUT before anything runs.
fn skill_config(skill: &Skill) -> Result<Settings, HostError> {
    let mut settings = Settings {
        values: Vec::new(),
        secrets: Vec::new(),
    };
    let Some(Ok(manifest)) = &skill.manifest else {
        return Ok(settings);
    };
    let stored = skill.store.as_ref().map(|s| &s.config);
    for (key, field) in &manifest.config {
        let set = stored.and_then(|c| c.get(key));
        let secret = field.secret || set.is_some_and(|v| v.secret);
        let value = set.map(|v| &v.value).or(field.default.as_ref());
        match value {
            Some(value) => {
                let text = field.check(key, value).unwrap_or_else(|_| match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                });
                if secret && !text.is_empty() {
                    settings.secrets.push(text.clone());
                }
                settings.values.push((key.clone(), text));
            }
            None if field.required => {
                return Err(HostError::new(
                    ErrorKind::InvalidInput,
                    format!(
                        "skill `{}` needs a value for config `{key}`; set it with `skillhost config set {} {key} VALUE` (or skill_config_set)",
                        skill.name, skill.name
                    ),
                ));
            }
            None => {}
        }
    }
    Ok(settings)
}

/// Replace every secret value in what the run produced with `***`.
fn mask_secrets(data: &mut Execution, secrets: &[String]) {
    if secrets.is_empty() {
        return;
    }
    let mask = |text: &mut String| {
        for secret in secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), crate::manage::MASK);
            }
        }
    };
    mask(&mut data.stdout);
    mask(&mut data.stderr);
    if let Some(message) = &mut data.error_message {
        mask(message);
    }
    for artifact in &mut data.artifacts {
        if let Some(content) = &mut artifact.content {
            mask(content);
        }
    }
    if let Some(output) = &mut data.output_data {
        mask_value(output, &mask);
    }
}

fn mask_value(value: &mut Value, mask: &impl Fn(&mut String)) {
    match value {
        Value::String(text) => mask(text),
        Value::Array(items) => items.iter_mut().for_each(|v| mask_value(v, mask)),
        Value::Object(map) => map.values_mut().for_each(|v| mask_value(v, mask)),
        _ => {}
    }
}

/// The code a run executes.
enum Code {
    Wasm(Arc<PreparedComponent>),
    /// A script, by the sha256 of its bytes.
    Script([u8; 32]),
}

impl Code {
    fn digest(&self) -> [u8; 32] {
        match self {
            Code::Wasm(prepared) => prepared.digest,
            Code::Script(digest) => *digest,
        }
    }
}

/// Largest script that is run.
const MAX_SCRIPT_BYTES: u64 = 16 * 1024 * 1024;

fn script_digest(file: std::fs::File, rel: &str) -> Result<[u8; 32], HostError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(MAX_SCRIPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| HostError::new(ErrorKind::IoError, format!("`{rel}` cannot be read: {e}")))?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(HostError::new(
            ErrorKind::ResourceExhausted,
            format!("`{rel}` is larger than {MAX_SCRIPT_BYTES} bytes"),
        ));
    }
    Ok(Sha256::digest(&bytes).into())
}

/// `input`, defaulting to `{}`; a JSON string holding an object is accepted
/// because some clients send the object that way.
fn parse_input(request: &RunRequest) -> Result<Value, HostError> {
    let input = match request.input.clone() {
        None => Value::Object(Default::default()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(parsed) if parsed.is_object() => parsed,
            _ => Value::String(text),
        },
        Some(input) => input,
    };
    if input.is_object() {
        Ok(input)
    } else {
        Err(HostError::new(
            ErrorKind::InvalidInput,
            "`input` must be a JSON object",
        ))
    }
}

/// The runtime of an executable component, or why it does not run.
fn executable_runtime(component: &Component) -> Result<Runtime, HostError> {
    component.effective_runtime().ok_or_else(|| {
        HostError::new(
            ErrorKind::InvalidComponentType,
            format!(
                "`{}` is a `{}` component, not something that runs; skill_read it instead",
                component.name,
                format!("{:?}", component.kind).to_lowercase()
            ),
        )
    })
}

fn find_component(skill: &Skill, name: &str) -> Result<Component, HostError> {
    if let Some(reason) = skill.manifest_warning() {
        return Err(HostError::new(ErrorKind::ComponentNotFound, reason));
    }
    let components = skill.components(None);
    components
        .iter()
        .find(|c| c.name == name)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = components.iter().map(|c| c.name.as_str()).collect();
            let has = if names.is_empty() {
                "it declares no components".to_string()
            } else {
                format!("it has: {}", names.join(", "))
            };
            HostError::new(
                ErrorKind::ComponentNotFound,
                format!("skill `{}` has no component `{name}`; {has}", skill.name),
            )
        })
}

/// Defaults, requests and bounds combined. `timeout_seconds` from the
/// request wins over the component's `timeout_ms` and must be within
/// 1 s and the host's bound.
fn resolve_limits(
    component: &Component,
    runtime: Runtime,
    timeout_seconds: Option<f64>,
    exec: &ExecConfig,
) -> Result<AppliedLimits, HostError> {
    let max_seconds = exec.max_timeout_ms as f64 / 1000.0;
    let timeout_ms = match timeout_seconds {
        Some(seconds) if !(1.0..=max_seconds).contains(&seconds) => {
            return Err(HostError::new(
                ErrorKind::InvalidInput,
                format!(
                    "timeout_seconds must be between 1 and {max_seconds} (the host's bound); got {seconds}"
                ),
            ));
        }
        Some(seconds) => (seconds * 1000.0) as u64,
        None => component
            .limits
            .timeout_ms
            .unwrap_or(exec.default_timeout_ms)
            .clamp(1, exec.max_timeout_ms),
    };
    let memory_mb = component
        .limits
        .memory_mb
        .unwrap_or(exec.default_memory_mb)
        .clamp(1, exec.max_memory_mb);
    Ok(AppliedLimits {
        timeout_ms,
        memory_bytes: memory_mb * 1024 * 1024,
        fuel: (runtime == Runtime::Wasi)
            .then(|| component.limits.fuel.unwrap_or(exec.default_fuel)),
        max_output_bytes: component
            .limits
            .max_output_bytes
            .unwrap_or(exec.default_max_output_bytes)
            .min(exec.max_output_bytes),
    })
}

fn millis(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}
