//! Management operations of the [`Host`] on the managed store: install,
//! remove, enable/disable, config values, revisions and rollback.

use std::path::Path;

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::Host;
use crate::api::{
    ActivateRequest, ChangeRequest, ConfigSetRequest, Encoding, InstallRequest, Installed,
    RevisionsRequest, StoredRevision, StoredSkill,
};
use crate::error::{ErrorKind, HostError};
use crate::skill::files::load_manifest;
use crate::skill::manifest::{MANIFEST_FILE, Manifest};
use crate::skill::parse_skill_md;
use crate::store::catalog::Entry;
use crate::store::stage::{self, Part, StageLimits};
use crate::store::{Changed, Store};

/// Who asks: the operator (CLI) may install from any path; a client (MCP,
/// HTTP) only from inside the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Operator,
    Client,
}

/// Shown instead of a secret config value.
pub const MASK: &str = "***";

fn invalid(message: impl Into<String>) -> HostError {
    HostError::new(ErrorKind::InvalidInput, message)
}

impl Host {
    fn store(&self) -> Store {
        Store::new(self.config().store_dir())
    }

    /// Install (or upgrade) a skill into the managed store.
    pub fn install(
        &self,
        request: &InstallRequest,
        origin: Origin,
    ) -> Result<Installed, HostError> {
        let store = self.store();
        let staging = store.staging()?;
        let content = staging.path().join("skill");
        let limits = StageLimits::default();
        let given = [
            request.path.is_some(),
            request.package_base64.is_some(),
            request.skill_md.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(invalid(
                "give exactly one of `path`, `package_base64` or `skill_md` (with `files`)",
            ));
        }
        if request.files.is_some() && request.skill_md.is_none() {
            return Err(invalid("`files` go with `skill_md` (a raw-parts install)"));
        }
        let (staged, source) = if let Some(path) = &request.path {
            // A client's relative path is relative to the workspace.
            let path = match origin {
                Origin::Client if Path::new(path).is_relative() => {
                    self.config().workspace.join(path)
                }
                _ => crate::config::absolute(Path::new(path)),
            };
            // For a client, a path outside the workspace (or missing: its
            // existence is not revealed) is refused alike.
            if origin == Origin::Client && !self.inside_workspace(&path) {
                return Err(HostError::new(
                    ErrorKind::AccessDenied,
                    format!(
                        "{} is outside the workspace; clients install from the workspace only (or send package_base64)",
                        path.display()
                    ),
                ));
            }
            if path.is_dir() {
                (
                    stage::from_dir(&path, &content, limits)?,
                    path.display().to_string(),
                )
            } else {
                let bytes = read_package(&path, limits)?;
                (
                    stage::from_package(&bytes, &content, limits)?,
                    path.display().to_string(),
                )
            }
        } else if let Some(encoded) = &request.package_base64 {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|e| invalid(format!("package_base64 is not base64: {e}")))?;
            (
                stage::from_package(&bytes, &content, limits)?,
                "package".to_string(),
            )
        } else {
            let skill_md = request.skill_md.as_deref().unwrap_or_default();
            let parts = request
                .files
                .iter()
                .flatten()
                .map(|file| {
                    let bytes = match file.encoding {
                        Some(Encoding::Base64) => base64::engine::general_purpose::STANDARD
                            .decode(file.content.trim())
                            .map_err(|e| invalid(format!("`{}` is not base64: {e}", file.path)))?,
                        _ => file.content.clone().into_bytes(),
                    };
                    Ok(Part {
                        path: file.path.clone(),
                        bytes,
                    })
                })
                .collect::<Result<Vec<_>, HostError>>()?;
            (
                stage::from_parts(skill_md, &parts, &content, limits)?,
                "parts".to_string(),
            )
        };

        let text = std::fs::read_to_string(content.join("SKILL.md"))
            .map_err(|_| invalid("the skill has no SKILL.md at its top"))?;
        // No directory-name fallback here: an installed skill must name itself.
        let parsed = parse_skill_md(&text, "").map_err(|why| {
            invalid(format!(
                "SKILL.md: {why}; an installed skill needs a valid `name`"
            ))
        })?;
        // Validate under the skill's own name, as it will be served.
        let content = if parsed.name == "skill" {
            content
        } else {
            let named = staging.path().join(&parsed.name);
            std::fs::rename(&content, &named).map_err(|e| crate::store::io_error("staging", e))?;
            named
        };
        let report = crate::validate::validate(
            &content,
            self.executor(),
            &self.config().exec,
            self.config().limits.max_skill_md_bytes,
            false,
        );
        if !report.ok {
            return Err(invalid(format!(
                "the skill does not validate: {}",
                report.errors.join("; ")
            )));
        }
        let changed = store.install(
            &parsed.name,
            &staged,
            &content,
            &source,
            request.expected_version,
            self.config().keep_revisions,
        )?;
        let entry = changed.entry.as_ref().expect("an install leaves an entry");
        let mut warnings = staged.warnings.clone();
        warnings.extend(report.warnings);
        tracing::info!(skill = %parsed.name, revision = %entry.active, version = entry.version, "installed");
        Ok(Installed {
            name: changed.name.clone(),
            revision_id: entry.active.clone(),
            version: entry.version,
            new_revision: changed.new_revision,
            warnings,
        })
    }

    /// Remove an installed skill.
    pub fn remove(&self, request: &ChangeRequest) -> Result<StoredSkill, HostError> {
        let changed = self
            .store()
            .remove(&request.name, request.expected_version)?;
        tracing::info!(skill = %request.name, "removed");
        Ok(self.stored(changed))
    }

    /// Enable or disable an installed skill.
    pub fn set_enabled(
        &self,
        request: &ChangeRequest,
        enabled: bool,
    ) -> Result<StoredSkill, HostError> {
        let changed = self
            .store()
            .set_enabled(&request.name, enabled, request.expected_version)?;
        Ok(self.stored(changed))
    }

    /// Make a kept revision the active one (rollback).
    pub fn activate(&self, request: &ActivateRequest) -> Result<StoredSkill, HostError> {
        let changed =
            self.store()
                .activate(&request.name, &request.revision, request.expected_version)?;
        Ok(self.stored(changed))
    }

    /// Set or unset a config value declared in the skill's skill.yaml.
    pub fn config_set(&self, request: &ConfigSetRequest) -> Result<StoredSkill, HostError> {
        let store = self.store();
        let catalog = store.catalog()?;
        let entry = catalog.installed(&request.name)?;
        let manifest = self.active_manifest(&store, &request.name, entry)?;
        let field = manifest.config.get(&request.key).ok_or_else(|| {
            let keys: Vec<&str> = manifest.config.keys().map(String::as_str).collect();
            invalid(format!(
                "skill `{}` declares no config key `{}`; it declares: [{}]",
                request.name,
                request.key,
                keys.join(", ")
            ))
        })?;
        let value = match &request.value {
            None | Some(Value::Null) => None,
            Some(value) => {
                field.check(&request.key, value).map_err(invalid)?;
                Some(value.clone())
            }
        };
        let changed = store.set_config(
            &request.name,
            &request.key,
            value,
            field.secret,
            request.expected_version,
        )?;
        Ok(self.stored(changed))
    }

    /// An installed skill's revisions, version, enabled flag and (masked) config.
    pub fn revisions(&self, request: &RevisionsRequest) -> Result<StoredSkill, HostError> {
        let catalog = self.store().catalog()?;
        let entry = catalog.installed(&request.name)?.clone();
        Ok(self.stored(Changed {
            name: request.name.clone(),
            entry: Some(entry),
            new_revision: false,
        }))
    }

    fn active_manifest(
        &self,
        store: &Store,
        name: &str,
        entry: &Entry,
    ) -> Result<Manifest, HostError> {
        let path = store.revision_dir(name, &entry.active).join(MANIFEST_FILE);
        let Ok(meta) = std::fs::metadata(&path) else {
            return Ok(Manifest::default());
        };
        load_manifest(&path, &meta, self.config().limits.max_skill_md_bytes)
            .result
            .map(|m| (*m).clone())
            .map_err(invalid)
    }

    /// The store's view of a changed skill, secrets masked.
    fn stored(&self, changed: Changed) -> StoredSkill {
        let Some(entry) = changed.entry else {
            let version = self
                .store()
                .catalog()
                .ok()
                .and_then(|c| c.removed.get(&changed.name).copied())
                .unwrap_or(0);
            return StoredSkill {
                name: changed.name,
                installed: false,
                version,
                enabled: false,
                active_revision: None,
                revisions: Vec::new(),
                config: Map::new(),
            };
        };
        let config = entry
            .config
            .iter()
            .map(|(key, stored)| {
                let shown = if stored.secret {
                    Value::String(MASK.into())
                } else {
                    stored.value.clone()
                };
                (key.clone(), shown)
            })
            .collect();
        StoredSkill {
            name: changed.name,
            installed: true,
            version: entry.version,
            enabled: entry.enabled,
            active_revision: Some(entry.active.clone()),
            revisions: entry
                .revisions
                .iter()
                .map(|r| StoredRevision {
                    active: r.id == entry.active,
                    id: r.id.clone(),
                    created_at: r.created_at.clone(),
                    source: r.source.clone(),
                    files: r.files as u64,
                    bytes: r.bytes,
                })
                .collect(),
            config,
        }
    }

    fn inside_workspace(&self, path: &Path) -> bool {
        let workspace = std::fs::canonicalize(&self.config().workspace);
        let target = std::fs::canonicalize(path);
        matches!((workspace, target), (Ok(w), Ok(t)) if t.starts_with(&w))
    }
}

/// Read a package file, bounded.
fn read_package(path: &Path, limits: StageLimits) -> Result<Vec<u8>, HostError> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|e| invalid(format!("{} cannot be read: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(limits.max_total_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| invalid(format!("{} cannot be read: {e}", path.display())))?;
    if bytes.len() as u64 > limits.max_total_bytes {
        return Err(invalid(format!("{} is too large", path.display())));
    }
    Ok(bytes)
}
