//! Placement over the held inventory, with the built-in units run natively.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::inputs::MAX_INSTANCES_PER_REQUEST;
use crate::pipeline;
use crate::pipeline::{OnFailure, Position};
use crate::placement::hosts::HostUpdate;
use crate::snapshot::{Host, Snapshot, VmSpec};
use crate::test_units::native;
use crate::unit::Unit;

/// The built-in policy's units, built natively from their source.
fn policy() -> Policy {
    Policy::builder()
        .filter(native("sandpiper-policy-cpu"))
        .filter(native("sandpiper-policy-memory"))
        .score(native("sandpiper-policy-cpu-even-distribution"), 2)
        .score(native("sandpiper-policy-even-memory"), 1)
        .build()
        .expect("the built-in policy is valid")
}

fn host(id: &str, total: f64) -> Host {
    Host {
        id: id.to_owned(),
        metrics: [
            ("memory_total_mib", total),
            ("memory_free_mib", total),
            ("cpu_cores", 16.0),
            ("cpu_threads", 16.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
        ..Host::default()
    }
}

fn cluster(totals: &[(&str, f64)]) -> ClusterState {
    let mut state = ClusterState::new();
    state
        .replace_snapshot(
            1,
            Snapshot {
                hosts: totals.iter().map(|(id, t)| host(id, *t)).collect(),
                vms: Vec::new(),
            },
        )
        .expect("valid snapshot");
    state
}

fn vm(id: &str, memory: f64) -> VmSpec {
    VmSpec {
        id: id.to_owned(),
        memory_mib: memory,
        ..VmSpec::default()
    }
}

fn request(vm: VmSpec, count: u32, mode: Mode) -> PlaceRequest {
    PlaceRequest {
        vm,
        count,
        mode,
        ..PlaceRequest::default()
    }
}

fn place(
    state: &mut ClusterState,
    policy: &Policy,
    request: &PlaceRequest,
) -> Result<PlaceOutcome, PlaceError> {
    let params = ParamValues::new();
    let cx = PlaceContext {
        policy,
        params: &params,
        decision_id: Uuid::new_v4(),
        now: Timestamp(1_000),
        claim_ttl: Duration::from_secs(60),
        hold_deadline: None,
        dry_run: false,
        sampling: Sampling::Adaptive,
        reuse_answers: true,
        cores: None,
    };
    state.place(request, &cx).map(|(outcome, _)| outcome)
}

fn hosts_of(outcome: &PlaceOutcome) -> Vec<Option<&str>> {
    outcome.picks.iter().map(|p| p.host_id.as_deref()).collect()
}

#[test]
fn each_decision_sees_the_claims_before_it() {
    let policy = policy();
    let mut state = cluster(&[("a", 4096.0), ("b", 4096.0)]);
    let first = place(
        &mut state,
        &policy,
        &request(vm("v1", 3072.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let second = place(
        &mut state,
        &policy,
        &request(vm("v2", 3072.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let third = place(
        &mut state,
        &policy,
        &request(vm("v3", 3072.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let (a, b) = (hosts_of(&first)[0], hosts_of(&second)[0]);
    assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
    assert_eq!(hosts_of(&third), [None]);
    assert!(!third.complete && third.claims.is_empty());
    assert_eq!(state.claims().len(), 2);
    // No host fits; claims hold the memory, so waiting could help.
    assert!(third.pending_could_fit);
    let rejected = third.picks[0].decision.explain.rejections();
    assert!(
        rejected
            .iter()
            .any(|(unit, reason, _)| *unit == "Memory" && reason.contains("pending")),
        "{rejected:?}"
    );
}

#[test]
fn instances_consume_before_the_next_pick() {
    let policy = policy();
    let mut state = cluster(&[("a", 8192.0), ("b", 3000.0)]);
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("web", 2048.0), 4, Mode::AllOrNothing),
    )
    .expect("decided");
    assert!(outcome.complete, "{:?}", hosts_of(&outcome));
    // b holds one 2 GiB VM and a four: without consuming each pick
    // before the next, b (or a) would be picked past what it holds.
    let on_b = outcome.claims.iter().filter(|c| c.host_id == "b").count();
    assert!(on_b <= 1, "{:?}", hosts_of(&outcome));
    assert_eq!(outcome.claims.len(), 4);
    let ids: Vec<_> = outcome.claims.iter().map(|c| c.vm_id.as_str()).collect();
    assert_eq!(ids, ["web-0", "web-1", "web-2", "web-3"]);
}

#[test]
fn all_or_nothing_claims_nothing_when_one_instance_does_not_fit() {
    let policy = policy();
    let mut state = cluster(&[("a", 4096.0), ("b", 2048.0)]);
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("db", 2048.0), 4, Mode::AllOrNothing),
    )
    .expect("decided");
    assert!(!outcome.complete);
    assert_eq!(hosts_of(&outcome).last(), Some(&None));
    assert!(outcome.claims.is_empty() && state.claims().is_empty());
    // Nothing was pending before the request, so waiting cannot help.
    assert!(!outcome.pending_could_fit);

    let outcome = place(
        &mut state,
        &policy,
        &request(vm("db", 2048.0), 4, Mode::BestEffort),
    )
    .expect("decided");
    assert_eq!(outcome.claims.len(), 3);
    assert_eq!(outcome.not_tried, Vec::<String>::new());
    assert_eq!(state.claims().len(), 3);
}

#[test]
fn placing_a_vm_again_replaces_its_claim() {
    let policy = policy();
    let mut state = cluster(&[("a", 4096.0), ("b", 4096.0)]);
    let first = place(
        &mut state,
        &policy,
        &request(vm("v", 4096.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    // The VM's own claim does not count against it: it still fits.
    let again = place(
        &mut state,
        &policy,
        &request(vm("v", 4096.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert!(first.complete && again.complete);
    assert_eq!(state.claims().len(), 1);
    assert_eq!(hosts_of(&first), hosts_of(&again));
}

#[test]
fn candidates_and_exclusions_narrow_the_hosts() {
    let policy = policy();
    let mut state = cluster(&[("a", 4096.0), ("b", 4096.0), ("c", 4096.0)]);
    let mut req = request(vm("v", 1024.0), 2, Mode::AllOrNothing);
    req.candidates = Some(vec!["c".to_owned(), "b".to_owned()]);
    req.exclude = vec!["b".to_owned(), "zz".to_owned()];
    let outcome = place(&mut state, &policy, &req).expect("decided");
    assert_eq!(hosts_of(&outcome), [Some("c"), Some("c")]);
    req.candidates = Some(vec!["nope".to_owned()]);
    let err = place(&mut state, &policy, &req).map(|_| ()).unwrap_err();
    assert_eq!(err.to_string(), "candidates[0]: unknown host \"nope\"");
}

#[test]
fn once_per_request_filters_must_be_filters_of_the_policy() {
    let policy = policy();
    let mut state = cluster(&[("a", 8192.0)]);
    let mut req = request(vm("v", 1024.0), 2, Mode::AllOrNothing);
    req.once_per_request = BTreeSet::from(["CPU".to_owned()]);
    let outcome = place(&mut state, &policy, &req).expect("decided");
    assert!(outcome.complete);
    // The later pick ran without the CPU filter.
    let later = &outcome.picks[1].decision.explain;
    assert_eq!(later.filters.len(), 1);
    assert_eq!(later.filters[0].unit, "Memory");
    req.once_per_request = BTreeSet::from(["Cpu".to_owned()]);
    assert!(matches!(
        place(&mut state, &policy, &req),
        Err(PlaceError::BadRequest(_))
    ));
}

#[test]
fn a_run_once_filter_of_the_policy_runs_for_the_first_instance_only() {
    let cpu: Arc<dyn Unit> = native("sandpiper-policy-cpu");
    let policy = Policy::builder()
        .filter_step(cpu, Position::Middle, OnFailure::FailClosed, true)
        .filter(native("sandpiper-policy-memory"))
        .score(native("sandpiper-policy-even-memory"), 1)
        .build()
        .expect("valid");
    let mut state = cluster(&[("a", 8192.0), ("b", 8192.0)]);
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("v", 1024.0), 3, Mode::AllOrNothing),
    )
    .expect("decided");
    assert!(outcome.complete);
    let ran: Vec<Vec<&str>> = outcome
        .picks
        .iter()
        .map(|p| {
            p.decision
                .explain
                .filters
                .iter()
                .map(|f| f.unit.as_str())
                .collect()
        })
        .collect();
    assert_eq!(ran, [vec!["CPU", "Memory"], vec!["Memory"], vec!["Memory"]]);
    // The policy without it was built once, and is shared by clones.
    assert!(policy.clone().without_run_once().get().is_some());
    // A single instance runs every filter.
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("w", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(outcome.picks[0].decision.explain.filters.len(), 2);
}

#[test]
fn nova_default_runs_novas_once_per_request_filters_once() {
    let policies = crate::builtin::BuiltinPolicy::all().expect("the built-in policies parse");
    let nova = policies
        .iter()
        .find(|p| p.name == "nova_default")
        .expect("nova_default");
    let mut once: Vec<&str> = nova
        .filters
        .iter()
        .filter(|f| f.run_once)
        .map(|f| f.unit.as_str())
        .collect();
    once.sort();
    // Nova's filters with run_filter_once_per_request = True among the
    // policy's; RAM/CPU/disk and the server-group filters must see
    // every instance's consumption and group members.
    assert_eq!(
        once,
        [
            "AvailabilityZoneFilter",
            "ComputeCapabilitiesFilter",
            "ComputeFilter",
            "ImagePropertiesFilter"
        ]
    );
}

/// A filter that drops every host the VM columns say runs a VM: it
/// sees claimed VMs only if they are in the VM columns.
fn one_vm_per_host() -> Arc<dyn Unit> {
    fn filter(
        inventory: &sandpiper_model::Inventory,
        _: &sandpiper_model::Request,
        candidates: &[u32],
    ) -> Vec<sandpiper_model::Rejection> {
        let busy: HashSet<u32> = inventory.vm_hosts().iter().copied().collect();
        let hosts: Vec<u32> = candidates
            .iter()
            .copied()
            .filter(|h| busy.contains(h))
            .collect();
        vec![sandpiper_model::Rejection::new("runs a VM", hosts)]
    }
    Arc::new(sandpiper_guest::native::NativeUnit {
        info: sandpiper_model::UnitInfo {
            name: "OneVmPerHost".to_owned(),
            description: String::new(),
            params: Vec::new(),
            score_order: sandpiper_model::ScoreOrder::LowerIsBetter,
            applies_to: Default::default(),
            per_host: false,
        },
        filter: Some(filter),
        score: None,
        balance: None,
    })
}

#[test]
fn claimed_vms_are_vms_on_their_host_for_the_units() {
    let policy = Policy::builder()
        .filter(one_vm_per_host())
        .filter(native("sandpiper-policy-memory"))
        .build()
        .expect("valid");
    let mut state = cluster(&[("a", 8192.0), ("b", 8192.0)]);
    let first = place(
        &mut state,
        &policy,
        &request(vm("v1", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let second = place(
        &mut state,
        &policy,
        &request(vm("v2", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let (a, b) = (hosts_of(&first)[0], hosts_of(&second)[0]);
    assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
    // Both hosts run a claimed VM now.
    let third = place(
        &mut state,
        &policy,
        &request(vm("v3", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&third), [None]);
    // Placing v1 again does not see its own claim.
    let again = place(
        &mut state,
        &policy,
        &request(vm("v1", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&again), [a]);

    // The instances of one request see the earlier ones.
    let mut state = cluster(&[("a", 8192.0), ("b", 8192.0), ("c", 8192.0)]);
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("web", 1024.0), 3, Mode::AllOrNothing),
    )
    .expect("decided");
    let mut hosts = hosts_of(&outcome);
    hosts.sort();
    assert_eq!(hosts, [Some("a"), Some("b"), Some("c")]);
}

/// A balance unit that proposes moving the VM called `big` to any
/// other candidate.
fn move_big() -> Arc<dyn Unit> {
    fn balance(
        inventory: &sandpiper_model::Inventory,
        request: &sandpiper_model::BalanceRequest,
    ) -> Option<sandpiper_model::Migration> {
        let ids = inventory.vm_text(sandpiper_model::VmText::Id);
        let vm = (0..inventory.vm_count()).find(|&i| ids.get(i) == "big")?;
        let source = inventory.vm_hosts()[vm];
        Some(sandpiper_model::Migration {
            vm: vm as u32,
            destinations: request
                .candidates
                .iter()
                .copied()
                .filter(|&h| h != source)
                .collect(),
        })
    }
    Arc::new(sandpiper_guest::native::NativeUnit {
        info: sandpiper_model::UnitInfo {
            name: "MoveBig".to_owned(),
            description: String::new(),
            params: Vec::new(),
            score_order: sandpiper_model::ScoreOrder::LowerIsBetter,
            applies_to: Default::default(),
            per_host: false,
        },
        filter: None,
        score: None,
        balance: Some(balance),
    })
}

#[test]
fn a_balance_over_the_held_inventory_counts_its_claims() {
    let policy = Policy::builder()
        .filter(native("sandpiper-policy-memory"))
        .score(native("sandpiper-policy-even-memory"), 1)
        .balance(move_big())
        .build()
        .expect("valid");
    let mut state = ClusterState::new();
    state
        .replace_snapshot(
            1,
            Snapshot {
                hosts: vec![host("a", 4096.0), host("b", 8192.0), host("c", 6144.0)],
                vms: vec![crate::snapshot::RunningVm {
                    id: "big".to_owned(),
                    name: None,
                    host: "a".to_owned(),
                    memory_mib: 3072.0,
                    memory_guaranteed_mib: None,
                    vcpus: 1,
                    cpu_usage_percent: 0.0,
                    migratable: true,
                    highly_available: false,
                    hosted_engine: false,
                    pending: false,
                }],
            },
        )
        .expect("valid");
    let balance = |state: &mut ClusterState| {
        let (inventory, candidates, _) = state.held_snapshot(Timestamp(1_000), None).expect("held");
        let inventory = Arc::new(inventory);
        let input = pipeline::BalanceInput {
            candidates,
            params: ParamValues::new(),
        };
        let decision = pipeline::balance(&policy, &inventory, &input).expect("decided");
        let destination = decision.destination.map(|h| {
            inventory
                .host_text(sandpiper_model::HostText::Id)
                .get(h as usize)
                .to_owned()
        });
        let explain = serde_json::to_value(&decision.explain).expect("serialises");
        (inventory, destination, explain)
    };
    // Nothing claimed: b, with the most free memory, wins.
    let (inventory, destination, _) = balance(&mut state);
    assert_eq!(inventory.vm_count(), 1);
    assert_eq!(destination.as_deref(), Some("b"));

    // A claim takes most of b: the held balance sees it, as usage and
    // as a pending VM of b, and does not send `big` there.
    let mut req = request(vm("x", 6000.0), 1, Mode::AllOrNothing);
    req.candidates = Some(vec!["b".to_owned()]);
    let placed = place(
        &mut state,
        &Policy::builder()
            .filter(native("sandpiper-policy-memory"))
            .build()
            .expect("valid"),
        &req,
    )
    .expect("decided");
    assert_eq!(hosts_of(&placed), [Some("b")]);
    let (inventory, destination, explain) = balance(&mut state);
    assert_eq!(inventory.vm_count(), 2);
    assert_eq!(inventory.vm_text(sandpiper_model::VmText::Id).get(1), "x");
    assert_eq!(
        inventory.vm_flag(sandpiper_model::VmFlag::Pending),
        [false, true]
    );
    assert_ne!(destination.as_deref(), Some("b"));
    let rejected = &explain["schedule"]["filters"][0]["rejected"][0];
    assert_eq!(rejected["hosts"], serde_json::json!(["b"]));
    assert!(
        rejected["reason"]
            .as_str()
            .is_some_and(|r| r.contains("6000 MiB pending")),
        "{rejected}"
    );
}

#[test]
fn bad_counts_and_ids_are_refused() {
    let policy = policy();
    let mut state = cluster(&[("a", 8192.0)]);
    let mut req = request(
        vm("v", 1.0),
        MAX_INSTANCES_PER_REQUEST + 1,
        Mode::BestEffort,
    );
    assert!(matches!(
        place(&mut state, &policy, &req),
        Err(PlaceError::BadRequest(_))
    ));
    req.count = 2;
    req.instance_ids = vec!["x".to_owned(), "x".to_owned()];
    assert!(matches!(
        place(&mut state, &policy, &req),
        Err(PlaceError::Instances {
            field: "instance_ids",
            ..
        })
    ));
    req.instance_ids = vec!["x".to_owned()];
    assert!(matches!(
        place(&mut state, &policy, &req),
        Err(PlaceError::Instances {
            field: "instance_ids",
            ..
        })
    ));
    req.instance_ids.clear();
    req.vm.id.clear();
    req.count = 1;
    assert!(matches!(
        place(&mut state, &policy, &req),
        Err(PlaceError::Instances { field: "vm.id", .. })
    ));
}

#[test]
fn a_dry_run_claims_nothing_and_expired_claims_never_count() {
    let policy = policy();
    let mut state = cluster(&[("a", 4096.0)]);
    let params = ParamValues::new();
    let mut cx = PlaceContext {
        policy: &policy,
        params: &params,
        decision_id: Uuid::nil(),
        now: Timestamp(0),
        claim_ttl: Duration::from_millis(100),
        hold_deadline: None,
        dry_run: true,
        sampling: Sampling::Adaptive,
        reuse_answers: true,
        cores: None,
    };
    let req = request(vm("v", 4096.0), 1, Mode::AllOrNothing);
    let (outcome, _) = state.place(&req, &cx).expect("decided");
    assert!(outcome.complete && state.claims().is_empty());
    cx.dry_run = false;
    state.place(&req, &cx).expect("decided");
    let other = request(vm("w", 4096.0), 1, Mode::AllOrNothing);
    let (full, _) = state.place(&other, &cx).expect("decided");
    assert!(!full.complete);
    cx.now = Timestamp(100);
    let (later, changes) = state.place(&other, &cx).expect("decided");
    assert!(later.complete);
    assert!(changes.contains(&Change::ClaimDeleted {
        vm_id: "v".to_owned()
    }));
}

#[test]
fn a_host_report_patches_what_the_next_decision_sees() {
    let policy = policy();
    let mut state = cluster(&[("a", 4096.0), ("b", 4096.0)]);
    let mut full = host("a", 4096.0);
    full.metrics.insert("memory_free_mib".to_owned(), 0.0);
    state
        .apply_updates(vec![HostUpdate::Upsert {
            generation: 2,
            host: full,
            vms: None,
        }])
        .expect("valid");
    assert!(
        state.columns.is_some(),
        "a usage-only report patches in place"
    );
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("v", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&outcome), [Some("b")]);
}

#[test]
fn a_sampled_decision_rotates_and_widens_before_saying_no() {
    let policy = policy();
    // Hosts h0..h9 hold one 1 GiB VM each; h10..h19 hold none.
    let totals: Vec<(String, f64)> = (0..20)
        .map(|i| (format!("h{i}"), if i < 10 { 1024.0 } else { 512.0 }))
        .collect();
    let refs: Vec<(&str, f64)> = totals.iter().map(|(h, t)| (h.as_str(), *t)).collect();
    let mut state = cluster(&refs);
    let params = ParamValues::new();
    let cx = PlaceContext {
        policy: &policy,
        params: &params,
        decision_id: Uuid::nil(),
        now: Timestamp(0),
        claim_ttl: Duration::from_secs(60),
        hold_deadline: None,
        dry_run: false,
        sampling: Sampling::AtMost(4),
        reuse_answers: true,
        cores: None,
    };
    let mut chosen = Vec::new();
    for i in 0..10 {
        let req = request(vm(&format!("v{i}"), 1024.0), 1, Mode::AllOrNothing);
        let (outcome, _) = state.place(&req, &cx).expect("decided");
        let sample = outcome.sample.clone().expect("sampled");
        assert_eq!((sample.window, sample.eligible), (4, 20));
        // The explain record of every pick says what was considered.
        let considered = outcome.picks[0].decision.explain.considered.clone();
        if !sample.widened {
            assert!(
                sample
                    .considered
                    .starts_with("considered 4 of 20 hosts (sampled window "),
                "{}",
                sample.considered
            );
        }
        assert_eq!(considered.as_deref(), Some(sample.considered.as_str()));
        chosen.push(outcome.picks[0].host_id.clone().expect("placed"));
    }
    chosen.sort();
    chosen.dedup();
    // Every VM found a host, each on its own: windows that held none
    // widened to the whole cluster.
    assert_eq!(chosen.len(), 10);
    let req = request(vm("last", 1024.0), 1, Mode::AllOrNothing);
    let (outcome, _) = state.place(&req, &cx).expect("decided");
    assert!(!outcome.complete);
    let sample = outcome.sample.clone().expect("sampled");
    assert!(sample.widened);
    assert!(sample.considered.starts_with("considered all 20 hosts"));
    assert_eq!(outcome.picks[0].decision.explain.candidates, 20);
    // An exhaustive request is not sampled.
    let mut req = request(vm("x", 1.0), 1, Mode::AllOrNothing);
    req.exhaustive = true;
    let (outcome, _) = state.place(&req, &cx).expect("decided");
    assert_eq!(outcome.sample, None);
    assert_eq!(outcome.picks[0].decision.explain.considered, None);
}

#[test]
fn a_cluster_of_a_thousand_hosts_is_considered_whole_by_default() {
    let policy = policy();
    let names: Vec<String> = (0..1_001).map(|i| format!("h{i}")).collect();
    let totals: Vec<(&str, f64)> = names.iter().map(|h| (h.as_str(), 8192.0)).collect();
    let mut state = cluster(&totals[..1_000]);
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("v", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(outcome.sample, None);
    let explain = &outcome.picks[0].decision.explain;
    assert_eq!(
        (explain.candidates, explain.considered.as_deref()),
        (1_000, None)
    );

    // One host more, and the adaptive sample applies, and says so.
    let mut state = cluster(&totals);
    let outcome = place(
        &mut state,
        &policy,
        &request(vm("v", 1024.0), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let sample = outcome.sample.clone().expect("sampled");
    // 420 hosts asked for: two windows of about 500.
    assert_eq!(
        (sample.window, sample.eligible, sample.widened),
        (500, 1_001, false)
    );
    let explain = &outcome.picks[0].decision.explain;
    assert_eq!(explain.candidates, 500);
    let considered = explain
        .considered
        .as_deref()
        .expect("says what it considered");
    assert!(
        considered.starts_with(
            "considered 500 of 1001 hosts (sampled window 1 of 2: held hosts 0 to 499"
        ),
        "{considered}"
    );
    let json = serde_json::to_value(explain).expect("serialises");
    assert_eq!(json["considered"], considered);
}

/// A host with one NUMA cell of 4 CPUs (2 dedicated, siblings 2 and 3)
/// and `gpus` GPUs, each a pool of one.
fn hardware_host(id: &str, gpus: usize) -> Host {
    let devices: Vec<String> = (0..gpus)
        .map(|i| {
            format!(
                r#"{{"address": "0000:3b:00.{i}", "vendor_id": "10de", "product_id": "1eb8",
                     "numa_node": 0}}"#
            )
        })
        .collect();
    let mut host: Host = crate::snapshot::from_json(&format!(
        r#"{{"id": "{id}", "hardware": {{
            "numa_cells": [{{"node": 0, "memory_mib": 8192, "cpus": [0, 1, 2, 3],
                             "dedicated_cpus": [2, 3],
                             "pages": [{{"size_kib": 2048, "total": 1024, "free": 1024}}]}}],
            "pci_devices": [{}]}}}}"#,
        devices.join(", ")
    ))
    .expect("a valid host");
    host.metrics = self::host(id, 8192.0).metrics;
    host
}

fn hardware_cluster(hosts: Vec<Host>) -> ClusterState {
    let mut state = ClusterState::new();
    state
        .replace_snapshot(
            1,
            Snapshot {
                hosts,
                vms: Vec::new(),
            },
        )
        .expect("valid snapshot");
    state
}

fn hardware_vm(id: &str, hardware: &str) -> VmSpec {
    let mut vm: VmSpec = crate::snapshot::from_json(&format!(
        r#"{{"id": "{id}", "memory_mib": 1024, "vcpus": 2, "hardware": {hardware}}}"#
    ))
    .expect("a valid VM");
    vm.id = id.to_owned();
    vm
}

#[test]
fn two_decisions_never_take_the_last_gpu_or_the_last_pinned_cores() {
    let policy = policy();
    let mut state = hardware_cluster(vec![hardware_host("gpu", 1), hardware_host("plain", 0)]);
    let gpu = r#"{"pci_requests": [{"specs": [{"vendor_id": "10de"}]}]}"#;
    let first = place(
        &mut state,
        &policy,
        &request(hardware_vm("g1", gpu), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&first), [Some("gpu")]);
    let taken = first.claims[0].hardware.as_ref().expect("a hardware claim");
    assert_eq!(taken.devices[0].address, "0000:3b:00.0");
    assert_eq!(
        first.picks[0].decision.explain.hardware.as_ref(),
        Some(taken)
    );

    // The policy has no PCI filter and may well pick `gpu` again: the
    // claim-time fit refuses it, with the reason, and no host is left.
    let second = place(
        &mut state,
        &policy,
        &request(hardware_vm("g2", gpu), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&second), [None]);
    assert!(second.claims.is_empty());
    let explain = &second.picks[0].decision.explain;
    let refusals: Vec<_> = explain
        .rejections()
        .into_iter()
        .filter(|(unit, _, _)| *unit == fit::CLAIM_UNIT)
        .map(|(_, reason, hosts)| (reason, hosts.len()))
        .collect();
    assert_eq!(
        refusals,
        [(
            "PCI request 0: 0 free matching devices, 1 needed".to_owned(),
            2
        )]
    );

    // Releasing the claim gives the GPU back.
    state.release("g1").expect("g1 holds a claim");
    let third = place(
        &mut state,
        &policy,
        &request(hardware_vm("g3", gpu), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&third), [Some("gpu")]);

    // Pinned cores: one host with 2 dedicated CPUs takes one 2-vCPU
    // dedicated VM, then none; the pinned CPUs are the claim's.
    let mut state = hardware_cluster(vec![hardware_host("numa", 0)]);
    let pinned = r#"{"cpu_policy": "dedicated"}"#;
    let first = place(
        &mut state,
        &policy,
        &request(hardware_vm("p1", pinned), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    let cells = &first.claims[0].hardware.as_ref().expect("pinned").cells;
    assert_eq!(cells[0].node, 0);
    let mut cpus = cells[0].cpus.clone();
    cpus.sort_unstable();
    assert_eq!(cpus, [2, 3]);
    let second = place(
        &mut state,
        &policy,
        &request(hardware_vm("p2", pinned), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&second), [None]);

    // Two instances in one request: the second sees the first's pages.
    let mut state = hardware_cluster(vec![hardware_host("numa", 0)]);
    let pages =
        r#"{"page_size": 2048, "numa_cells": [{"shared_vcpus": [0, 1], "memory_mib": 1024}]}"#;
    let mut two = request(hardware_vm("h", pages), 2, Mode::BestEffort);
    two.vm.memory_mib = 1024.0;
    let outcome = place(&mut state, &policy, &two).expect("decided");
    assert_eq!(outcome.claims.len(), 2);
    for claim in &outcome.claims {
        let cell = &claim.hardware.as_ref().expect("pages").cells[0];
        assert_eq!((cell.page_size_kib, cell.pages), (Some(2048), 512));
    }
    let third = place(
        &mut state,
        &policy,
        &request(hardware_vm("h3", pages), 1, Mode::AllOrNothing),
    )
    .expect("decided");
    assert_eq!(hosts_of(&third), [None], "the 1024 free pages are taken");
}
