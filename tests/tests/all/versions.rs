//! Every version of the WIT contract served side by side: a unit built
//! against the frozen `sandpiper:policy@0.1.0` (tests/guests/legacy-v0-1,
//! wit-bindgen over `wit/0.1.0/` directly) runs in one policy with 0.3.0
//! built-in units and answers as it did: exactly as its own source run
//! natively, whatever the request carries that 0.1.0 cannot say.

use std::sync::Arc;

use sandpiper::builtin;
use sandpiper::pipeline::{Combination, Decision, Policy, ScheduleRequest, schedule};
use sandpiper::sandbox::PolicyVersion;
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{
    CpuPolicy, HostMetric, HostText, Interned, KeyValue, PageSize, Vm, VmHardware,
};
use sandpiper_test_legacy_v0_1::{DRAINING_PREFIX, RESERVE_MIB};
use sandpiper_tests::guests::SANDPIPER_TEST_LEGACY_V0_1;

/// Hosts with names (some draining) and memory figures: what the legacy
/// unit and oVirt's Memory filter and even-memory weight read.
fn cluster(hosts: usize) -> Arc<Inventory> {
    let mut inventory = Inventory::new(hosts, 0);
    let names = (0..hosts).map(|i| {
        if i % 7 == 3 {
            format!("{DRAINING_PREFIX}{i}")
        } else {
            format!("host-{i}")
        }
    });
    let free: Vec<f64> = (0..hosts).map(|i| ((i * 1_537) % 16_384) as f64).collect();
    let columns = [
        inventory.set_host_text(HostText::Name, Interned::from_rows(names)),
        inventory.set_host_text(
            HostText::Id,
            Interned::from_rows((0..hosts).map(|i| format!("id-{i}"))),
        ),
        inventory.set_host_metric(HostMetric::MemoryTotalMib, vec![16_384.0; hosts]),
        inventory.set_host_metric(HostMetric::MemoryFreeMib, free),
        inventory.set_host_metric(HostMetric::SwapFreeMib, vec![0.0; hosts]),
    ];
    for column in columns {
        column.expect("one row per host");
    }
    Arc::new(inventory)
}

fn builtin(package: &str) -> Arc<dyn Unit> {
    let unit = builtin::unit(package).unwrap_or_else(|| panic!("{package} is built in"));
    let loaded = sandpiper_tests::shared_runtime()
        .load(unit.wasm)
        .unwrap_or_else(|e| panic!("{package} loads: {e}"));
    assert_eq!(loaded.policy_version(), PolicyVersion::V0_3);
    loaded
}

/// 0.3.0 built-ins around `legacy`, as a filter and a weight.
fn policy(legacy: Arc<dyn Unit>, combination: Combination) -> Policy {
    Policy::builder()
        .combination(combination)
        .filter(builtin("sandpiper-policy-memory"))
        .filter(Arc::clone(&legacy))
        .score(legacy, 3)
        .score(builtin("sandpiper-policy-even-memory"), 1)
        .param(RESERVE_MIB, "512")
        .build()
        .expect("the policy is valid")
}

fn verdict(decision: &Decision) -> String {
    let rejections = decision.explain.rejections();
    format!(
        "chosen {:?}, ranked {:?}, rejected {:?}",
        decision.chosen, decision.ranked, rejections
    )
}

#[test]
fn a_0_1_0_unit_runs_next_to_0_2_0_units_and_answers_as_before() {
    let runtime = sandpiper_tests::runtime();
    let sandboxed = runtime
        .load(SANDPIPER_TEST_LEGACY_V0_1.bytes)
        .expect("the 0.1.0 unit loads");
    assert_eq!(sandboxed.policy_version(), PolicyVersion::V0_1);
    assert_eq!(sandboxed.info().applies_to, Default::default());
    let native: Arc<dyn Unit> = Arc::new(sandpiper_test_legacy_v0_1::native_unit());
    assert_eq!(sandboxed.info(), native.info());

    let inventory = cluster(200);
    let small = Vm {
        id: "small".to_owned(),
        memory_mib: 2_048.0,
        memory_guaranteed_mib: 2_048.0,
        ..Vm::default()
    };
    // What 0.2.0 added to the request never reaches a 0.1.0 unit, and does
    // not change its answers.
    let hardware = Vm {
        memory_mib: 6_000.0,
        memory_guaranteed_mib: 6_000.0,
        hardware: VmHardware {
            cpu_policy: CpuPolicy::Dedicated,
            page_size: PageSize::Kib(2_048),
            required_cpu_flags: vec!["avx2".to_owned()],
            ..VmHardware::default()
        },
        ..small.clone()
    };
    let requests = [
        ScheduleRequest {
            vm: small,
            ..ScheduleRequest::default()
        },
        ScheduleRequest {
            vm: hardware,
            hints: vec![KeyValue::new("note", "x")],
            ..ScheduleRequest::default()
        },
    ];
    for combination in [Combination::Rank, Combination::Normalised] {
        let with_wasm = policy(Arc::clone(&sandboxed) as Arc<dyn Unit>, combination);
        let with_native = policy(Arc::clone(&native), combination);
        for request in &requests {
            let wasm = schedule(&with_wasm, &inventory, request).expect("decides");
            let expected = schedule(&with_native, &inventory, request).expect("decides");
            assert_eq!(verdict(&wasm), verdict(&expected), "{combination:?}");
            assert!(wasm.chosen.is_some());
            let legacy = &wasm.explain.filters[1];
            assert_eq!(legacy.unit, "LegacyFreeMemory");
            assert!(legacy.failure.is_none() && legacy.skipped.is_none());
            assert!(
                legacy.rejected.iter().any(|r| r.reason == "draining"),
                "the unit read the names (0.1.0's list<string>)"
            );
        }
    }
}
