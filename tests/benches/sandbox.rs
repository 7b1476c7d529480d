//! What the sandbox costs per call: a fresh instance, an empty call, and
//! two real filters over 10,000 hosts against the same units' source run
//! natively; plus the fuel each built-in unit burns per host, which the
//! default fuel budget is calibrated against.
//!
//! Run with: `cargo bench -p sandpiper-tests --bench sandbox`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandpiper::builtin::{self, UNITS};
use sandpiper::sandbox::{Limits, Runtime, WasmUnit};
use sandpiper::unit::{Failed, Unit, Usage};
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{BalanceRequest, HostMetric, HostStatus, KeyValue, Request, VmMetric};
use sandpiper_tests::guests::SANDPIPER_TEST_HOSTILE;

/// Hosts in the large snapshot.
const HOSTS: usize = 10_000;
/// VMs in the large snapshot, ten per host.
const VMS: usize = HOSTS * 10;
/// Timed runs of each cheap measurement, and of each 10k-host one.
const CHEAP_RUNS: usize = 2_000;
const LARGE_RUNS: usize = 101;
/// Untimed runs first, so code, caches and the instance pool are warm.
const WARMUP_RUNS: usize = 20;
/// Runs of each built-in unit in the fuel table; its time is their median.
const FUEL_RUNS: usize = 5;

fn main() {
    let runtime = Runtime::new(Limits::default()).expect("the runtime starts");
    let hostile = runtime
        .load(SANDPIPER_TEST_HOSTILE.bytes)
        .expect("the hostile unit loads");
    let memory = builtin(&runtime, "sandpiper-policy-memory");
    let empty = Arc::new(Inventory::new(0, 0));
    let large = Arc::new(cluster());
    let candidates: Vec<u32> = (0..HOSTS as u32).collect();
    let ok = Request {
        params: vec![KeyValue::new(sandpiper_test_hostile::MODE, "ok")],
        ..Request::default()
    };

    println!("sandbox costs (median of timed runs; wasmtime 48, pooling, fuel + epochs on)");
    let instantiate = median(CHEAP_RUNS, || {
        hostile.probe(&empty).expect("instantiates");
    });
    println!(
        "  store + instantiate + drop, no call:       {}",
        show(instantiate)
    );
    let empty_call = median(CHEAP_RUNS, || {
        hostile.filter(&empty, &ok, &[]).expect("filters");
    });
    println!(
        "  empty call (fresh instance, 0 hosts):      {}",
        show(empty_call)
    );
    let candidates_only = median(LARGE_RUNS, || {
        hostile.filter(&large, &ok, &candidates).expect("filters");
    });
    println!(
        "  call passing 10k candidates, no columns:   {}",
        show(candidates_only)
    );

    for (name, native, unit) in [
        (
            "Memory (a reason per rejected host)",
            native("sandpiper-policy-memory"),
            &memory,
        ),
        (
            "CPU (reads two columns)",
            native("sandpiper-policy-cpu"),
            &builtin(&runtime, "sandpiper-policy-cpu"),
        ),
    ] {
        let native_filter = native.filter.expect("filters");
        let request = defaults(unit);
        let wasm = median(LARGE_RUNS, || {
            black_box(unit.filter(&large, &request, &candidates).expect("filters"));
        });
        let natively = median(LARGE_RUNS, || {
            black_box(native_filter(&large, &request, &candidates));
        });
        let overhead = wasm.saturating_sub(natively);
        println!("  {name}, 10k hosts:");
        println!(
            "    sandboxed {}, native {}, difference {} ({:.0} ns/host)",
            show(wasm),
            show(natively),
            show(overhead),
            overhead.as_nanos() as f64 / HOSTS as f64
        );
    }

    println!("fuel per host of each built-in unit over {HOSTS} hosts and {VMS} VMs");
    for unit in UNITS {
        let loaded = builtin(&runtime, unit.package);
        let request = defaults(&loaded);
        let exports = loaded.exports();
        let mut fuel = Vec::new();
        if exports.filter {
            fuel.push((
                "filter",
                typical(|| {
                    loaded
                        .filter(&large, &request, &candidates)
                        .map(|c| c.usage)
                }),
            ));
        }
        if exports.score {
            fuel.push((
                "score",
                typical(|| loaded.score(&large, &request, &candidates).map(|c| c.usage)),
            ));
        }
        if exports.balance {
            let balance = BalanceRequest {
                params: request.params.clone(),
                candidates: candidates.clone(),
            };
            fuel.push((
                "balance",
                typical(|| loaded.balance(&large, &balance).map(|c| c.usage)),
            ));
        }
        for (role, usage) in fuel {
            match usage {
                Ok(usage) => println!(
                    "  {:<40} {role:<8} {:>8.0} fuel/host  {}",
                    loaded.info().name,
                    usage.fuel.unwrap_or(0) as f64 / HOSTS as f64,
                    show(usage.elapsed)
                ),
                Err(failed) => println!(
                    "  {:<40} {role:<8} failed: {}",
                    loaded.info().name,
                    failed.error
                ),
            }
        }
    }
}

/// Built-in unit `package` compiled natively from its own source.
fn native(package: &str) -> sandpiper_guest::native::NativeUnit {
    builtin::unit(package)
        .unwrap_or_else(|| panic!("{package} is built in"))
        .native()
}

fn builtin(runtime: &Runtime, package: &str) -> Arc<WasmUnit> {
    let unit = builtin::unit(package).unwrap_or_else(|| panic!("{package} is built in"));
    runtime.load(unit.wasm).expect("the built-in unit loads")
}

/// A request for a 4 GiB, 2-vCPU VM with every parameter at its default.
fn defaults(unit: &WasmUnit) -> Request {
    let mut request = Request {
        params: unit
            .info()
            .params
            .iter()
            .map(|p| KeyValue::new(p.name.clone(), p.default_value.clone()))
            .collect(),
        ..Request::default()
    };
    request.vm.memory_mib = 4096.0;
    request.vm.vcpus = 2;
    request
}

/// A cluster where about half the hosts fit a 4 GiB, 2-vCPU VM, so filters
/// reject (and format reasons for) a realistic share.
fn cluster() -> Inventory {
    let mut inventory = Inventory::new(HOSTS, VMS);
    let spread = |i: usize, modulus: usize| ((i * 7919) % modulus) as f64;
    let columns = [
        (
            HostMetric::MemoryTotalMib,
            (0..HOSTS).map(|_| 65536.0).collect(),
        ),
        (
            HostMetric::MemoryFreeMib,
            (0..HOSTS).map(|i| spread(i, 8192)).collect(),
        ),
        (
            HostMetric::MemoryCommittedMib,
            (0..HOSTS).map(|i| 65536.0 - spread(i, 8192)).collect(),
        ),
        (HostMetric::CpuCores, vec![32.0; HOSTS]),
        (HostMetric::CpuThreads, vec![64.0; HOSTS]),
        (HostMetric::CpuSockets, vec![2.0; HOSTS]),
        (
            HostMetric::CpuUsagePercent,
            (0..HOSTS).map(|i| spread(i, 100)).collect(),
        ),
        (
            HostMetric::VcpusUsed,
            (0..HOSTS).map(|i| spread(i, 64)).collect(),
        ),
        (HostMetric::VmCount, vec![10.0; HOSTS]),
    ];
    for (metric, column) in columns {
        inventory
            .set_host_metric(metric, column)
            .expect("one value per host");
    }
    inventory
        .set_host_statuses(vec![HostStatus::Up; HOSTS])
        .expect("one status per host");
    inventory
        .set_vm_hosts((0..VMS).map(|v| (v % HOSTS) as u32).collect())
        .expect("one host per VM");
    inventory
        .set_vm_metric(VmMetric::MemoryMib, vec![2048.0; VMS])
        .expect("one value per VM");
    inventory
        .set_vm_metric(VmMetric::Vcpus, vec![2.0; VMS])
        .expect("one value per VM");
    inventory
}

/// The usage of the call with the median elapsed time among [`FUEL_RUNS`]
/// (fuel is the same every run), or the first failure.
fn typical(mut call: impl FnMut() -> Result<Usage, Failed>) -> Result<Usage, Failed> {
    let mut usages = Vec::with_capacity(FUEL_RUNS);
    for _ in 0..FUEL_RUNS {
        usages.push(call()?);
    }
    usages.sort_by_key(|usage| usage.elapsed);
    Ok(usages[usages.len() / 2])
}

/// The median time of `runs` runs of `f`, after a warm-up.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..WARMUP_RUNS {
        f();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    times.sort_unstable();
    times[times.len() / 2]
}

fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_nanos() as f64 / 1e3)
    } else {
        format!("{:.2} ms", d.as_nanos() as f64 / 1e6)
    }
}
