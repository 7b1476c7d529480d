//! The sandbox against real components: hostile units fail with their typed
//! error and leave the host able to run the next call; bad uploads are
//! refused with theirs; a unit sees nothing but its inputs.

use std::sync::Arc;
use std::time::Duration;

use sandpiper::builtin;
use sandpiper::pipeline::{
    BalanceError, BalanceInput, Policy, ScheduleError, ScheduleRequest, balance, schedule,
};
use sandpiper::sandbox::{self, Limits, LoadError, Runtime, WasmUnit};
use sandpiper::unit::{Role, Unit, UnitError};
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{BalanceRequest, KeyValue, Request};
use sandpiper_test_hostile::{MODE, PANIC_MESSAGE};
use sandpiper_tests::guests::{
    SANDPIPER_TEST_AMBIENT, SANDPIPER_TEST_HOSTILE, SANDPIPER_TEST_INSTANTIATE_TRAP,
};
use sandpiper_tests::{all_hosts, inventory, request, runtime};

/// Hosts in the snapshots of these tests: small, so fuel-bounded failures
/// stop quickly, but more than one so indices mean something.
const HOSTS: usize = 8;

fn load(runtime: &Runtime, wasm: &[u8]) -> Arc<WasmUnit> {
    runtime
        .load(wasm)
        .unwrap_or_else(|error| panic!("the component should load: {error}"))
}

fn builtin_memory(runtime: &Runtime) -> Arc<WasmUnit> {
    let memory = builtin::unit("sandpiper-policy-memory").expect("the Memory unit is built in");
    load(runtime, memory.wasm)
}

fn hostile(mode: &str) -> Request {
    request(&[(MODE, mode)])
}

/// A request for the Memory unit, with its parameter at its default.
fn memory_request() -> Request {
    request(&[("MaxMemoryOverCommit", "100")])
}

/// A good unit and the hostile unit in `ok` mode both still work.
fn assert_host_still_works(runtime: &Runtime, hostile_unit: &WasmUnit) {
    let snapshot = inventory(HOSTS, 0);
    let candidates = all_hosts(HOSTS);
    let memory = builtin_memory(runtime);
    let rejected = memory
        .filter(&snapshot, &memory_request(), &candidates)
        .expect("the Memory unit still works")
        .value;
    // Hosts 0..4 have less than the 4 GiB the VM needs free.
    let mut hosts: Vec<u32> = rejected.into_iter().flat_map(|r| r.hosts).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, [0, 1, 2, 3]);
    let ok = hostile_unit
        .filter(&snapshot, &hostile("ok"), &candidates)
        .expect("the hostile unit in `ok` mode still works");
    assert!(ok.value.is_empty());
}

#[test]
fn an_endless_loop_runs_out_of_fuel() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let snapshot = inventory(HOSTS, 0);
    let failed = unit
        .filter(&snapshot, &hostile("loop"), &all_hosts(HOSTS))
        .expect_err("a loop cannot finish");
    let budget = runtime.limits().fuel_budget(HOSTS);
    assert_eq!(failed.error, UnitError::OutOfFuel { budget });
    assert_eq!(failed.usage.fuel, Some(budget));
    assert_host_still_works(&runtime, &unit);
}

#[test]
fn an_endless_loop_with_unlimited_fuel_hits_the_deadline() {
    let runtime = runtime();
    let deadline = Duration::from_millis(20);
    let limits = Limits {
        fuel_base: u64::MAX / 2,
        deadline_base: deadline,
        deadline_per_host: Duration::ZERO,
        ..runtime.limits()
    };
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes)
        .with_limits(limits)
        .expect("valid limits");
    let failed = unit
        .score(&inventory(HOSTS, 0), &hostile("loop"), &all_hosts(HOSTS))
        .expect_err("a loop cannot finish");
    // On a machine too busy to give the loop half of its time, the same
    // deadline is the machine's fault (see the next test).
    if !matches!(failed.error, UnitError::Overloaded { .. }) {
        assert_eq!(failed.error, UnitError::DeadlineExceeded { deadline });
    }
    assert!(failed.usage.elapsed >= deadline);
    assert_host_still_works(&runtime, &unit);
}

/// The same endless loop under the same deadline, on a thread that gets
/// almost no CPU: the deadline is the machine's fault, `Overloaded`, which
/// the API answers 503 for the engine to retry, not `DeadlineExceeded`.
#[test]
fn a_call_starved_of_cpu_is_overloaded_not_slow() {
    use std::sync::atomic::{AtomicBool, Ordering};

    let runtime = runtime();
    let deadline = Duration::from_millis(300);
    let limits = Limits {
        fuel_base: u64::MAX / 2,
        deadline_base: deadline,
        deadline_per_host: Duration::ZERO,
        ..runtime.limits()
    };
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes)
        .with_limits(limits)
        .expect("valid limits");
    // One spinning thread per CPU at normal priority, and the call on a
    // thread at the lowest (nice 19): the scheduler gives it about 1.5 %
    // of a CPU (weight 15 against 1024), far under the starvation line.
    let stop = Arc::new(AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let spinners: Vec<_> = (0..cpus)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let call = std::thread::spawn(move || {
        // On Linux the nice value is per thread: only this one is lowered.
        rustix::process::setpriority_process(None, 19).expect("lower this thread's priority");
        unit.score(&inventory(HOSTS, 0), &hostile("loop"), &all_hosts(HOSTS))
            .expect_err("a loop cannot finish")
    })
    .join();
    stop.store(true, Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().expect("a spinner");
    }
    let failed = call.expect("the call's thread");
    match failed.error {
        UnitError::Overloaded {
            deadline: given,
            cpu,
            elapsed,
        } => {
            assert_eq!(given, deadline);
            assert!(elapsed >= deadline, "{elapsed:?}");
            assert!(
                cpu.as_nanos() * 100
                    < elapsed.as_nanos() * u128::from(sandbox::STARVED_CPU_PERCENT),
                "{cpu:?} of CPU in {elapsed:?}"
            );
        }
        other => panic!("expected Overloaded, got {other:?}"),
    }
}

/// Limits with fuel to spare, so that the limit under test is the one hit:
/// filling memory or building a huge answer burns fuel too, and with the
/// default budget over a few hosts fuel would run out first.
fn ample_fuel(runtime: &Runtime) -> Limits {
    Limits {
        fuel_base: AMPLE_FUEL,
        ..runtime.limits()
    }
}

/// Fuel for [`ample_fuel`]: over 100x the ~65 M that filling the default
/// memory limit takes, and more than the hostile unit's huge answers need.
const AMPLE_FUEL: u64 = 10_000_000_000;

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes)
        .with_limits(ample_fuel(&runtime))
        .expect("valid limits");
    let failed = unit
        .balance(
            &inventory(HOSTS, 0),
            &BalanceRequest {
                params: vec![KeyValue::new(MODE, "memory-bomb")],
                candidates: all_hosts(HOSTS),
            },
        )
        .expect_err("memory is finite");
    assert_eq!(
        failed.error,
        UnitError::MemoryLimit {
            limit_bytes: runtime.limits().memory_bytes
        }
    );
    assert_host_still_works(&runtime, &unit);
}

#[test]
fn a_memory_bomb_under_the_default_limits_is_stopped() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let failed = unit
        .filter(
            &inventory(HOSTS, 0),
            &hostile("memory-bomb"),
            &all_hosts(HOSTS),
        )
        .expect_err("memory is finite");
    // Filling memory costs fuel: over a few hosts the budget runs out
    // before the memory does. Either way the call stops.
    assert!(
        matches!(
            failed.error,
            UnitError::OutOfFuel { .. } | UnitError::MemoryLimit { .. }
        ),
        "{:?}",
        failed.error
    );
    assert_host_still_works(&runtime, &unit);
}

#[test]
fn a_memory_limit_below_the_initial_memory_fails_instantiation() {
    let runtime = runtime();
    let limits = Limits {
        memory_bytes: 64 << 10,
        ..runtime.limits()
    };
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes)
        .with_limits(limits)
        .expect("valid limits");
    let failed = unit
        .filter(&inventory(HOSTS, 0), &hostile("ok"), &all_hosts(HOSTS))
        .expect_err("the unit's own memory does not fit");
    assert_eq!(
        failed.error,
        UnitError::MemoryLimit {
            limit_bytes: 64 << 10
        }
    );
}

#[test]
fn endless_recursion_overflows_the_stack() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let failed = unit
        .filter(
            &inventory(HOSTS, 0),
            &hostile("recursion"),
            &all_hosts(HOSTS),
        )
        .expect_err("the stack is finite");
    assert_eq!(failed.error, UnitError::StackOverflow);
    assert_host_still_works(&runtime, &unit);
}

#[test]
fn a_panic_is_a_trap_with_its_message() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let failed = unit
        .score(&inventory(HOSTS, 0), &hostile("panic"), &all_hosts(HOSTS))
        .expect_err("it panics");
    match &failed.error {
        UnitError::Trap { trap, panic } => {
            assert_eq!(trap, "unreachable_code_reached");
            let panic = panic.as_deref().expect("the panic message is captured");
            assert!(panic.contains(PANIC_MESSAGE), "{panic}");
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(failed.usage.fuel.is_some_and(|fuel| fuel > 0));
    assert_host_still_works(&runtime, &unit);
}

#[test]
fn oversized_answers_are_invalid_output() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes)
        .with_limits(ample_fuel(&runtime))
        .expect("valid limits");
    let snapshot = inventory(HOSTS, 1);
    let candidates = all_hosts(HOSTS);
    let outcomes = [
        unit.filter(&snapshot, &hostile("huge-output"), &candidates)
            .map(drop),
        unit.filter(&snapshot, &hostile("huge-reason"), &candidates)
            .map(drop),
        unit.score(&snapshot, &hostile("huge-output"), &candidates)
            .map(drop),
        unit.balance(
            &snapshot,
            &BalanceRequest {
                params: vec![KeyValue::new(MODE, "huge-output")],
                candidates: candidates.clone(),
            },
        )
        .map(drop),
    ];
    for outcome in outcomes {
        let failed = outcome.expect_err("the answer is too large");
        assert!(
            matches!(failed.error, UnitError::InvalidOutput(_)),
            "{:?}",
            failed.error
        );
    }
    assert_host_still_works(&runtime, &unit);
}

/// The modes whose answers are well-formed but wrong pass the sandbox (it
/// checks sizes, not meaning) and are refused by the pipeline.
#[test]
fn wrong_answers_are_invalid_output_in_the_pipeline() {
    let runtime = runtime();
    let unit: Arc<dyn Unit> = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let snapshot = inventory(HOSTS, 1);
    let policy = |mode: &str, role: Role| {
        let builder = Policy::builder().param(MODE, mode);
        let builder = match role {
            Role::Filter => builder.filter(Arc::clone(&unit)),
            Role::Score => builder.score(Arc::clone(&unit), 1),
            Role::Balance => builder.balance(Arc::clone(&unit)),
        };
        builder.build().expect("a valid policy")
    };
    let place = ScheduleRequest::default();

    for mode in ["bad-index", "duplicate-index"] {
        match schedule(&policy(mode, Role::Filter), &snapshot, &place) {
            Err(ScheduleError::FilterFailed { failed, .. }) => assert!(
                matches!(failed.error, UnitError::InvalidOutput(_)),
                "{mode}: {:?}",
                failed.error
            ),
            other => panic!("{mode}: expected a failed filter, got {other:?}"),
        }
    }
    for mode in ["wrong-length", "nan", "infinite"] {
        let decision = schedule(&policy(mode, Role::Score), &snapshot, &place)
            .unwrap_or_else(|error| panic!("{mode}: a failed score is no error: {error}"));
        let failure = decision.explain.scores[0]
            .failure
            .as_ref()
            .unwrap_or_else(|| panic!("{mode}: the score failed"));
        assert_eq!(
            failure.code,
            UnitError::InvalidOutput(String::new()).code(),
            "{mode}"
        );
    }
    // Candidates without host 0, where the VM runs: listing the VM's own
    // host is tolerated, so `duplicate-index` must list another twice.
    let elsewhere = BalanceInput {
        candidates: Some((1..HOSTS as u32).collect()),
        ..BalanceInput::default()
    };
    for mode in ["bad-index", "duplicate-index"] {
        match balance(&policy(mode, Role::Balance), &snapshot, &elsewhere) {
            Err(BalanceError::BalanceFailed { failed, .. }) => assert!(
                matches!(failed.error, UnitError::InvalidOutput(_)),
                "{mode}: {:?}",
                failed.error
            ),
            other => panic!("{mode}: expected a failed balance, got {other:?}"),
        }
    }
}

#[test]
fn every_hostile_mode_is_covered() {
    let covered = [
        "ok",
        "loop",
        "memory-bomb",
        "recursion",
        "panic",
        "wrong-length",
        "bad-index",
        "duplicate-index",
        "nan",
        "infinite",
        "huge-output",
        "huge-reason",
    ];
    for (_, mode) in sandpiper_test_hostile::Mode::ALL {
        assert!(covered.contains(mode), "no test for hostile mode `{mode}`");
    }
}

#[test]
fn a_unit_sees_no_environment_files_time_or_randomness() {
    let runtime = runtime();
    let unit = load(&runtime, SANDPIPER_TEST_AMBIENT.bytes);
    let snapshot = inventory(HOSTS, 0);
    let observe = || -> Vec<String> {
        unit.filter(&snapshot, &request(&[]), &all_hosts(HOSTS))
            .expect("observing succeeds")
            .value
            .into_iter()
            .map(|r| r.reason)
            .collect()
    };
    let first = observe();
    let expected = |key: &str, value: &str| format!("{key}={value}");
    use sandpiper_test_ambient as seen;
    for fact in [
        expected(seen::CALLS, "1"),
        expected(seen::ENV_VARS, "0"),
        expected(seen::ARGS, "0"),
        expected(seen::ROOT_DIR, "error"),
        expected(seen::FILE, "error"),
        expected(
            seen::WALL_CLOCK_SECS,
            &sandbox::FROZEN_WALL_CLOCK_SECONDS.to_string(),
        ),
        expected(seen::SLEPT_NANOS, "0"),
        expected(seen::LEFTOVERS, "0"),
    ] {
        assert!(first.contains(&fact), "expected {fact} in {first:?}");
    }
    // Same inputs, same output: even the "random" hash seed repeats, and
    // the call counter shows a fresh instance.
    assert_eq!(observe(), first);
}

#[test]
fn the_same_bytes_load_once() {
    let runtime = runtime();
    let first = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let second = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    assert!(Arc::ptr_eq(&first, &second));
    assert_eq!(
        first.sha256(),
        sandbox::sha256(SANDPIPER_TEST_HOSTILE.bytes)
    );
    let other = load(&runtime, SANDPIPER_TEST_AMBIENT.bytes);
    assert!(!Arc::ptr_eq(&first, &other));
}

#[test]
fn a_unit_reports_its_info_and_roles() {
    let runtime = runtime();
    let hostile = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    assert_eq!(hostile.info().name, "Hostile");
    assert_eq!(hostile.info().params[0].name, MODE);
    let exports = hostile.exports();
    assert!(exports.filter && exports.score && exports.balance);

    let memory = builtin_memory(&runtime);
    assert_eq!(memory.info().name, "Memory");
    let failed = memory
        .score(&inventory(HOSTS, 0), &memory_request(), &all_hosts(HOSTS))
        .expect_err("Memory does not score");
    assert_eq!(failed.error, UnitError::NotExported(Role::Score));
}

#[test]
fn refuses_what_is_not_a_usable_component() {
    let runtime = runtime();
    let refused = |bytes: &[u8]| match runtime.load(bytes) {
        Ok(unit) => panic!("{unit:?} should have been refused"),
        Err(error) => error,
    };
    assert_eq!(refused(b"not wasm at all"), LoadError::NotWasm);
    // The smallest valid core module.
    assert_eq!(refused(b"\0asm\x01\0\0\0"), LoadError::CoreModule);
    // The smallest valid component: it exports nothing.
    assert!(matches!(
        refused(&wasm_encoder::Component::new().finish()),
        LoadError::MissingMetadata { .. }
    ));
    assert_eq!(
        refused(&importing("wasi:sockets/tcp@0.2.6")),
        LoadError::ForbiddenImport {
            import: "wasi:sockets/tcp@0.2.6".to_owned()
        }
    );
    assert_eq!(
        refused(&importing("wasi:http/outgoing-handler@0.2.6")),
        LoadError::ForbiddenImport {
            import: "wasi:http/outgoing-handler@0.2.6".to_owned()
        }
    );
    // Two versions of the contract in one component: a broken mix.
    assert_eq!(
        refused(&importing_all(&[
            "sandpiper:policy/types@0.1.0",
            "sandpiper:policy/types@0.2.0"
        ])),
        LoadError::MixedVersions {
            first: "sandpiper:policy/types@0.1.0".to_owned(),
            second: "sandpiper:policy/types@0.2.0".to_owned(),
        }
    );
    assert_eq!(
        refused(&importing_all(&[
            "sandpiper:policy/inventory@0.2.0",
            "sandpiper:policy/inventory@0.3.0"
        ])),
        LoadError::MixedVersions {
            first: "sandpiper:policy/inventory@0.2.0".to_owned(),
            second: "sandpiper:policy/inventory@0.3.0".to_owned(),
        }
    );
    // One version, but no metadata: refused for that, not for the version.
    for version in ["0.2.0", "0.3.0"] {
        assert!(matches!(
            refused(&importing(&format!("sandpiper:policy/types@{version}"))),
            LoadError::MissingMetadata { .. }
        ));
    }
    // A version the host does not serve is refused as an import.
    assert_eq!(
        refused(&importing("sandpiper:policy/inventory@0.4.0")),
        LoadError::ForbiddenImport {
            import: "sandpiper:policy/inventory@0.4.0".to_owned()
        }
    );
    let artifact = runtime
        .precompile(SANDPIPER_TEST_HOSTILE.bytes)
        .expect("the hostile unit compiles");
    assert_eq!(refused(&artifact), LoadError::Precompiled);
    assert!(matches!(
        refused(SANDPIPER_TEST_INSTANTIATE_TRAP.bytes),
        LoadError::Info(UnitError::Trap { .. })
    ));
}

/// A component importing an (empty) instance called `name`.
fn importing(name: &str) -> Vec<u8> {
    importing_all(&[name])
}

/// A component importing an (empty) instance for each of `names`.
fn importing_all(names: &[&str]) -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentImportSection, ComponentTypeRef, ComponentTypeSection, InstanceType,
    };
    let mut types = ComponentTypeSection::new();
    types.instance(&InstanceType::new());
    let mut imports = ComponentImportSection::new();
    for name in names {
        imports.import(*name, ComponentTypeRef::Instance(0));
    }
    let mut component = Component::new();
    component.section(&types).section(&imports);
    component.finish()
}

#[test]
fn a_precompiled_unit_loads_without_compiling_and_behaves_the_same() {
    let compiler = runtime();
    let artifact = compiler
        .precompile(SANDPIPER_TEST_HOSTILE.bytes)
        .expect("the hostile unit compiles");
    let sha256 = sandbox::sha256(SANDPIPER_TEST_HOSTILE.bytes);

    let server = runtime();
    assert_eq!(server.compatibility_hash(), compiler.compatibility_hash());
    // SAFETY: `artifact` is the unmodified output of `precompile`.
    let unit = unsafe { server.load_precompiled(sha256, &artifact) }.expect("the artifact loads");
    assert_eq!(unit.info().name, "Hostile");
    assert_eq!(unit.sha256(), sha256);
    // Loading the component itself now finds the unit already there.
    assert!(Arc::ptr_eq(
        &unit,
        &load(&server, SANDPIPER_TEST_HOSTILE.bytes)
    ));
    assert_host_still_works(&server, &unit);
}

#[test]
fn calls_from_many_threads_at_once_are_independent() {
    let runtime = runtime();
    let memory = builtin_memory(&runtime);
    let snapshot: Arc<Inventory> = inventory(HOSTS, 0);
    let expected = memory
        .filter(&snapshot, &memory_request(), &all_hosts(HOSTS))
        .expect("the Memory unit works")
        .value;
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..25 {
                    let answer = memory
                        .filter(&snapshot, &memory_request(), &all_hosts(HOSTS))
                        .expect("the Memory unit works");
                    assert_eq!(answer.value, expected);
                }
            });
        }
    });
}

/// The server calls units from tokio's blocking pool, where wasmtime-wasi's
/// blocking calls (a panicking unit writing its message) use the runtime.
#[test]
fn a_panicking_unit_called_from_a_tokio_blocking_thread_is_a_trap() {
    let runtime = Arc::new(runtime());
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("a tokio runtime");
    let task = tokio.spawn_blocking(move || {
        unit.filter(&inventory(HOSTS, 0), &hostile("panic"), &all_hosts(HOSTS))
    });
    let failed = tokio
        .block_on(task)
        .expect("the blocking task completes")
        .expect_err("it panics");
    assert!(
        matches!(&failed.error, UnitError::Trap { panic: Some(p), .. } if p.contains(PANIC_MESSAGE)),
        "{:?}",
        failed.error
    );
}

/// Called straight from an async task (not the blocking pool), a call steps
/// aside with `block_in_place` instead of panicking inside tokio.
#[test]
fn a_panicking_unit_called_from_an_async_task_is_a_trap() {
    let runtime = Arc::new(runtime());
    let unit = load(&runtime, SANDPIPER_TEST_HOSTILE.bytes);
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("a tokio runtime");
    let task = tokio.spawn(async move {
        unit.filter(&inventory(HOSTS, 0), &hostile("panic"), &all_hosts(HOSTS))
    });
    let failed = tokio
        .block_on(task)
        .expect("the task completes")
        .expect_err("it panics");
    assert!(
        matches!(&failed.error, UnitError::Trap { panic: Some(p), .. } if p.contains(PANIC_MESSAGE)),
        "{:?}",
        failed.error
    );
}

fn builtin(runtime: &Runtime, package: &str) -> Arc<WasmUnit> {
    let unit = builtin::unit(package).unwrap_or_else(|| panic!("{package} is built in"));
    load(runtime, unit.wasm)
}

/// A sandboxed call records exactly the changeable columns its unit read
/// through the `inventory` import, which lets a decision reuse an answer
/// across claims the unit never looked at; a native call, unseen, counts
/// as having read everything.
#[test]
fn a_call_records_the_columns_it_read() {
    use sandpiper::unit::ColumnsRead;
    use sandpiper_guest::model::HostMetric;

    let runtime = runtime();
    let snapshot = inventory(HOSTS, 2);
    let candidates = all_hosts(HOSTS);
    let read = |package: &str, request: &Request| {
        builtin(&runtime, package)
            .filter(&snapshot, request, &candidates)
            .unwrap_or_else(|f| panic!("{package} filters: {}", f.error))
            .read
    };
    // Nova's ComputeFilter reads the hosts' statuses and nothing else.
    assert_eq!(
        read("sandpiper-policy-nova-compute", &request(&[])),
        ColumnsRead::NONE
    );
    // The Memory filter reads free memory, and no VM or hardware column.
    let memory = read("sandpiper-policy-memory", &memory_request());
    let free = ColumnsRead::of(&[HostMetric::MemoryFreeMib], false, false);
    assert!(memory.overlaps(free), "{memory:?}");
    assert!(
        !memory.overlaps(ColumnsRead::of(&[], true, true)),
        "{memory:?}"
    );
    assert!(
        !memory.overlaps(ColumnsRead::of(&[HostMetric::HaScore], false, false)),
        "{memory:?}"
    );
    // The same unit run natively from its source.
    let native = builtin::unit("sandpiper-policy-nova-compute")
        .map(|unit| unit.native())
        .expect("built in");
    let called = native
        .filter(&snapshot, &request(&[]), &candidates)
        .unwrap_or_else(|f| panic!("natively: {}", f.error));
    assert_eq!(called.read, ColumnsRead::ALL);
}
