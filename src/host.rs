//! The `Host`: the one core API that the CLI, MCP and HTTP faces call.

use base64::Engine as _;

use crate::api::{
    Encoding, FileContent, FileInfo, FileKind, ListRequest, LoadRequest, LoadedSkill, ReadRequest,
    RunRequest, SkillList, SkillSummary, SkillsDir,
};
use crate::config::HostConfig;
use crate::error::{ErrorKind, HostError};
use crate::exec::{Envelope, Executor, RunContext};
use crate::fsguard;
use crate::metrics::{Metrics, Snapshot};
use crate::registry::{Registry, Scan, Skill};
use crate::store::Store;

/// What `/readyz` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Readiness {
    pub ready: bool,
    /// `ok` or why the WebAssembly runtime cannot start.
    pub wasm_runtime: String,
    /// `ok` or why scripts cannot run (they are refused, not run unsandboxed).
    pub script_sandbox: String,
}

/// Owns the configuration and the registry. Cheap to share behind an `Arc`;
/// every method rescans, so changes on disk show at the next call.
pub struct Host {
    config: HostConfig,
    registry: Registry,
    executor: Executor,
    metrics: Metrics,
}

impl Host {
    pub fn new(config: HostConfig) -> Self {
        let registry = Registry::new(
            config.sources(),
            Some(Store::new(config.store_dir())),
            config.limits.clone(),
        );
        let executor = Executor::new(config.clone());
        Host {
            config,
            registry,
            executor,
            metrics: Metrics::default(),
        }
    }

    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    pub(crate) fn executor(&self) -> &Executor {
        &self.executor
    }

    /// The host's counters (runs, rejections, HTTP requests).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether the host can serve: the registry scans and the WebAssembly
    /// runtime starts (scripts are optional: they fail closed).
    pub fn readiness(&self) -> Readiness {
        let _ = self.registry.scan();
        let wasm = self.executor.wasm_status();
        let sandbox = self.executor.sandbox_status();
        Readiness {
            ready: wasm.is_ok(),
            wasm_runtime: wasm.err().unwrap_or_else(|| "ok".into()),
            script_sandbox: sandbox.err().unwrap_or_else(|| "ok".into()),
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let stats = self.registry.stats();
        let skills = self.registry.scan().skills.len();
        let (executing, waiting) = self.executor.occupancy();
        self.metrics.render(&Snapshot {
            full_scans: stats.full_scans,
            reused: stats.reused,
            scan_time: stats.full_scan_time,
            skills,
            runs_executing: executing,
            runs_waiting: waiting,
        })
    }

    /// How registry scans were answered so far (full scans vs. reused results).
    pub fn scan_stats(&self) -> crate::registry::ScanStats {
        self.registry.stats()
    }

    /// `skill_list`: every accepted skill with its files and warnings.
    pub fn list(&self, request: &ListRequest) -> SkillList {
        let scan = self.registry.scan();
        let mut skills: Vec<SkillSummary> = scan.skills.iter().map(summary).collect();
        if request.include_disabled == Some(true) {
            skills.extend(scan.disabled.iter().map(summary));
            skills.sort_by(|a, b| a.name.cmp(&b.name).then(b.enabled.cmp(&a.enabled)));
        }
        SkillList {
            skills,
            skills_dirs: scan
                .dirs
                .iter()
                .map(|d| SkillsDir {
                    source: d.source,
                    path: d.path.display().to_string(),
                    exists: d.exists,
                })
                .collect(),
            warnings: scan.warnings.clone(),
        }
    }

    /// `skill_load` of the active revision.
    pub fn load(&self, name: &str) -> Result<LoadedSkill, HostError> {
        self.load_request(&LoadRequest {
            name: name.to_string(),
            revision: None,
        })
    }

    /// `skill_load`: the instructions and an index of related files.
    pub fn load_request(&self, request: &LoadRequest) -> Result<LoadedSkill, HostError> {
        let skill = self.resolve(&request.name, request.revision.as_deref())?;
        let listing = self.registry.fresh_listing(&skill);
        let mut warnings = skill.parsed.warnings.clone();
        warnings.extend(skill.manifest_warning());
        warnings.extend(listing.warnings.iter().cloned());
        let components = skill.components(Some(&listing));
        Ok(LoadedSkill {
            name: skill.name.clone(),
            description: skill.parsed.description.clone(),
            source: skill.source,
            frontmatter: skill.parsed.frontmatter.clone(),
            instructions: skill.parsed.instructions.clone(),
            skill_dir: skill.skill_dir.display().to_string(),
            files: listing
                .files
                .iter()
                .map(|f| FileInfo {
                    kind: FileKind::classify(&f.path),
                    path: f.path.clone(),
                    size: f.size,
                })
                .collect(),
            components,
            revision_id: skill.store.as_ref().map(|s| s.revision.clone()),
            warnings,
        })
    }

    /// The skill a request names: the enabled one of that name, or (for a
    /// managed skill) the pinned revision.
    fn resolve(&self, name: &str, revision: Option<&str>) -> Result<Skill, HostError> {
        let scan = self.registry.scan();
        let current = find(&scan, name);
        match (revision, current) {
            (None, Ok(skill)) => Ok(skill.clone()),
            (None, Err(error)) => Err(error),
            (Some(wanted), Ok(skill))
                if skill.store.as_ref().is_some_and(|s| s.revision == wanted) =>
            {
                Ok(skill.clone())
            }
            (Some(wanted), _) => self.registry.pinned(name, wanted),
        }
    }

    /// `skill_run`: run one component of a skill. `Err` means nothing ran;
    /// a run that failed comes back as an envelope whose status says so.
    pub fn run(&self, request: &RunRequest, context: &RunContext) -> Result<Envelope, HostError> {
        let result = self.run_resolved(request, context);
        match &result {
            Ok(envelope) => self.metrics.record_run(&envelope.data),
            Err(error) => self.metrics.record_rejected(error.kind),
        }
        result
    }

    fn run_resolved(
        &self,
        request: &RunRequest,
        context: &RunContext,
    ) -> Result<Envelope, HostError> {
        // As for load and read: a revision kept in the managed store wins;
        // otherwise the executor checks `revision` against the digest of
        // what it is about to run (skills of other sources).
        let skill = match request.revision.as_deref() {
            Some(wanted) => match self.resolve(&request.name, Some(wanted)) {
                Ok(skill) => skill,
                Err(error) if error.kind == ErrorKind::RevisionNotFound => {
                    let scan = self.registry.scan();
                    let current = find(&scan, &request.name)?;
                    if current.store.is_some() {
                        return Err(error);
                    }
                    current.clone()
                }
                Err(error) => return Err(error),
            },
            None => self.resolve(&request.name, None)?,
        };
        self.executor.run(&skill, request, context)
    }

    /// Start the component runtimes now rather than at the first run
    /// (servers call this at start-up, off the request path).
    pub fn warm_up(&self) {
        self.executor.warm_up();
    }

    /// `validate`: check the skill directory at `dir` (not necessarily in a source).
    pub fn validate(&self, dir: &std::path::Path) -> crate::validate::Report {
        crate::validate::validate(
            dir,
            &self.executor,
            &self.config.exec,
            self.config.limits.max_skill_md_bytes,
            true,
        )
    }

    /// `skill_read`: one bounded file by skill-relative path.
    pub fn read(&self, request: &ReadRequest) -> Result<FileContent, HostError> {
        let path = fsguard::normalize_relative(&request.path)?;
        if request.length == Some(0) {
            return Err(HostError::new(
                ErrorKind::InvalidInput,
                "length must be at least 1 (omit it to read the rest of the file)",
            ));
        }
        let skill = self.resolve(&request.name, request.revision.as_deref())?;
        let read = fsguard::read_in_skill(
            &skill.skill_dir,
            &path,
            request.offset.unwrap_or(0),
            request.length,
            self.config.limits.max_file_bytes,
        )?;
        let reached_end = read.offset + read.bytes.len() as u64 >= read.size;
        let (encoding, content, length) = encode(read.bytes, reached_end);
        Ok(FileContent {
            name: skill.name.clone(),
            path,
            encoding,
            content,
            size: read.size,
            offset: read.offset,
            length,
            truncated: read.offset + length < read.size,
        })
    }
}

fn summary(skill: &Skill) -> SkillSummary {
    SkillSummary {
        name: skill.name.clone(),
        description: skill.parsed.description.clone(),
        source: skill.source,
        source_path: skill.source_path.display().to_string(),
        entry_path: skill.entry_path.display().to_string(),
        files: skill.listing.files.iter().map(|f| f.path.clone()).collect(),
        enabled: skill.store.as_ref().is_none_or(|s| s.enabled),
        revision_id: skill.store.as_ref().map(|s| s.revision.clone()),
        warnings: skill.warnings(),
    }
}

fn find<'a>(scan: &'a Scan, name: &str) -> Result<&'a Skill, HostError> {
    if let Some(skill) = scan.find(name) {
        return Ok(skill);
    }
    if scan.find_disabled(name).is_some() {
        return Err(HostError::new(
            ErrorKind::SkillDisabled,
            format!("skill `{name}` is installed but disabled; enable it to use it"),
        ));
    }
    let close: Vec<&str> = scan
        .skills
        .iter()
        .map(|s| s.name.as_str())
        .filter(|candidate| {
            let lower = name.to_ascii_lowercase();
            !lower.is_empty() && (candidate.contains(&lower) || lower.contains(candidate))
        })
        .take(3)
        .collect();
    let hint = if close.is_empty() {
        "skill_list shows the available names".to_string()
    } else {
        format!("did you mean {}?", close.join(", "))
    };
    Err(HostError::new(
        ErrorKind::SkillNotFound,
        format!("no skill named `{name}`; {hint}"),
    ))
}

/// Text when the bytes are UTF-8 without NUL (an incomplete character at a
/// cut is dropped so the text stays valid), base64 otherwise. Returns the
/// number of file bytes the content stands for.
fn encode(mut bytes: Vec<u8>, reached_end: bool) -> (Encoding, String, u64) {
    if bytes.contains(&0) {
        return base64_of(bytes);
    }
    if let Err(e) = std::str::from_utf8(&bytes)
        && !reached_end
        && e.error_len().is_none()
        && e.valid_up_to() > 0
    {
        bytes.truncate(e.valid_up_to());
    }
    match String::from_utf8(bytes) {
        Ok(text) => {
            let length = text.len() as u64;
            (Encoding::Utf8, text, length)
        }
        Err(e) => base64_of(e.into_bytes()),
    }
}

fn base64_of(bytes: Vec<u8>) -> (Encoding, String, u64) {
    let length = bytes.len() as u64;
    (
        Encoding::Base64,
        base64::engine::general_purpose::STANDARD.encode(&bytes),
        length,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_binary_and_cut_characters() {
        assert_eq!(encode(b"hi".to_vec(), true).0, Encoding::Utf8);
        assert_eq!(encode(vec![0, 1, 2], true).0, Encoding::Base64);
        assert_eq!(encode(vec![0xff, 0xfe], true).0, Encoding::Base64);
        // "é" is two bytes; a cut after the first keeps the text valid.
        let (enc, text, len) = encode(vec![b'a', 0xc3], false);
        assert_eq!((enc, text.as_str(), len), (Encoding::Utf8, "a", 1));
        // At the end of the file the same bytes are simply not UTF-8.
        assert_eq!(encode(vec![b'a', 0xc3], true).0, Encoding::Base64);
    }
}
