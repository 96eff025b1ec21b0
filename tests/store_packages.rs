//! Installing packages and raw parts through the library `Host`: the
//! `.tar.gz` round trip and its MANIFEST.sha256, the layouts packages come
//! in, hostile packages (each refused, leaving nothing), raw parts with a
//! wasm component (precompiled at install, pinned runs), bad requests.

mod common;

use std::fs;
use std::path::Path;

use base64::Engine as _;
use common::Fixture;
use common::skills::{host, request};
use common::store::*;
use serde_json::json;
use skillhost::api::{Encoding, InstallFile, InstallRequest, ListRequest, ReadRequest};
use skillhost::exec::{RunContext, Status};
use skillhost::manage::Origin;
use skillhost::{ErrorKind, SourceKind};

// ---------------------------------------------------------------- packages

fn package_of(dir: &Path) -> Vec<u8> {
    skillhost::store::stage::package(dir, Default::default()).expect("package")
}

/// Keeps, changes (`Some`) or drops (`None`) a package member.
type Edit<'a> = &'a dyn Fn(&str, &[u8]) -> Option<Vec<u8>>;

#[test]
fn a_package_round_trips_and_its_manifest_is_checked() {
    let fx = Fixture::new();
    let host = host(&fx);
    let dir = version_dir(fx.path(), "alpha", 1);
    fx.file(&dir, "assets/blob.bin", [0u8, 159, 146, 150, 255]);
    let package = package_of(&dir);
    assert_eq!(package, package_of(&dir), "packages are reproducible");
    let members = untar(&package);
    let top = "alpha-v1";
    assert!(
        members.contains_key(&format!("{top}/MANIFEST.sha256")),
        "{:?}",
        members.keys()
    );
    let installed = install_package(&host, &package).unwrap();
    assert_eq!(installed.name, "alpha");
    let files = assert_revision_whole(&fx.state_dir(), "alpha", &installed.revision_id);
    assert_eq!(
        files,
        tree(&dir),
        "the installed files are the packaged ones"
    );
    assert!(!files.contains_key("MANIFEST.sha256"));
    // The same content from the directory is the same revision.
    let other = Fixture::new();
    assert_eq!(
        install_path(&common::skills::host(&other), &dir).revision_id,
        installed.revision_id
    );
    // From a path to the .tar.gz too.
    let path = fx.path().join("alpha.tar.gz");
    fs::write(&path, &package).unwrap();
    let by_path = install_path(&host, &path);
    assert_eq!(
        (by_path.revision_id, by_path.new_revision),
        (installed.revision_id.clone(), false)
    );

    // One file altered after packaging (old MANIFEST kept): refused.
    let rebuild = |change: Edit, extra: Option<Member>| {
        let mut out: Vec<Member> = members
            .iter()
            .filter_map(|(path, bytes)| change(path, bytes).map(|b| Member::File(path.clone(), b)))
            .collect();
        out.extend(extra);
        targz(&out)
    };
    let altered = rebuild(
        &|path, bytes| {
            Some(if path.ends_with("version.txt") {
                b"9\n".to_vec()
            } else {
                bytes.to_vec()
            })
        },
        None,
    );
    let missing = rebuild(
        &|path, bytes| (!path.ends_with("version.txt")).then(|| bytes.to_vec()),
        None,
    );
    let extra = rebuild(
        &|_, bytes| Some(bytes.to_vec()),
        Some(file(&format!("{top}/extra.txt"), "x")),
    );
    let fx2 = Fixture::new();
    let host2 = common::skills::host(&fx2);
    for (what, package) in [
        ("altered", altered),
        ("missing", missing),
        ("unlisted", extra),
    ] {
        let refused = error(install_package(&host2, &package));
        assert_eq!(refused.kind, ErrorKind::InvalidInput, "{what}: {refused}");
        assert!(
            refused.message.contains("MANIFEST.sha256"),
            "{what}: {refused}"
        );
    }
    assert!(host2.list(&ListRequest::default()).skills.is_empty());
}

#[test]
fn a_package_with_one_top_directory_or_dot_slash_members_installs() {
    for prefix in ["demo/", "./", "./demo/", ""] {
        let fx = Fixture::new();
        let host = host(&fx);
        let mut members = minimal("demo", prefix);
        members.push(file(&format!("{prefix}references/a.md"), "A\n"));
        let installed =
            install_package(&host, &targz(&members)).unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
        let files = assert_revision_whole(&fx.state_dir(), "demo", &installed.revision_id);
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["SKILL.md", "references/a.md"],
            "{prefix:?}"
        );
    }
}

/// GNU tar (`tar czf demo.tar.gz demo`) writes a member for each directory,
/// the top one first; such a package must install.
#[test]
fn a_package_with_directory_members_installs() {
    let fx = Fixture::new();
    let host = host(&fx);
    let members = vec![
        Member::Dir("demo/".into()),
        file("demo/SKILL.md", skill_md("demo", 1)),
        Member::Dir("demo/references/".into()),
        file("demo/references/a.md", "A\n"),
    ];
    let installed = install_package(&host, &targz(&members)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(installed.name, "demo");
}

/// Hidden members (`.DS_Store`, `.git/...`) are documented as dropped with
/// a warning, as a directory install drops them.
#[test]
fn hidden_members_of_a_package_are_dropped_with_a_warning() {
    let fx = Fixture::new();
    let host = host(&fx);
    let mut members = minimal("demo", "demo/");
    members.push(file("demo/.DS_Store", "junk"));
    members.push(file("demo/.git/config", "[core]"));
    let installed = install_package(&host, &targz(&members)).unwrap_or_else(|e| panic!("{e}"));
    let files = assert_revision_whole(&fx.state_dir(), "demo", &installed.revision_id);
    assert_eq!(files.keys().collect::<Vec<_>>(), ["SKILL.md"]);
    assert!(
        installed.warnings.iter().any(|w| w.contains(".DS_Store")),
        "{:?}",
        installed.warnings
    );
}

#[test]
fn hostile_packages_are_refused_and_leave_nothing() {
    let top = |extra: Member| {
        let mut members = minimal("demo", "");
        members.push(extra);
        members
    };
    let under = |extra: Member| {
        let mut members = minimal("demo", "demo/");
        members.push(extra);
        members
    };
    let raw = |name: &str| Member::Raw(name.as_bytes().to_vec(), b"evil\n".to_vec());
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        ("absolute member", "absolute", targz(&top(raw("/tmp/evil")))),
        (
            "absolute member beside a top dir",
            "outside",
            targz(&under(raw("/tmp/evil"))),
        ),
        ("dot-dot member", "..", targz(&top(raw("../evil")))),
        (
            "dot-dot below the top dir",
            "..",
            targz(&under(raw("demo/../../evil"))),
        ),
        (
            "dot-dot inside",
            "..",
            targz(&top(raw("references/../../evil"))),
        ),
        (
            "symlink",
            "link",
            targz(&top(Member::Symlink("passwd".into(), "/etc/passwd".into()))),
        ),
        (
            "symlink under top",
            "link",
            targz(&under(Member::Symlink(
                "demo/passwd".into(),
                "/etc/passwd".into(),
            ))),
        ),
        (
            "hardlink",
            "link",
            targz(&top(Member::Hardlink("copy".into(), "SKILL.md".into()))),
        ),
        (
            "hardlink outside",
            "link",
            targz(&top(Member::Hardlink(
                "shadow".into(),
                "/etc/shadow".into(),
            ))),
        ),
        ("fifo", "Fifo", targz(&top(Member::Fifo("pipe".into())))),
        (
            "char device",
            "Char",
            targz(&top(Member::CharDevice("null".into()))),
        ),
        (
            "twice the same file",
            "twice",
            targz(&top(file("SKILL.md", skill_md("demo", 2)))),
        ),
        (
            "no SKILL.md",
            "no SKILL.md",
            targz(&[file("demo/README.md", "hi")]),
        ),
        (
            "SKILL.md without a name",
            "`name`",
            targz(&[file("SKILL.md", "---\ndescription: d\n---\nx\n")]),
        ),
        (
            "SKILL.md with an invalid name",
            "Bad Name",
            targz(&[file(
                "SKILL.md",
                "---\nname: Bad Name\ndescription: d\n---\nx\n",
            )]),
        ),
        (
            "SKILL.md without frontmatter",
            "frontmatter",
            targz(&[file("SKILL.md", "just text\n")]),
        ),
        ("not gzip", "damaged", b"PK\x03\x04 not a tarball".to_vec()),
        (
            "truncated",
            "damaged",
            targz(&top(file("big.txt", vec![b'x'; 100_000])))[..200].to_vec(),
        ),
    ];
    for (what, why, package) in cases {
        let fx = Fixture::new();
        let host = host(&fx);
        let refused = error(install_package(&host, &package));
        assert_eq!(refused.kind, ErrorKind::InvalidInput, "{what}: {refused}");
        assert!(refused.message.contains(why), "{what}: {refused}");
        assert_nothing_installed(&fx, what);
        assert!(
            !Path::new("/tmp/evil").exists() && !Path::new("/evil").exists(),
            "{what} escaped"
        );
    }
}

#[test]
fn an_oversize_member_is_refused_for_its_size() {
    let fx = Fixture::new();
    let host = host(&fx);
    let mut members = minimal("demo", "demo/");
    members.push(file("demo/zeros.bin", vec![0u8; 65 * 1024 * 1024]));
    let package = targz_with(&members, flate2::Compression::best());
    assert!(package.len() < 1024 * 1024, "{} bytes", package.len());
    let refused = error(install_package(&host, &package));
    assert_eq!(refused.kind, ErrorKind::InvalidInput, "{refused}");
    let message = refused.message.to_lowercase();
    assert!(
        message.contains("larger") || message.contains("bomb"),
        "{refused}"
    );
    assert_nothing_installed(&fx, "oversize");
}

#[test]
fn a_decompression_bomb_is_refused() {
    let fx = Fixture::new();
    let host = host(&fx);
    let mut members = minimal("demo", "demo/");
    members.push(file("demo/zeros.bin", vec![0u8; 20 * 1024 * 1024]));
    let package = targz_with(&members, flate2::Compression::best());
    assert!(
        20 * 1024 * 1024 / package.len() > 200,
        "ratio of the test package"
    );
    let refused = error(install_package(&host, &package));
    assert_eq!(refused.kind, ErrorKind::InvalidInput, "{refused}");
    assert!(refused.message.contains("bomb"), "{refused}");
    assert_nothing_installed(&fx, "bomb");
}

// ------------------------------------------------------------- raw parts

#[test]
fn raw_parts_install_precompiles_and_runs_a_wasm_component() {
    let fx = Fixture::new();
    let host = host(&fx);
    let echo = fs::read(common::guests::guest("echo")).unwrap();
    let cache = fx.state_dir().join("cache/wasm");
    let v1 = host
        .install(&parts_request(1, &echo), Origin::Client)
        .unwrap();
    let artifacts: Vec<_> = fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        artifacts
            .iter()
            .any(|a| a.to_string_lossy().ends_with(".cwasm")),
        "no precompiled artifact in {} right after install: {artifacts:?}",
        cache.display()
    );
    let files = assert_revision_whole(&fx.state_dir(), "parts", &v1.revision_id);
    assert_eq!(files["components/echo.wasm"], echo);
    assert_eq!(files["assets/blob.bin"], [0, 159, 146, 150, 255]);
    let blob = host
        .read(&ReadRequest {
            name: "parts".into(),
            path: "assets/blob.bin".into(),
            offset: None,
            length: None,
            revision: None,
        })
        .unwrap();
    let expected = base64::engine::general_purpose::STANDARD.encode([0u8, 159, 146, 150, 255]);
    assert_eq!((blob.encoding, blob.content), (Encoding::Base64, expected));

    let input = json!({"hello": ["wasm", 1]});
    let run = |revision: Option<&str>| {
        let mut req = request("parts", "echo", input.clone());
        req.revision = revision.map(str::to_owned);
        host.run(&req, &RunContext::default())
    };
    let env = run(None).unwrap();
    assert_eq!(env.data.status, Status::Succeeded, "{env:#?}");
    assert_eq!(env.data.output_data.as_ref(), Some(&input));
    assert_eq!(env.data.revision_id, v1.revision_id);

    // Upgrade; runs pin to either revision.
    let v2 = host
        .install(&parts_request(2, &echo), Origin::Client)
        .unwrap();
    assert_eq!((v2.version, v2.new_revision), (2, true));
    assert_eq!(run(None).unwrap().data.revision_id, v2.revision_id);
    assert_eq!(
        run(Some(&v2.revision_id)).unwrap().data.revision_id,
        v2.revision_id
    );
    let pinned = run(Some(&v1.revision_id)).unwrap();
    assert_eq!(
        (pinned.data.status, pinned.data.revision_id.as_str()),
        (Status::Succeeded, v1.revision_id.as_str())
    );
    let unknown = format!("sha256:{}", "f".repeat(64));
    assert_eq!(error(run(Some(&unknown))).kind, ErrorKind::RevisionNotFound);
}

#[test]
fn malformed_install_requests_are_invalid_input() {
    let fx = Fixture::new();
    let host = host(&fx);
    let md = skill_md("parts", 1);
    let with_files = |files: Vec<InstallFile>| InstallRequest {
        skill_md: Some(md.clone()),
        files: Some(files),
        ..InstallRequest::default()
    };
    let one = |path: &str, content: &str, encoding| {
        vec![InstallFile {
            path: path.into(),
            content: content.into(),
            encoding,
        }]
    };
    let cases = vec![
        ("nothing", InstallRequest::default()),
        (
            "two sources",
            InstallRequest {
                path: Some(fx.path().display().to_string()),
                skill_md: Some(md.clone()),
                ..InstallRequest::default()
            },
        ),
        (
            "files without skill_md",
            InstallRequest {
                files: Some(vec![]),
                ..InstallRequest::default()
            },
        ),
        (
            "bad base64",
            with_files(one("a.bin", "%%%", Some(Encoding::Base64))),
        ),
        (
            "bad package base64",
            InstallRequest {
                package_base64: Some("***".into()),
                ..InstallRequest::default()
            },
        ),
        ("SKILL.md twice", with_files(one("./SKILL.md", "x", None))),
        ("escaping path", with_files(one("../x.md", "x", None))),
        ("absolute path", with_files(one("/etc/x.md", "x", None))),
        (
            "invalid skill.yaml",
            with_files(one("skill.yaml", "components: [{name: a}]", None)),
        ),
        (
            "missing component file",
            with_files(one("skill.yaml", common::skills::ECHO, None)),
        ),
    ];
    for (what, request) in cases {
        let refused = error(host.install(&request, Origin::Client));
        assert_eq!(refused.kind, ErrorKind::InvalidInput, "{what}: {refused}");
        assert_nothing_installed(&fx, what);
    }
}

/// A `revision` pin names the same thing to load, read and run. With a
/// project skill shadowing the managed one, load and read serve the pinned
/// managed revision while run refuses it with REVISION_NOT_FOUND.
#[test]
fn a_pin_means_the_same_to_load_read_and_run_when_shadowed() {
    let fx = Fixture::new();
    let host = host(&fx);
    let echo = fs::read(common::guests::guest("echo")).unwrap();
    let v1 = host
        .install(&parts_request(1, &echo), Origin::Client)
        .unwrap();
    common::skills::yaml_skill(&fx, "parts", common::skills::ECHO);
    assert_eq!(host.load("parts").unwrap().source, SourceKind::Project);
    let load = load_at(&host, "parts", Some(&v1.revision_id))
        .map(|_| ())
        .map_err(|e| e.kind);
    let read = read_at(&host, "parts", "skill.yaml", Some(&v1.revision_id)).map(|_| ());
    let mut pinned = request("parts", "echo", json!({}));
    pinned.revision = Some(v1.revision_id.clone());
    let run = host
        .run(&pinned, &RunContext::default())
        .map(|_| ())
        .map_err(|e| e.kind);
    assert_eq!(load, read);
    assert_eq!(
        load, run,
        "load {load:?} and run {run:?} disagree about revision {}",
        v1.revision_id
    );
}
