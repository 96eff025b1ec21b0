//! Helpers for the managed-store tests: versioned skill directories,
//! hand-built (and hostile) `.tar.gz` packages, and a check that the store
//! on disk is consistent (catalog parses, every kept revision is whole),
//! short library calls, and helpers that run the binary as JSON commands.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;
use sha2::{Digest, Sha256};
use skillhost::api::{
    ActivateRequest, ChangeRequest, Encoding, InstallFile, InstallRequest, Installed, LoadRequest,
    LoadedSkill, ReadRequest, RevisionsRequest, StoredSkill,
};
use skillhost::manage::Origin;
use skillhost::{ErrorKind, Host, HostError};

/// The instructions of skill `name` at `version`.
pub fn body(name: &str, version: u32) -> String {
    format!("# {name}\nVersion {version} of {name}.\n")
}

/// The SKILL.md text of skill `name` at `version`.
pub fn skill_md(name: &str, version: u32) -> String {
    format!(
        "---\nname: {name}\ndescription: Skill {name} at version {version}\n---\n{}",
        body(name, version)
    )
}

/// Write skill `name` at `version` into `dir` (created): SKILL.md,
/// `version.txt`, `data/common.txt` (the same in every version) and
/// `references/v<version>.md` (only in this version).
pub fn versioned(dir: &Path, name: &str, version: u32) -> PathBuf {
    fs::create_dir_all(dir.join("data")).unwrap();
    fs::create_dir_all(dir.join("references")).unwrap();
    fs::write(dir.join("SKILL.md"), skill_md(name, version)).unwrap();
    fs::write(dir.join("version.txt"), format!("{version}\n")).unwrap();
    fs::write(dir.join("data/common.txt"), "shared by every version\n").unwrap();
    fs::write(
        dir.join(format!("references/v{version}.md")),
        format!("notes of {name} v{version}\n"),
    )
    .unwrap();
    dir.to_path_buf()
}

/// `<root>/src/<name>-v<version>`, written by [`versioned`].
pub fn version_dir(root: &Path, name: &str, version: u32) -> PathBuf {
    versioned(
        &root.join("src").join(format!("{name}-v{version}")),
        name,
        version,
    )
}

/// Every regular file below `dir` (relative path -> bytes), hidden ones included.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = pending.pop() {
        for entry in fs::read_dir(&path).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push((entry.path(), child));
            } else {
                out.insert(child, fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// `sha256:` and the hex digest of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

// ---------------------------------------------------------------- packages

/// One member of a hand-built package.
pub enum Member {
    File(String, Vec<u8>),
    Dir(String),
    Symlink(String, String),
    Hardlink(String, String),
    Fifo(String),
    CharDevice(String),
    /// A regular file whose name bytes are written as they are (absolute
    /// paths and `..`, which the tar crate's builder refuses to write).
    Raw(Vec<u8>, Vec<u8>),
}

pub fn file(path: &str, bytes: impl AsRef<[u8]>) -> Member {
    Member::File(path.into(), bytes.as_ref().to_vec())
}

/// A package member list for a minimal valid skill `name` (SKILL.md only), under `prefix`.
pub fn minimal(name: &str, prefix: &str) -> Vec<Member> {
    vec![file(&format!("{prefix}SKILL.md"), skill_md(name, 1))]
}

fn header(kind: tar::EntryType, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_size(size);
    header.set_mode(if kind == tar::EntryType::Directory {
        0o755
    } else {
        0o644
    });
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

/// A `.tar.gz` of `members`, in order.
pub fn targz(members: &[Member]) -> Vec<u8> {
    targz_with(members, flate2::Compression::fast())
}

pub fn targz_with(members: &[Member], level: flate2::Compression) -> Vec<u8> {
    use tar::EntryType;
    let encoder = flate2::write::GzEncoder::new(Vec::new(), level);
    let mut builder = tar::Builder::new(encoder);
    for member in members {
        match member {
            Member::File(path, bytes) => {
                let mut h = header(EntryType::Regular, bytes.len() as u64);
                builder.append_data(&mut h, path, bytes.as_slice()).unwrap();
            }
            Member::Dir(path) => {
                let mut h = header(EntryType::Directory, 0);
                builder.append_data(&mut h, path, &[][..]).unwrap();
            }
            Member::Symlink(path, target) | Member::Hardlink(path, target) => {
                let kind = if matches!(member, Member::Symlink(..)) {
                    EntryType::Symlink
                } else {
                    EntryType::Link
                };
                let mut h = header(kind, 0);
                h.set_link_name_literal(target.as_bytes()).unwrap();
                builder.append_data(&mut h, path, &[][..]).unwrap();
            }
            Member::Fifo(path) | Member::CharDevice(path) => {
                let kind = if matches!(member, Member::Fifo(_)) {
                    EntryType::Fifo
                } else {
                    EntryType::Char
                };
                let mut h = header(kind, 0);
                builder.append_data(&mut h, path, &[][..]).unwrap();
            }
            Member::Raw(name, bytes) => {
                let mut h = header(EntryType::Regular, bytes.len() as u64);
                h.as_old_mut().name[..name.len()].copy_from_slice(name);
                h.set_cksum();
                builder.append(&h, bytes.as_slice()).unwrap();
            }
        }
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// The regular files of a `.tar.gz` (path -> bytes).
pub fn untar(package: &[u8]) -> BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(package));
    let mut out = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        out.insert(path, bytes);
    }
    out
}

// ------------------------------------------------------------ the store

pub fn store_dir(state: &Path) -> PathBuf {
    state.join("store")
}

/// The catalog as JSON (it must parse); `None` when there is none yet.
pub fn catalog(state: &Path) -> Option<Value> {
    let path = store_dir(state).join("catalog.json");
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "catalog.json does not parse ({e}):\n{}",
            String::from_utf8_lossy(&bytes)
        )
    }))
}

/// The catalog's entry for `name`, if installed.
pub fn entry(state: &Path, name: &str) -> Option<Value> {
    catalog(state).and_then(|c| c["skills"].get(name).cloned())
}

pub fn revision_dir(state: &Path, name: &str, id: &str) -> PathBuf {
    let hex = id.strip_prefix("sha256:").expect("a sha256: revision id");
    store_dir(state).join("revisions").join(name).join(hex)
}

/// The revision id of a file list, computed as the store documents it:
/// sha256 over the sorted `(path, NUL, digest, LF)` lines.
pub fn revision_id(files: &BTreeMap<String, String>) -> String {
    let mut hasher = Sha256::new();
    for (path, digest) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update(digest.as_bytes());
        hasher.update([b'\n']);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// One kept revision is whole: its directory holds exactly the files of
/// its `.manifest.json`, each with the listed sha256, and the manifest's
/// digests hash to the revision id. Returns the files (path -> bytes).
pub fn assert_revision_whole(state: &Path, name: &str, id: &str) -> BTreeMap<String, Vec<u8>> {
    let dir = revision_dir(state, name, id);
    assert!(
        dir.is_dir(),
        "revision {id} of {name}: {} is missing",
        dir.display()
    );
    let mut files = tree(&dir);
    let manifest = files
        .remove(".manifest.json")
        .unwrap_or_else(|| panic!("revision {id} of {name} has no .manifest.json"));
    let manifest: Value = serde_json::from_slice(&manifest).expect(".manifest.json parses");
    assert_eq!(manifest["id"], id, "{manifest:#}");
    let listed: BTreeMap<String, String> =
        serde_json::from_value(manifest["files"].clone()).expect(".manifest.json files is a map");
    assert_eq!(
        revision_id(&listed),
        id,
        "the manifest does not hash to the id"
    );
    let present: Vec<&String> = files.keys().collect();
    let expected: Vec<&String> = listed.keys().collect();
    assert_eq!(present, expected, "revision {id} of {name}: files differ");
    for (path, digest) in &listed {
        assert_eq!(&sha256(&files[path]), digest, "{name} {id}: {path}");
    }
    files
}

/// The store is consistent: the catalog parses, every entry's active
/// revision is one it keeps, and every kept revision is whole (with the
/// file count and byte total the catalog records). Returns the catalog.
pub fn assert_consistent(state: &Path) -> Value {
    let Some(catalog) = catalog(state) else {
        return serde_json::json!({"skills": {}});
    };
    let skills = catalog["skills"].as_object().expect("skills map");
    for (name, entry) in skills {
        let active = entry["active"].as_str().expect("active");
        let revisions = entry["revisions"].as_array().expect("revisions");
        assert!(
            revisions.iter().any(|r| r["id"] == active),
            "{name}: the active revision is not kept: {entry:#}"
        );
        assert!(entry["version"].as_u64().unwrap() >= 1, "{entry:#}");
        for revision in revisions {
            let id = revision["id"].as_str().unwrap();
            let files = assert_revision_whole(state, name, id);
            assert_eq!(revision["files"], files.len(), "{name} {id}");
            let bytes: usize = files.values().map(Vec::len).sum();
            assert_eq!(revision["bytes"], bytes, "{name} {id}");
        }
    }
    catalog
}

/// Staging directories left in `<store>/tmp`.
pub fn staging_leftovers(state: &Path) -> Vec<String> {
    match fs::read_dir(store_dir(state).join("tmp")) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Names of the skills the catalog lists.
pub fn installed(state: &Path) -> Vec<String> {
    catalog(state)
        .map(|c| c["skills"].as_object().unwrap().keys().cloned().collect())
        .unwrap_or_default()
}

/// The config (`skill.yaml`) and script of the `cfg` skill: a required
/// secret API_KEY, a select MODE with a default, a number LIMIT; the script
/// prints what it receives and echoes API_KEY to stdout, stderr and its
/// output JSON, with the key's length and sha256 (which are not the secret).
pub const CONFIG_YAML: &str = "config:
  API_KEY: {type: text, secret: true, required: true}
  MODE: {type: select, values: [a, b], default: a}
  LIMIT: {type: number}
components:
  - {name: show, type: script, path: scripts/show.py}
";

pub const SHOW_PY: &str = r#"import hashlib, json, os, sys
key = os.environ.get("API_KEY", "")
sys.stderr.write("stderr has " + key + "\n")
print(json.dumps({"echo": key, "nested": {"list": [key, "x"]}, "len": len(key),
                  "sha": hashlib.sha256(key.encode()).hexdigest(),
                  "mode": os.environ.get("MODE"), "limit": os.environ.get("LIMIT")}))
"#;

/// The `cfg` skill at `dir` (named `cfg`).
pub fn config_skill(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::write(
        dir.join("SKILL.md"),
        "---\nname: cfg\ndescription: A skill with settings\n---\n# cfg\nUses API_KEY.\n",
    )
    .unwrap();
    fs::write(dir.join("skill.yaml"), CONFIG_YAML).unwrap();
    fs::write(dir.join("scripts/show.py"), SHOW_PY).unwrap();
    dir.to_path_buf()
}

/// The secret the config tests set; it must never be shown.
pub const SECRET: &str = "sk-live-9f8e7d6c5b4a-SECRET";

// ------------------------------------------------------- library shortcuts

/// Install from a directory or package path as the operator; must succeed.
pub fn install_path(host: &Host, path: &Path) -> Installed {
    let request = InstallRequest {
        path: Some(path.display().to_string()),
        ..InstallRequest::default()
    };
    host.install(&request, Origin::Operator)
        .unwrap_or_else(|e| panic!("install {}: {e}", path.display()))
}

/// Install a `.tar.gz` given inline (base64).
pub fn install_package(host: &Host, package: &[u8]) -> Result<Installed, HostError> {
    use base64::Engine as _;
    let request = InstallRequest {
        package_base64: Some(base64::engine::general_purpose::STANDARD.encode(package)),
        ..InstallRequest::default()
    };
    host.install(&request, Origin::Client)
}

/// The error of a call that must fail.
pub fn error<T: std::fmt::Debug>(result: Result<T, HostError>) -> HostError {
    match result {
        Ok(value) => panic!("expected an error, got {value:#?}"),
        Err(error) => error,
    }
}

pub fn change(name: &str, expected_version: Option<u64>) -> ChangeRequest {
    ChangeRequest {
        name: name.into(),
        expected_version,
    }
}

/// `skill_load` of `name`, at `revision` when given.
pub fn load_at(host: &Host, name: &str, revision: Option<&str>) -> Result<LoadedSkill, HostError> {
    host.load_request(&LoadRequest {
        name: name.into(),
        revision: revision.map(str::to_owned),
    })
}

// ------------------------------------------------- library calls, briefly

/// `skill_read` of a whole file: its content, or the error kind.
pub fn read_at(
    host: &Host,
    name: &str,
    path: &str,
    revision: Option<&str>,
) -> Result<String, ErrorKind> {
    host.read(&ReadRequest {
        name: name.into(),
        path: path.into(),
        offset: None,
        length: None,
        revision: revision.map(str::to_owned),
    })
    .map(|c| c.content)
    .map_err(|e| e.kind)
}

pub fn activate(
    host: &Host,
    name: &str,
    revision: &str,
    expected: Option<u64>,
) -> Result<u64, ErrorKind> {
    host.activate(&ActivateRequest {
        name: name.into(),
        revision: revision.into(),
        expected_version: expected,
    })
    .map(|s| s.version)
    .map_err(|e| e.kind)
}

pub fn revisions(host: &Host, name: &str) -> StoredSkill {
    host.revisions(&RevisionsRequest { name: name.into() })
        .unwrap_or_else(|e| panic!("revisions {name}: {e}"))
}

pub fn ids(host: &Host, name: &str) -> Vec<String> {
    revisions(host, name)
        .revisions
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// Nothing of a refused install is left: no catalog entry, no revision, no staging.
pub fn assert_nothing_installed(fx: &super::Fixture, what: &str) {
    assert!(installed(&fx.state_dir()).is_empty(), "{what}");
    let revisions = store_dir(&fx.state_dir()).join("revisions");
    let left: Vec<_> = fs::read_dir(&revisions)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{what}: {left:?}");
    assert!(
        staging_leftovers(&fx.state_dir()).is_empty(),
        "{what}: staging left behind"
    );
}

/// A raw-parts install of skill `parts` at `version`: skill.yaml with the
/// wasm `echo` component (`echo` holds its bytes), a binary asset and a note.
pub fn parts_request(version: u32, echo: &[u8]) -> InstallRequest {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let file = |path: &str, content: String, encoding| InstallFile {
        path: path.into(),
        content,
        encoding,
    };
    InstallRequest {
        skill_md: Some(skill_md("parts", version)),
        files: Some(vec![
            file("skill.yaml", super::skills::ECHO.into(), None),
            file("components/echo.wasm", b64(echo), Some(Encoding::Base64)),
            file(
                "assets/blob.bin",
                b64(&[0, 159, 146, 150, 255]),
                Some(Encoding::Base64),
            ),
            file(
                "references/notes.md",
                "notes\n".into(),
                Some(Encoding::Utf8),
            ),
        ]),
        ..InstallRequest::default()
    }
}

// ------------------------------------------------------------ the binary

/// Run a subcommand that prints JSON (management commands, `run`);
/// return (exit code, parsed stdout).
pub fn cli(fx: &super::Fixture, args: &[&str]) -> (i32, Value) {
    parse(args, &fx.run(args))
}

pub fn parse(args: &[&str], out: &Output) -> (i32, Value) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of {args:?} is not JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
}

/// A command that must succeed; its JSON.
pub fn cli_ok(fx: &super::Fixture, args: &[&str]) -> Value {
    let (code, value) = cli(fx, args);
    assert_eq!(code, 0, "{args:?}: {value:#}");
    value
}

pub fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub fn spawn(fx: &super::Fixture, args: &[&str]) -> Child {
    fx.command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn skillhost")
}

/// `skillhost ARGS` without the fixture's host flags (`init`, `package`).
pub fn plain(args: &[&str], cwd: &Path) -> Output {
    Command::new(super::bin())
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run skillhost")
}

/// Wait for every child; (args, exit code, JSON stdout).
pub fn finish(children: Vec<(Vec<String>, Child)>) -> Vec<(Vec<String>, i32, Value)> {
    children
        .into_iter()
        .map(|(args, child)| {
            let out = child.wait_with_output().unwrap();
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, value) = parse(&refs, &out);
            (args, code, value)
        })
        .collect()
}

pub fn spawn_all(fx: &super::Fixture, commands: &[Vec<String>]) -> Vec<(Vec<String>, Child)> {
    commands
        .iter()
        .map(|args| {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            (args.clone(), spawn(fx, &refs))
        })
        .collect()
}

pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

pub fn big_skill(root: &Path, files: usize) -> PathBuf {
    let dir = root.join("src/big");
    fs::create_dir_all(dir.join("data")).unwrap();
    fs::write(dir.join("SKILL.md"), skill_md("big", 1)).unwrap();
    for i in 0..files {
        fs::write(
            dir.join(format!("data/f{i:04}.txt")),
            format!("file {i}\n").repeat(20),
        )
        .unwrap();
    }
    dir
}
