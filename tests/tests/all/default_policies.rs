//! The built-in policies (`policies/defaults/*.json`) composed by the real
//! pipeline over the embedded units: every unit a policy names exists and
//! exports the role it is used in, positions, factors and properties pass
//! the pipeline's rules, names and ids are unique, exactly one policy is the
//! default, and each policy decides a placement (and, with a balancer, a
//! balancing round) on a small cluster. Skipping the units that declare
//! they have nothing to say about a request never changes a decision, nor
//! does spreading one over several cores.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sandpiper::builtin::{BuiltinPolicy, POLICY_FILES, UNITS};
use sandpiper::pipeline::{
    self, BalanceInput, Decision, EveryCore, Lender, Loan, Means, OnFailure, Policy, ScheduleError,
    ScheduleRequest, balance, schedule, schedule_calling_every_unit, schedule_with,
};
use sandpiper::snapshot::{Host, RunningVm, Snapshot, VmSpec};
use sandpiper::unit::Unit;
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{GroupScope, KeyValue, Vm, VmGroup};

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
        let runtime = sandpiper_tests::shared_runtime();
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

/// oVirt's default policy `name`, composed of the built-in units.
fn default_policy(name: &str) -> Policy {
    let (file, spec) = default_policies()
        .into_iter()
        .find(|(_, p)| p.name == name)
        .unwrap_or_else(|| panic!("oVirt's {name} policy is among the defaults"));
    compose(&file, &spec, units_by_name())
}

#[test]
fn cluster_maintenance_starts_only_highly_available_vms() {
    let policy = default_policy("cluster_maintenance");
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

/// Requests that between them have every property a built-in unit
/// declares in `applies-to`, and none: the unit skips apply to some and
/// not others.
fn requests_with_and_without_properties() -> Vec<(&'static str, ScheduleRequest)> {
    let vm = Vm {
        id: "new".to_owned(),
        memory_mib: 1_024.0,
        memory_guaranteed_mib: 1_024.0,
        ..Vm::default()
    };
    let with = |name: &'static str, vm: Vm, hints: Vec<KeyValue>| {
        (
            name,
            ScheduleRequest {
                vm,
                hints,
                ..ScheduleRequest::default()
            },
        )
    };
    let group = |scope, positive, enforcing, hosts: Vec<u32>| VmGroup {
        id: "g".to_owned(),
        name: "g".to_owned(),
        scope,
        positive,
        enforcing,
        hosts,
        ..VmGroup::default()
    };
    vec![
        with("plain", vm.clone(), Vec::new()),
        with(
            "highly available",
            Vm {
                highly_available: true,
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "hosted engine",
            Vm {
                hosted_engine: true,
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "migration",
            Vm {
                current_host: Some(0),
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "preferred hosts",
            Vm {
                dedicated_hosts: vec![2],
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "pinned",
            Vm {
                dedicated_hosts: vec![1, 2],
                pinned: true,
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "groups",
            Vm {
                groups: vec![
                    group(GroupScope::Vms, true, false, vec![2]),
                    group(GroupScope::Vms, false, true, vec![1]),
                    group(GroupScope::Hosts, true, false, vec![2]),
                ],
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "networks",
            Vm {
                networks: vec!["ovirtmgmt".to_owned()],
                ..vm.clone()
            },
            Vec::new(),
        ),
        with(
            "specs and image",
            Vm {
                extra_specs: vec![KeyValue::new("capabilities:hypervisor_type", "QEMU")],
                image_properties: vec![KeyValue::new("hw_architecture", "x86_64")],
                ..vm.clone()
            },
            Vec::new(),
        ),
        (
            "hosted-engine spares kept",
            ScheduleRequest {
                vm: vm.clone(),
                params: [("HeSparesCount".to_owned(), "1".to_owned())].into(),
                ..ScheduleRequest::default()
            },
        ),
        with(
            "hints",
            vm,
            vec![
                KeyValue::new("availability_zone", "nova"),
                KeyValue::new("same_host", "v1"),
                KeyValue::new("query", r#"[">=", "$free_ram_mb", 1024]"#),
            ],
        ),
    ]
}

/// What a decision says, without the costs of its calls.
fn verdict(decision: &Decision) -> String {
    let rejections = decision.explain.rejections();
    format!(
        "chosen {:?}, ranked {:?}, rejected {:?}",
        decision.chosen, decision.ranked, rejections
    )
}

#[test]
fn skipping_units_never_changes_a_default_policy_decision() {
    let units = units_by_name();
    let inventory = cluster();
    let mut skipped = 0;
    for (file, spec) in default_policies() {
        let policy = compose(&file, &spec, units);
        for (name, request) in requests_with_and_without_properties() {
            let calling_all = schedule_calling_every_unit(&policy, &inventory, &request)
                .map(|d| verdict(&d))
                .map_err(|e| e.to_string());
            let decision = schedule(&policy, &inventory, &request);
            if let Ok(decision) = &decision {
                let explain = &decision.explain;
                skipped += explain
                    .filters
                    .iter()
                    .filter(|f| f.skipped.is_some())
                    .count();
                skipped += explain
                    .scores
                    .iter()
                    .filter(|s| s.skipped.is_some())
                    .count();
            }
            let with_skips = decision.map(|d| verdict(&d)).map_err(|e| e.to_string());
            assert_eq!(with_skips, calling_all, "{file}, {name} request");
        }
    }
    assert!(skipped > 0, "no unit was skipped: the test proves nothing");
}

/// `HostedEngineSpares` applies to requests by its parameter (WIT 0.3.0's
/// `param`): skipped at `HeSparesCount` 0, its default, called once the
/// request sets it.
#[test]
fn a_unit_skipped_by_its_parameter_runs_once_the_parameter_is_set() {
    let policy = default_policy("none");
    let requests = requests_with_and_without_properties();
    let skipped = |name: &str| {
        let (_, request) = requests.iter().find(|(n, _)| *n == name).expect(name);
        let decision = schedule(&policy, &cluster(), request).expect("scheduling runs");
        let record = (decision.explain.filters.iter())
            .find(|f| f.unit == "HostedEngineSpares")
            .expect("the none policy filters with HostedEngineSpares");
        record.skipped.clone()
    };
    let reason = skipped("plain").expect("skipped at HeSparesCount 0");
    assert!(reason.contains("param(\"HeSparesCount\")"), "{reason}");
    assert_eq!(skipped("hosted-engine spares kept"), None);
}

#[test]
fn the_default_policy_skips_the_units_a_plain_request_does_not_concern() {
    let policy = default_policy("none");
    let (_, plain) = requests_with_and_without_properties().swap_remove(0);
    let decision = schedule(&policy, &cluster(), &plain).expect("scheduling runs");
    let explain = &decision.explain;
    let skipped: Vec<&str> = explain
        .filters
        .iter()
        .filter(|f| f.skipped.is_some())
        .map(|f| f.unit.as_str())
        .chain(
            explain
                .scores
                .iter()
                .filter(|s| s.skipped.is_some())
                .map(|s| s.unit.as_str()),
        )
        .collect();
    assert_eq!(
        skipped,
        [
            "PinToHost",
            "Compatibility-Version",
            "CPU-Level",
            "CpuPinning",
            "HostDevice",
            "MDevice",
            "Emulated-Machine",
            "HA",
            "NUMA",
            "HugePages",
            "Migration",
            "VmAffinityGroups",
            "VmToHostsAffinityGroups",
            "Network",
            "HostedEngineSpares",
            "Migration-Tsc-Frequency",
            "PreferredHosts",
            "HA",
            "OptimalForHaReservation",
            "VmAffinityGroups",
            "VmToHostsAffinityGroups",
            "CPU for high performance VMs",
            "CPU and NUMA pinning compatibility",
        ]
    );
    let json = serde_json::to_value(explain).expect("the record serialises");
    assert_eq!(
        json["filters"][0]["skipped"],
        "the request has none of: dedicated-hosts, current-host"
    );
}

#[test]
fn the_ovirt_policies_run_the_mandatory_hardware_filters_before_their_own() {
    let units = units_by_name();
    let inventory = cluster();
    let mut vm = Vm {
        id: "new".to_owned(),
        memory_mib: 1_024.0,
        memory_guaranteed_mib: 1_024.0,
        ..Vm::default()
    };
    // No host of the cluster reports its cluster levels.
    vm.hardware.compatibility_version = "4.8".to_owned();
    let request = ScheduleRequest {
        vm,
        ..ScheduleRequest::default()
    };
    let mut checked = 0;
    for (file, spec) in default_policies() {
        if spec.name.starts_with("nova") {
            continue;
        }
        let policy = compose(&file, &spec, units);
        let decision = schedule(&policy, &inventory, &request).expect("scheduling runs");
        assert_eq!(decision.chosen, None, "{file}");
        let rejections = decision.explain.rejections();
        let (unit, reason, hosts) = rejections.first().expect("a rejection");
        assert_eq!(*unit, "Compatibility-Version", "{file}: {rejections:?}");
        assert_eq!(
            hosts.len(),
            3,
            "{file}: every host, before the policy's own filters"
        );
        assert!(
            reason.contains("reports no supported cluster levels; the VM needs 4.8"),
            "{file}: {reason}"
        );
        checked += 1;
    }
    assert_eq!(checked, 5, "oVirt's five policies");
}

/// `hosts` hosts whose memory, CPU load and VM counts vary, so that the
/// default policies' filters reject some of them for several reasons and
/// their weights tell them apart.
fn varied_cluster(hosts: usize) -> Arc<Inventory> {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |below: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % below) as f64
    };
    let hosts = (0..hosts)
        .map(|i| {
            let id = format!("h{i}");
            let mut host = Host {
                address: format!("{id}.example.com"),
                id,
                ..Host::default()
            };
            let total = 16_384.0 * (1.0 + next(8));
            let cores = 8.0 * (1.0 + next(4));
            let vms = next(20);
            for (metric, value) in [
                ("cpu_sockets", 2.0),
                ("cpu_cores", cores),
                ("cpu_threads", cores * 2.0),
                ("cpu_usage_percent", next(100)),
                ("cpu_overloaded_minutes", next(4)),
                ("memory_total_mib", total),
                ("memory_free_mib", total * next(100) / 100.0),
                ("memory_committed_mib", total * next(120) / 100.0),
                ("swap_total_mib", 4_096.0),
                ("swap_free_mib", next(4_096)),
                ("disk_total_gib", 1_000.0),
                ("disk_free_gib", next(1_000)),
                ("vm_count", vms),
                ("vcpus_used", vms * 2.0),
            ] {
                host.metrics.insert(metric.to_owned(), value);
            }
            host
        })
        .collect();
    let snapshot = Snapshot {
        hosts,
        vms: Vec::new(),
    };
    Arc::new(snapshot.build().expect("the cluster is valid").inventory)
}

/// Fuel the decision's filters burnt, all calls together.
fn filter_fuel(decision: &Decision) -> u64 {
    let explain = &decision.explain;
    explain.filters.iter().filter_map(|f| f.usage.fuel).sum()
}

/// Lends every core, for any work at all.
#[derive(Debug)]
struct Eager;

impl Lender for Eager {
    fn lend(&self) -> Option<Loan> {
        EveryCore.lend()
    }

    fn worth(&self) -> Duration {
        Duration::ZERO
    }
}

#[test]
fn spreading_a_decision_over_cores_never_changes_it() {
    let units = units_by_name();
    // More survivors than weights are called side by side for. The lender
    // splits every per-host filter called before, however cheap.
    let inventory = varied_cluster(pipeline::MIN_SIDE_BY_SIDE_SURVIVORS * 2);
    let lends = std::thread::available_parallelism().map_or(1, usize::from) > 1;
    let mut split = 0;
    for (file, spec) in default_policies() {
        let policy = compose(&file, &spec, units);
        for (name, request) in requests_with_and_without_properties() {
            let alone = schedule(&policy, &inventory, &request);
            let means = Means {
                reuse: None,
                cores: Some(&Eager),
            };
            let spread = schedule_with(&policy, &inventory, &request, means);
            let (alone, spread) = match (alone, spread) {
                (Ok(alone), Ok(spread)) => (alone, spread),
                (alone, spread) => {
                    let text = |d: Result<Decision, ScheduleError>| {
                        d.map(|d| verdict(&d)).map_err(|e| e.to_string())
                    };
                    assert_eq!(text(spread), text(alone), "{file}, {name} request");
                    continue;
                }
            };
            assert_eq!(verdict(&spread), verdict(&alone), "{file}, {name} request");
            let (a, s) = (&alone.explain, &spread.explain);
            assert_eq!(a.filters.len(), s.filters.len());
            for (a, s) in a.filters.iter().zip(&s.filters) {
                assert_eq!(
                    (&a.unit, a.input, a.survivors, &a.rejected, &a.skipped),
                    (&s.unit, s.input, s.survivors, &s.rejected, &s.skipped),
                    "{file}, {name} request: filter {}",
                    a.unit
                );
            }
            for (a, s) in a.scores.iter().zip(&s.scores) {
                assert_eq!(
                    (&a.unit, a.called, &a.raw, &a.standing, &a.failure),
                    (&s.unit, s.called, &s.raw, &s.standing, &s.failure),
                    "{file}, {name} request: weight {}",
                    a.unit
                );
            }
            assert_eq!(a.totals, s.totals, "{file}, {name} request");
            // A split filter's chunks each pay a call's fixed fuel: the
            // evidence that this decision was spread at all.
            if filter_fuel(&spread) > filter_fuel(&alone) {
                split += 1;
            }
        }
    }
    if lends {
        assert!(
            split > 0,
            "no decision split a filter: the test proves nothing"
        );
    }
}
