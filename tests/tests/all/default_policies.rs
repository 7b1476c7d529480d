//! The built-in policies (`policies/defaults/*.json`) composed by the real
//! pipeline over the embedded units: every unit a policy names exists and
//! exports the role it is used in, positions, factors and properties pass
//! the pipeline's rules, names and ids are unique, exactly one policy is the
//! default, and each policy decides a placement (and, with a balancer, a
//! balancing round) on a small cluster.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use sandpiper::builtin::{BuiltinPolicy, POLICY_FILES, UNITS};
use sandpiper::pipeline::{BalanceInput, OnFailure, Policy, ScheduleRequest, balance, schedule};
use sandpiper::snapshot::{Host, RunningVm, Snapshot, VmSpec};
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;

/// Every policy file as the binary embeds it, parsed, with its file name.
fn default_policies() -> Vec<(String, BuiltinPolicy)> {
    POLICY_FILES
        .iter()
        .map(|(file, json)| {
            let policy = BuiltinPolicy::parse(file, json).unwrap_or_else(|e| panic!("{e}"));
            (format!("policies/defaults/{file}"), policy)
        })
        .collect()
}

/// Every embedded unit, loaded once for all the tests here, by its name.
fn units_by_name() -> &'static HashMap<String, Arc<dyn Unit>> {
    static UNITS_BY_NAME: OnceLock<HashMap<String, Arc<dyn Unit>>> = OnceLock::new();
    UNITS_BY_NAME.get_or_init(|| {
        let runtime = sandpiper_tests::runtime();
        UNITS
            .iter()
            .map(|builtin| {
                let unit: Arc<dyn Unit> = runtime
                    .load(builtin.wasm)
                    .unwrap_or_else(|e| panic!("{} loads: {e}", builtin.package));
                (unit.info().name.clone(), unit)
            })
            .collect()
    })
}

fn compose(file: &str, spec: &BuiltinPolicy, units: &HashMap<String, Arc<dyn Unit>>) -> Policy {
    let unit = |name: &str| {
        units
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("{file}: no built-in unit `{name}`"))
    };
    let mut builder = Policy::builder()
        .combination(spec.mode)
        .params(spec.properties.clone());
    for filter in &spec.filters {
        builder = builder.filter_with(unit(&filter.unit), filter.position, OnFailure::FailClosed);
    }
    for weight in &spec.weights {
        builder = builder.score(unit(&weight.unit), weight.factor);
    }
    if let Some(name) = &spec.balance {
        builder = builder.balance(unit(name));
    }
    builder
        .build()
        .unwrap_or_else(|e| panic!("{file}: the pipeline refuses the policy: {e}"))
}

/// Three hosts with every figure the default policies' filters read; `hot`
/// has been over 90% CPU for five minutes and runs three movable VMs.
fn cluster() -> Arc<Inventory> {
    let host = |id: &str, usage: f64, minutes: f64, vms: f64| {
        let mut host = Host {
            id: id.to_owned(),
            address: format!("{id}.example.com"),
            ..Host::default()
        };
        for (metric, value) in [
            ("cpu_sockets", 2.0),
            ("cpu_cores", 16.0),
            ("cpu_threads", 32.0),
            ("cpu_usage_percent", usage),
            ("cpu_overloaded_minutes", minutes),
            ("memory_total_mib", 65_536.0),
            ("memory_free_mib", 49_152.0),
            ("memory_committed_mib", 8_192.0),
            ("disk_total_gib", 1_000.0),
            ("disk_free_gib", 800.0),
            ("vm_count", vms),
            ("vcpus_used", vms * 2.0),
        ] {
            host.metrics.insert(metric.to_owned(), value);
        }
        host
    };
    let vm = |id: &str, usage: f64| RunningVm {
        id: id.to_owned(),
        name: None,
        host: "hot".to_owned(),
        memory_mib: 2_048.0,
        memory_guaranteed_mib: None,
        vcpus: 2,
        cpu_usage_percent: usage,
        migratable: true,
        highly_available: false,
        hosted_engine: false,
        pending: false,
    };
    let snapshot = Snapshot {
        hosts: vec![
            host("hot", 95.0, 5.0, 3.0),
            host("cool", 10.0, 0.0, 0.0),
            host("warm", 40.0, 0.0, 0.0),
        ],
        vms: vec![vm("v1", 90.0), vm("v2", 20.0), vm("v3", 50.0)],
    };
    Arc::new(snapshot.build().expect("the cluster is valid").inventory)
}

#[test]
fn every_default_policy_composes_and_decides() {
    let units = units_by_name();
    let policies = default_policies();
    assert!(
        policies.iter().any(|(_, p)| p.name == "none"),
        "oVirt's `none` policy is among the defaults"
    );
    let defaults: Vec<&str> = policies
        .iter()
        .filter(|(_, p)| p.default)
        .map(|(_, p)| p.name.as_str())
        .collect();
    assert_eq!(defaults, ["none"], "exactly one default policy, oVirt's");
    let mut names = HashSet::new();
    let mut ids = HashSet::new();

    let inventory = cluster();
    let vm = VmSpec {
        id: "new".to_owned(),
        memory_mib: 1_024.0,
        vcpus: 1,
        highly_available: true,
        ..VmSpec::default()
    };
    let hosts = Snapshot::default().build().expect("empty is valid").hosts;
    let request = ScheduleRequest {
        vm: vm.to_vm(&hosts, "vm").expect("the VM names no host"),
        ..ScheduleRequest::default()
    };
    for (file, spec) in &policies {
        assert!(
            names.insert(spec.name.clone()),
            "{file}: a second `{}`",
            spec.name
        );
        assert!(
            ids.insert(spec.id),
            "{file}: a second policy with id {}",
            spec.id
        );
        assert!(!spec.description.is_empty(), "{file}: no description");

        let policy = compose(file, spec, units);
        let decision = schedule(&policy, &inventory, &request)
            .unwrap_or_else(|e| panic!("{file}: scheduling failed: {e}"));
        let chosen = decision
            .chosen
            .unwrap_or_else(|| panic!("{file}: no host for a small HA VM: {:?}", decision.explain));
        assert_ne!(chosen, 0, "{file}: the overloaded host won");

        if spec.balance.is_some() {
            balance(&policy, &inventory, &BalanceInput::default())
                .unwrap_or_else(|e| panic!("{file}: balancing failed: {e}"));
        }
    }
}

#[test]
fn ovirt_balancers_move_a_vm_off_the_overloaded_host() {
    let units = units_by_name();
    let inventory = cluster();
    for (file, spec) in default_policies() {
        if !matches!(spec.name.as_str(), "evenly_distributed" | "power_saving") {
            continue;
        }
        let policy = compose(&file, &spec, units);
        let decision = balance(&policy, &inventory, &BalanceInput::default())
            .unwrap_or_else(|e| panic!("{file}: balancing failed: {e}"));
        let proposal = decision
            .proposal
            .unwrap_or_else(|| panic!("{file}: nothing proposed"));
        // The least CPU-hungry VM (v2) leaves `hot` for a cooler host.
        assert_eq!(proposal.vm, 1, "{file}: {proposal:?}");
        assert!(
            matches!(decision.destination, Some(1 | 2)),
            "{file}: {:?}",
            decision.destination
        );
    }
}

#[test]
fn cluster_maintenance_starts_only_highly_available_vms() {
    let units = units_by_name();
    let (file, spec) = default_policies()
        .into_iter()
        .find(|(_, p)| p.name == "cluster_maintenance")
        .expect("oVirt's cluster_maintenance policy is among the defaults");
    let policy = compose(&file, &spec, units);
    let inventory = cluster();
    let hosts = Snapshot::default().build().expect("empty is valid").hosts;
    let ordinary = ScheduleRequest {
        vm: VmSpec {
            memory_mib: 1_024.0,
            ..VmSpec::default()
        }
        .to_vm(&hosts, "vm")
        .expect("the VM names no host"),
        ..ScheduleRequest::default()
    };
    let decision = schedule(&policy, &inventory, &ordinary).expect("scheduling runs");
    assert_eq!(decision.chosen, None);
}
