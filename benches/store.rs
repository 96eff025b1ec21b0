//! The managed store: installing a 1 MiB skill, and `skill_list` with 1,000
//! installed skills (which must stay within the foundation's targets: warm
//! <= 3 ms, cold <= 50 ms).
//!
//! Run with `cargo bench --bench store`.

use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use skillhost::api::{InstallRequest, ListRequest};
use skillhost::manage::Origin;
use skillhost::{Host, HostConfig};

fn host(root: &Path) -> Host {
    let mut config = HostConfig::new(root.join("ws")).with_state_dir(root.join("state"));
    config.global_dir = None;
    config.keep_revisions = 2;
    Host::new(config)
}

fn write_skill(dir: &Path, name: &str, payload_bytes: usize) {
    fs::create_dir_all(dir.join("references")).unwrap();
    fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: Benchmark skill {name}, installed into the managed store.\n---\n# {name}\n\nRead references/ when needed.\n"),
    )
    .unwrap();
    let chunk = payload_bytes / 16;
    for i in 0..16 {
        let body: String = (0..chunk)
            .map(|j| (b'a' + ((i + j) % 26) as u8) as char)
            .collect();
        fs::write(dir.join(format!("references/part-{i:02}.md")), body).unwrap();
    }
}

fn install(host: &Host, dir: &Path) {
    let installed = host
        .install(
            &InstallRequest {
                path: Some(dir.display().to_string()),
                ..InstallRequest::default()
            },
            Origin::Operator,
        )
        .unwrap();
    black_box(installed);
}

fn benches(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let host = host(root.path());
    let source = root.path().join("src/big");
    write_skill(&source, "big", 1024 * 1024);
    let counter = AtomicU64::new(0);
    let mut group = c.benchmark_group("store");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("install_1mib", |b| {
        b.iter_batched(
            || {
                // A change per iteration, so every install is a new revision.
                let n = counter.fetch_add(1, Ordering::Relaxed);
                fs::write(source.join("references/version.md"), n.to_string()).unwrap();
            },
            |()| install(&host, &source),
            BatchSize::PerIteration,
        )
    });

    // 1,000 installed skills.
    let many = tempfile::tempdir().unwrap();
    let host = self::host(many.path());
    // The same shape as the foundation's benchmark: SKILL.md and two files.
    for i in 0..1000 {
        let name = format!("skill-{i:04}");
        let dir = many.path().join("src").join(&name);
        fs::create_dir_all(dir.join("references")).unwrap();
        fs::create_dir_all(dir.join("scripts")).unwrap();
        fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Processes batch {i} of the quarterly reports, extracts tables and writes a summary. Use when asked about batch {i}.\n---\n# {name}\n\nSteps: read references/guide.md, then run scripts/run.py.\n"),
        )
        .unwrap();
        fs::write(dir.join("references/guide.md"), format!("# Guide {i}\n")).unwrap();
        fs::write(dir.join("scripts/run.py"), "print('ok')\n").unwrap();
        install(&host, &dir);
    }
    assert_eq!(host.list(&ListRequest::default()).skills.len(), 1000);
    group.sample_size(50);
    group.bench_function("list_1000_installed_warm", |b| {
        b.iter(|| black_box(host.list(&ListRequest::default())))
    });
    group.bench_function("list_1000_installed_cold", |b| {
        b.iter_batched(
            || self::host(many.path()),
            |host| black_box(host.list(&ListRequest::default())),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(store, benches);
criterion_main!(store);
