//! Compiled components: an on-disk artifact cache keyed by the wasm's sha256
//! and the engine's compatibility hash, and in memory the ready-to-instantiate
//! `InstancePre` per digest. Only artifacts this host wrote are deserialized.

use std::collections::HashMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi::p2::bindings::sync::CommandPre;

use super::guest::{GuestState, SkillPre};
use crate::error::{ErrorKind, HostError};
use crate::listing::Stamp;
use crate::skill::files::hex;

/// Entries kept in memory before the maps are cleared.
const MAX_CACHED: usize = 256;

/// Which of the two supported worlds a component targets.
pub(crate) enum World {
    /// A WASI p2 command: JSON on stdin, JSON on stdout.
    Command(CommandPre<GuestState>),
    /// The typed `skillhost:skill` world: `run(input) -> result<string, run-error>`.
    Typed(SkillPre<GuestState>),
}

impl World {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            World::Command(_) => "wasi:cli/command",
            World::Typed(_) => "skillhost:skill/skill",
        }
    }
}

/// A component ready to instantiate.
pub(crate) struct Prepared {
    pub(crate) world: World,
    pub(crate) digest: [u8; 32],
}

pub(crate) struct ComponentCache {
    dir: PathBuf,
    /// Hex of the engine's compatibility hash; part of every artifact name.
    compat: String,
    prepared: Mutex<HashMap<[u8; 32], Arc<Prepared>>>,
    /// Component file path -> (its stamp, its digest), so an unchanged file
    /// is not read and hashed again.
    digests: Mutex<HashMap<PathBuf, (Stamp, [u8; 32])>>,
}

impl ComponentCache {
    pub(crate) fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut hasher = Sha256Hasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let compat = hex(&hasher.0.finalize()[..8]);
        ComponentCache {
            dir,
            compat,
            prepared: Mutex::new(HashMap::new()),
            digests: Mutex::new(HashMap::new()),
        }
    }

    /// The prepared component for the file at `path` (already opened as
    /// `file`, inside the skill), compiling or loading it as needed.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        linker: &Linker<GuestState>,
        path: &Path,
        mut file: fs::File,
        max_bytes: u64,
    ) -> Result<Arc<Prepared>, HostError> {
        let meta = file.metadata().map_err(|e| io_error(path, e))?;
        let stamp = Stamp::of(&meta);
        let known = lock(&self.digests)
            .get(path)
            .filter(|(seen, _)| *seen == stamp)
            .map(|(_, digest)| *digest);
        if let Some(prepared) = known.and_then(|d| lock(&self.prepared).get(&d).cloned()) {
            return Ok(prepared);
        }
        if meta.len() > max_bytes {
            return Err(HostError::new(
                ErrorKind::ResourceExhausted,
                format!(
                    "{} is {} bytes; components up to {max_bytes} bytes are compiled",
                    path.display(),
                    meta.len()
                ),
            ));
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        Read::by_ref(&mut file)
            .take(max_bytes + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(path, e))?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        remember(&self.digests, path.to_path_buf(), (stamp, digest));
        if let Some(prepared) = lock(&self.prepared).get(&digest).cloned() {
            return Ok(prepared);
        }
        let component = self.component(engine, &digest, &bytes, path)?;
        let prepared = Arc::new(prepare(engine, linker, &component, digest, path)?);
        remember(&self.prepared, digest, Arc::clone(&prepared));
        Ok(prepared)
    }

    /// From the artifact cache, or compiled (and then cached).
    fn component(
        &self,
        engine: &Engine,
        digest: &[u8; 32],
        bytes: &[u8],
        path: &Path,
    ) -> Result<Component, HostError> {
        let artifact = self
            .dir
            .join(format!("{}-{}.cwasm", hex(digest), self.compat));
        if artifact.is_file() {
            // SAFETY: artifacts in this directory are written only by
            // `store` below, from a component this engine compiled; the name
            // binds the source digest and the engine's compatibility hash.
            match unsafe { Component::deserialize_file(engine, &artifact) } {
                Ok(component) => return Ok(component),
                Err(error) => {
                    tracing::warn!(artifact = %artifact.display(), %error, "discarding an unusable cached artifact");
                    let _ = fs::remove_file(&artifact);
                }
            }
        }
        let started = std::time::Instant::now();
        let component = Component::new(engine, bytes).map_err(|e| {
            HostError::new(
                ErrorKind::InvalidComponentType,
                format!(
                    "{} is not a valid WebAssembly component: {e}",
                    path.display()
                ),
            )
        })?;
        tracing::debug!(path = %path.display(), elapsed = ?started.elapsed(), "compiled component");
        if let Err(error) = self.store(&artifact, &component) {
            tracing::warn!(artifact = %artifact.display(), %error, "cannot cache the compiled component");
        }
        Ok(component)
    }

    /// Write the artifact atomically (temp file + rename) in a private directory.
    fn store(&self, artifact: &Path, component: &Component) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let bytes = component.serialize().map_err(std::io::Error::other)?;
        let mut temp = tempfile::NamedTempFile::new_in(&self.dir)?;
        temp.write_all(&bytes)?;
        temp.as_file().sync_all()?;
        temp.persist(artifact).map_err(|e| e.error)?;
        Ok(())
    }
}

/// Find the component's world and pre-instantiate it against the linker.
fn prepare(
    engine: &Engine,
    linker: &Linker<GuestState>,
    component: &Component,
    digest: [u8; 32],
    path: &Path,
) -> Result<Prepared, HostError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let typed = exports.iter().any(|name| name == "run");
    let command = exports.iter().any(|name| name.starts_with("wasi:cli/run@"));
    if !typed && !command {
        return Err(HostError::new(
            ErrorKind::InvalidComponentType,
            format!(
                "{} exports neither `wasi:cli/run` (a WASI command) nor `run` (the skillhost:skill world); it exports [{}]",
                path.display(),
                exports.join(", ")
            ),
        ));
    }
    let pre = linker.instantiate_pre(component).map_err(|e| {
        HostError::new(
            ErrorKind::InvalidComponentType,
            format!(
                "{} needs imports this host does not provide (only WASI p2 and skillhost:skill/host are offered): {e}",
                path.display()
            ),
        )
    })?;
    let invalid = |e: wasmtime::Error| {
        HostError::new(
            ErrorKind::InvalidComponentType,
            format!("{}: {e}", path.display()),
        )
    };
    let world = if typed {
        World::Typed(SkillPre::new(pre).map_err(invalid)?)
    } else {
        World::Command(CommandPre::new(pre).map_err(invalid)?)
    };
    Ok(Prepared { world, digest })
}

fn lock<K, V>(map: &Mutex<HashMap<K, V>>) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
    map.lock().unwrap_or_else(|e| e.into_inner())
}

fn remember<K: Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    let mut map = lock(map);
    if map.len() >= MAX_CACHED {
        map.clear();
    }
    map.insert(key, value);
}

fn io_error(path: &Path, error: std::io::Error) -> HostError {
    HostError::new(
        ErrorKind::IoError,
        format!("{} cannot be read: {error}", path.display()),
    )
}

/// `Hasher` over sha256, for a stable (cross-run) compatibility key.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
