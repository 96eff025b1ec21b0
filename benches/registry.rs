//! `skill_list` / `skill_load` / `skill_read` over 1,000 generated skills.
//!
//! Targets: a warm `list` (cache filled, disk unchanged) within 3 ms and a
//! cold one (fresh `Host`: every SKILL.md parsed, every tree walked) within
//! 50 ms on a 2-core machine.
//!
//! Run with `cargo bench --bench registry`.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BatchSize, Criterion, SamplingMode, criterion_group, criterion_main};
use skillhost::api::{ListRequest, ReadRequest};
use skillhost::{Host, HostConfig};

const SKILLS: usize = 1_000;
/// The skill that `skill_load` and `skill_read` ask for: one from the middle.
const TARGET: &str = "skill-0500";

/// A temp workspace whose `.agents/skills` holds `SKILLS` skills.
struct Workspace {
    _root: tempfile::TempDir,
    workspace: PathBuf,
}

impl Workspace {
    fn generate() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let workspace = root.path().join("ws");
        let skills = workspace.join(".agents").join("skills");
        for i in 0..SKILLS {
            write_skill(&skills, &format!("skill-{i:04}"), i);
        }
        Workspace {
            _root: root,
            workspace,
        }
    }

    /// Only the project source: no global dir, so the machine's
    /// `~/.config/agents/skills` is never read; the managed dir does not exist.
    fn config(&self) -> HostConfig {
        let mut config = HostConfig::new(&self.workspace);
        config.global_dir = None;
        config
    }
}

/// `<skills>/<name>/SKILL.md`, `references/guide.md` and `scripts/run.py`.
fn write_skill(skills: &Path, name: &str, i: usize) {
    let dir = skills.join(name);
    fs::create_dir_all(dir.join("references")).unwrap();
    fs::create_dir_all(dir.join("scripts")).unwrap();

    // ~200 characters, as a real description that says what and when.
    let description = format!(
        "Processes batch {i} of the quarterly reports. Extracts tables from PDF and \
         spreadsheet inputs, normalizes currencies and dates, and writes a summary. \
         Use when the user asks about report batch {i}."
    );
    let skill_md = format!(
        "---\n\
         name: {name}\n\
         description: {description}\n\
         license: Apache-2.0\n\
         ---\n\
         \n\
         # {name}\n\
         \n\
         ## When to use\n\
         \n\
         Use this skill when the user needs report batch {i} processed end to end.\n\
         \n\
         ## Steps\n\
         \n\
         1. Read `references/guide.md` for the column mapping and currency rules.\n\
         2. Run `scripts/run.py <input>` on each input file; it prints JSON rows.\n\
         3. Check the totals against the control sheet before writing the summary.\n\
         4. Report any row that fails validation with its file name and line.\n\
         \n\
         Keep the output in the user's locale and never round intermediate values.\n"
    );
    fs::write(dir.join("SKILL.md"), skill_md).unwrap();
    fs::write(
        dir.join("references").join("guide.md"),
        format!(
            "# Guide for {name}\n\n\
             | column | meaning |\n|---|---|\n| date | ISO 8601 |\n| amount | minor units |\n\n\
             Currencies are converted at the rate of the booking date.\n"
        ),
    )
    .unwrap();
    fs::write(
        dir.join("scripts").join("run.py"),
        format!(
            "#!/usr/bin/env python3\n\"\"\"Process one input for {name}.\"\"\"\n\
             import json, sys\n\n\
             def main(path):\n    print(json.dumps({{\"file\": path, \"batch\": {i}}}))\n\n\
             if __name__ == \"__main__\":\n    main(sys.argv[1])\n"
        ),
    )
    .unwrap();
}

/// Fail loudly if the fixture is not what the numbers claim to measure.
fn check(host: &Host) {
    let list = host.list(&ListRequest::default());
    assert_eq!(list.skills.len(), SKILLS, "warnings: {:?}", list.warnings);
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);
    for skill in &list.skills {
        assert!(
            skill.warnings.is_empty(),
            "{}: {:?}",
            skill.name,
            skill.warnings
        );
        assert_eq!(skill.files, ["references/guide.md", "scripts/run.py"]);
    }
}

fn read_request() -> ReadRequest {
    ReadRequest {
        name: TARGET.into(),
        path: "references/guide.md".into(),
        offset: None,
        length: None,
        revision: None,
    }
}

fn benches(c: &mut Criterion) {
    let ws = Workspace::generate();
    let request = ListRequest::default();
    // Checked up front so no number is reported for a broken fixture; this
    // Host (now warm) is the one the warm benchmarks use.
    let host = Host::new(ws.config());
    check(&host);

    let mut list = c.benchmark_group("skill_list");

    // A fresh Host per iteration: its cache is empty, so `list` parses every
    // SKILL.md and walks every tree. Only the `list` call is timed; building
    // and dropping the Host happen outside the measurement.
    list.sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6));
    list.bench_function("cold_1000", |b| {
        b.iter_batched_ref(
            || Host::new(ws.config()),
            |host| host.list(black_box(&request)),
            BatchSize::PerIteration,
        )
    });

    // One Host, scanned once; every `list` after that finds the disk unchanged.
    list.sampling_mode(SamplingMode::Auto)
        .sample_size(50)
        .measurement_time(Duration::from_secs(5));
    list.bench_function("warm_1000", |b| b.iter(|| host.list(black_box(&request))));
    list.finish();

    let mut group = c.benchmark_group("skill_load");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    host.load(TARGET).expect("load");
    group.bench_function("warm", |b| {
        b.iter(|| host.load(black_box(TARGET)).expect("load"))
    });
    group.finish();

    let mut group = c.benchmark_group("skill_read");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    let read = read_request();
    host.read(&read).expect("read");
    group.bench_function("warm", |b| {
        b.iter(|| host.read(black_box(&read)).expect("read"))
    });
    group.finish();
}

criterion_group!(registry, benches);
criterion_main!(registry);
