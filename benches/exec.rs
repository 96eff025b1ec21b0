//! `skill_run` of WebAssembly components.
//!
//! Targets: a trivial component call in-process, warm, p50 <= 100 us; the
//! first call after a restart with a cached artifact <= 5 ms (and the same
//! without the cache, for the ratio); the cost of fuel + epoch checks on a
//! CPU-bound, call-heavy guest against neither (reported as a ratio).
//!
//! Run with `cargo bench --bench exec` (builds the guests first).

#[path = "../tests/common/guests.rs"]
mod guests;

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use skillhost::api::RunRequest;
use skillhost::exec::{RunContext, Status};
use skillhost::{Host, HostConfig};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::p2::bindings::sync::CommandPre;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// A workspace with one skill whose components are the echo and fib guests.
struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    state: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let workspace = root.path().join("ws");
        let skill = workspace.join(".agents/skills/bench");
        fs::create_dir_all(skill.join("components")).unwrap();
        fs::write(
            skill.join("SKILL.md"),
            "---\nname: bench\ndescription: Benchmark components\n---\nBody\n",
        )
        .unwrap();
        for name in ["echo", "fib"] {
            fs::copy(
                guests::guest(name),
                skill.join(format!("components/{name}.wasm")),
            )
            .unwrap();
        }
        Fixture {
            state: root.path().join("state"),
            workspace,
            _root: root,
        }
    }

    fn host(&self) -> Host {
        let mut config = HostConfig::new(&self.workspace).with_state_dir(&self.state);
        config.global_dir = None;
        Host::new(config)
    }
}

fn echo(host: &Host) {
    let request = RunRequest {
        name: "bench".into(),
        component: "echo".into(),
        input: Some(json!({"hello": "world"})),
        revision: None,
        timeout_seconds: None,
    };
    let envelope = host.run(&request, &RunContext::default()).unwrap();
    assert_eq!(envelope.data.status, Status::Succeeded);
    black_box(envelope);
}

fn run_benches(c: &mut Criterion) {
    let fixture = Fixture::new();
    let mut group = c.benchmark_group("wasm_run");
    group.measurement_time(Duration::from_secs(8));

    let host = fixture.host();
    echo(&host);
    group.bench_function("trivial_warm", |b| b.iter(|| echo(&host)));

    // A restart: a new Host (engine, linker, registry) whose state dir holds
    // the compiled artifact written by the runs above.
    group.sample_size(30);
    group.bench_function("first_call_cached_artifact", |b| {
        b.iter_batched(
            || fixture.host(),
            |host| echo(&host),
            BatchSize::PerIteration,
        )
    });
    // The same, but the runtime was started in advance, as `serve` does at
    // start-up: what the first client request of a restarted server waits for.
    group.bench_function("first_call_cached_artifact_warm_runtime", |b| {
        b.iter_batched(
            || {
                let host = fixture.host();
                host.warm_up();
                host
            },
            |host| echo(&host),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("first_call_no_cache", |b| {
        b.iter_batched(
            || {
                let _ = fs::remove_dir_all(fixture.state.join("cache"));
                fixture.host()
            },
            |host| echo(&host),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

struct State {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

/// One engine configuration running fib(n) from a CommandPre.
struct Fib {
    engine: Engine,
    pre: CommandPre<State>,
    fuel: bool,
    epoch: bool,
}

impl Fib {
    fn new(path: &Path, fuel: bool, epoch: bool) -> Self {
        let mut config = Config::new();
        config.consume_fuel(fuel).epoch_interruption(epoch);
        let engine = Engine::new(&config).unwrap();
        let component = Component::from_file(&engine, path).unwrap();
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
        let pre = CommandPre::new(linker.instantiate_pre(&component).unwrap()).unwrap();
        Fib {
            engine,
            pre,
            fuel,
            epoch,
        }
    }

    fn run(&self, n: u32) {
        let stdout = MemoryOutputPipe::new(1024);
        let ctx = WasiCtxBuilder::new()
            .stdin(MemoryInputPipe::new(format!("{{\"n\": {n}}}")))
            .stdout(stdout.clone())
            .build();
        let mut store = Store::new(
            &self.engine,
            State {
                ctx,
                table: ResourceTable::new(),
            },
        );
        if self.fuel {
            store.set_fuel(u64::MAX).unwrap();
        }
        if self.epoch {
            store.set_epoch_deadline(u64::MAX / 2);
        }
        let command = self.pre.instantiate(&mut store).unwrap();
        command
            .wasi_cli_run()
            .call_run(&mut store)
            .unwrap()
            .unwrap();
        assert!(!stdout.contents().is_empty());
    }
}

fn fuel_epoch_benches(c: &mut Criterion) {
    let path = guests::guest("fib");
    let mut group = c.benchmark_group("fuel_epoch_fib27");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    for (label, fuel, epoch) in [
        ("neither", false, false),
        ("fuel", true, false),
        ("epoch", false, true),
        ("fuel_and_epoch", true, true),
    ] {
        let fib = Fib::new(&path, fuel, epoch);
        group.bench_function(label, |b| b.iter(|| fib.run(27)));
    }
    group.finish();
}

criterion_group!(benches, run_benches, fuel_epoch_benches);
criterion_main!(benches);
