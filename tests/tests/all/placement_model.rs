//! Model-based test of stateful placement: random interleavings of host
//! reports (in order, late, repeated), full snapshots (fresh and stale),
//! schedules of one to three instances in both modes, confirmations,
//! releases, expiries and host removals, driven through the very
//! `ClusterState` the server runs, with the built-in policy's units (CPU and
//! Memory filters, even CPU and even memory scores) as WebAssembly
//! components in the real sandbox.
//!
//! A small engine model holds the truth: which VMs run where, which are
//! still starting (placed, not yet confirmed), which reports it has sent.
//! After every step the test checks, against that truth and not against
//! Sandpiper's own view:
//!
//! * **no overcommit**: on every host, the memory of its running and
//!   starting VMs stays within its physical memory, which is exactly what
//!   the policy's Memory filter guarantees (no swap, 100 % over-commit);
//! * **claims match starts**: every VM the engine is starting holds exactly
//!   one claim, on the host it was placed on, and every claim belongs to a
//!   starting VM or to a running one whose covering report has not arrived;
//! * **refusals say why**: a pick that found no host lists a rejection for
//!   every candidate.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use proptest::prelude::*;
use sandpiper::builtin;
use sandpiper::pipeline::{ParamValues, Policy};
use sandpiper::placement::{
    ClaimState, ClusterState, HostUpdate, InventoryError, Mode, PlaceContext, PlaceRequest,
    Sampling, Timestamp,
};
use sandpiper::snapshot::{Host, RunningVm, Snapshot, VmSpec};
use sandpiper::unit::Unit;
use uuid::Uuid;

/// Hosts of the modelled cluster, and their physical memory, MiB: small
/// enough that a few VMs fill a host, so that the interesting cases (full
/// hosts, pending claims in the way) come up in every run.
const HOST_MEMORY_MIB: [f64; 4] = [4096.0, 4096.0, 6144.0, 2048.0];

/// VM sizes are multiples of this, MiB.
const VM_MEMORY_STEP_MIB: f64 = 512.0;

/// Claims expire after this long unless confirmed.
const CLAIM_TTL: Duration = Duration::from_secs(60);

/// The built-in policy's units, as components.
static POLICY: LazyLock<Policy> = LazyLock::new(|| {
    let load = |package: &str| -> Arc<dyn Unit> {
        let Some(unit) = builtin::unit(package) else {
            panic!("{package} is a built-in unit");
        };
        sandpiper_tests::shared_runtime()
            .load(unit.wasm)
            .unwrap_or_else(|e| panic!("{package} loads: {e}"))
    };
    Policy::builder()
        .filter(load("sandpiper-policy-cpu"))
        .filter(load("sandpiper-policy-memory"))
        .score(load("sandpiper-policy-cpu-even-distribution"), 2)
        .score(load("sandpiper-policy-even-memory"), 1)
        .build()
        .unwrap_or_else(|e| panic!("the built-in policy is valid: {e}"))
});

/// One step of the world.
#[derive(Clone, Debug)]
enum Step {
    /// The engine reports a host; a `late` report is held back and
    /// delivered later, out of order.
    Report { host: usize, late: bool },
    /// A held-back report arrives.
    DeliverLate { pick: usize },
    /// The engine sends a full snapshot.
    Snapshot,
    /// An old snapshot arrives again.
    StaleSnapshot,
    /// A VM of `size` steps is scheduled, `count` instances; `again`
    /// re-schedules a VM that is still starting.
    Schedule {
        size: u32,
        count: u32,
        best_effort: bool,
        again: Option<usize>,
    },
    /// A starting VM started: the engine confirms its claim.
    Confirm { pick: usize },
    /// A starting VM failed to start: the engine releases its claim.
    Release { pick: usize },
    /// Time passes.
    Tick { secs: u64 },
    /// A host leaves the cluster, or comes back empty.
    Toggle { host: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let hosts = 0..HOST_MEMORY_MIB.len();
    prop_oneof![
        4 => (hosts.clone(), any::<bool>()).prop_map(|(host, late)| Step::Report { host, late }),
        2 => (0..8usize).prop_map(|pick| Step::DeliverLate { pick }),
        1 => Just(Step::Snapshot),
        1 => Just(Step::StaleSnapshot),
        6 => (1..=6u32, 1..=3u32, any::<bool>(), proptest::option::of(0..8usize)).prop_map(
            |(size, count, best_effort, again)| Step::Schedule {
                size,
                count,
                best_effort,
                again,
            }
        ),
        3 => (0..8usize).prop_map(|pick| Step::Confirm { pick }),
        2 => (0..8usize).prop_map(|pick| Step::Release { pick }),
        2 => (1..90u64).prop_map(|secs| Step::Tick { secs }),
        1 => hosts.prop_map(|host| Step::Toggle { host }),
    ]
}

/// A VM as the engine knows it.
#[derive(Clone, Debug)]
struct EngineVm {
    host: String,
    memory_mib: f64,
    running: bool,
}

/// The engine: the truth the test checks Sandpiper against.
struct World {
    state: ClusterState,
    generation: u64,
    present: Vec<bool>,
    vms: BTreeMap<String, EngineVm>,
    late: Vec<HostUpdate>,
    now: Timestamp,
    next_vm: u32,
}

fn host_id(index: usize) -> String {
    format!("h{index}")
}

impl World {
    fn new() -> World {
        let mut world = World {
            state: ClusterState::new(),
            generation: 0,
            present: vec![true; HOST_MEMORY_MIB.len()],
            vms: BTreeMap::new(),
            late: Vec::new(),
            now: Timestamp(1_000_000),
            next_vm: 0,
        };
        world.snapshot();
        world
    }

    /// The host as the engine would report it now: usage of its running
    /// VMs only (starting ones are Sandpiper's claims until confirmed and
    /// reported).
    fn report(&self, index: usize) -> Host {
        let id = host_id(index);
        let used: f64 = self
            .vms
            .values()
            .filter(|v| v.running && v.host == id)
            .map(|v| v.memory_mib)
            .sum();
        let total = HOST_MEMORY_MIB[index];
        Host {
            id,
            metrics: [
                ("memory_total_mib", total),
                ("memory_free_mib", total - used),
                ("memory_committed_mib", used),
                ("cpu_cores", 16.0),
                ("cpu_threads", 32.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
            ..Host::default()
        }
    }

    fn running_on(&self, id: &str) -> Vec<RunningVm> {
        self.vms
            .iter()
            .filter(|(_, v)| v.running && v.host == id)
            .map(|(vm_id, v)| RunningVm {
                id: vm_id.clone(),
                name: None,
                host: id.to_owned(),
                memory_mib: v.memory_mib,
                memory_guaranteed_mib: None,
                vcpus: 1,
                cpu_usage_percent: 0.0,
                migratable: true,
                highly_available: false,
                hosted_engine: false,
                pending: false,
            })
            .collect()
    }

    fn snapshot(&mut self) {
        self.generation += 1;
        let present: Vec<usize> = (0..HOST_MEMORY_MIB.len())
            .filter(|&i| self.present[i])
            .collect();
        let snapshot = Snapshot {
            hosts: present.iter().map(|&i| self.report(i)).collect(),
            vms: present
                .iter()
                .flat_map(|&i| self.running_on(&host_id(i)))
                .collect(),
        };
        self.state
            .replace_snapshot(self.generation, snapshot)
            .unwrap_or_else(|e| panic!("a fresh snapshot applies: {e}"));
        // Reports from before the snapshot can still arrive; they are stale.
    }

    fn deliver(&mut self, update: HostUpdate) {
        let (results, _) = self
            .state
            .apply_updates(vec![update])
            .unwrap_or_else(|e| panic!("a valid report applies: {e}"));
        assert_eq!(results.len(), 1);
    }

    fn starting(&self) -> Vec<String> {
        self.vms
            .iter()
            .filter(|(_, v)| !v.running)
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Report { host, late } => {
                if !self.present[host] {
                    return;
                }
                self.generation += 1;
                let id = host_id(host);
                let update = HostUpdate::Upsert {
                    generation: self.generation,
                    host: self.report(host),
                    vms: Some(self.running_on(&id)),
                };
                if late {
                    self.late.push(update);
                } else {
                    self.deliver(update);
                }
            }
            Step::DeliverLate { pick } => {
                if !self.late.is_empty() {
                    let update = self.late.remove(pick % self.late.len());
                    self.deliver(update);
                }
            }
            Step::Snapshot => self.snapshot(),
            Step::StaleSnapshot => {
                let stale = self.state.replace_snapshot(1, Snapshot::default());
                assert!(
                    matches!(stale, Err(InventoryError::StaleSnapshot { .. })),
                    "a stale snapshot is refused: {stale:?}"
                );
            }
            Step::Schedule {
                size,
                count,
                best_effort,
                again,
            } => self.schedule(size, count, best_effort, again),
            Step::Confirm { pick } => {
                let starting = self.starting();
                if starting.is_empty() {
                    return;
                }
                let vm_id = starting[pick % starting.len()].clone();
                // Reports the engine sends from now on count the VM.
                let covered_from = self.generation + 1;
                self.state
                    .confirm(&vm_id, Some(covered_from))
                    .unwrap_or_else(|e| panic!("a starting VM has a claim: {e}"));
                if let Some(vm) = self.vms.get_mut(&vm_id) {
                    vm.running = true;
                }
            }
            Step::Release { pick } => {
                let starting = self.starting();
                if starting.is_empty() {
                    return;
                }
                let vm_id = starting[pick % starting.len()].clone();
                self.state
                    .release(&vm_id)
                    .unwrap_or_else(|e| panic!("a starting VM has a claim: {e}"));
                self.vms.remove(&vm_id);
            }
            Step::Tick { secs } => {
                self.now = self.now.after(Duration::from_secs(secs));
                let (expired, _) = self.state.expire(self.now);
                for claim in expired {
                    let vm = self.vms.remove(&claim.vm_id);
                    assert!(
                        vm.is_some_and(|v| !v.running),
                        "only starting VMs' claims expire: {}",
                        claim.vm_id
                    );
                }
            }
            Step::Toggle { host } => {
                self.generation += 1;
                let id = host_id(host);
                if self.present[host] {
                    self.present[host] = false;
                    self.vms.retain(|_, v| v.host != id);
                    self.deliver(HostUpdate::Remove {
                        generation: self.generation,
                        host_id: id,
                    });
                } else {
                    self.present[host] = true;
                    let update = HostUpdate::Upsert {
                        generation: self.generation,
                        host: self.report(host),
                        vms: Some(Vec::new()),
                    };
                    self.deliver(update);
                }
            }
        }
    }

    fn schedule(&mut self, size: u32, count: u32, best_effort: bool, again: Option<usize>) {
        let memory = f64::from(size) * VM_MEMORY_STEP_MIB;
        let starting = self.starting();
        let id = match again {
            Some(pick) if count == 1 && !starting.is_empty() => {
                starting[pick % starting.len()].clone()
            }
            _ => {
                self.next_vm += 1;
                format!("vm{}", self.next_vm)
            }
        };
        let request = PlaceRequest {
            vm: VmSpec {
                id: id.clone(),
                memory_mib: memory,
                ..VmSpec::default()
            },
            count,
            mode: if best_effort {
                Mode::BestEffort
            } else {
                Mode::AllOrNothing
            },
            ..PlaceRequest::default()
        };
        let params = ParamValues::new();
        let cx = PlaceContext {
            policy: &POLICY,
            params: &params,
            decision_id: Uuid::new_v4(),
            now: self.now,
            claim_ttl: CLAIM_TTL,
            hold_deadline: None,
            dry_run: false,
            sampling: Sampling::Adaptive,
            reuse_answers: true,
            cores: None,
        };
        let (outcome, _) = self
            .state
            .place(&request, &cx)
            .unwrap_or_else(|e| panic!("the decision is made: {e}"));
        // Expiry ran first: forget VMs whose claims are gone.
        let claimed: Vec<String> = self
            .state
            .claims()
            .iter()
            .map(|c| c.vm_id.clone())
            .collect();
        self.vms.retain(|id, v| v.running || claimed.contains(id));

        for pick in &outcome.picks {
            if pick.host_id.is_none() {
                let explain = &pick.decision.explain;
                let rejected: usize = explain
                    .rejections()
                    .iter()
                    .map(|(_, _, hosts)| hosts.len())
                    .sum();
                assert_eq!(
                    rejected, explain.candidates,
                    "a pick without a host names a reason for every candidate"
                );
            }
        }
        if !outcome.complete && !best_effort {
            assert!(outcome.claims.is_empty(), "all or nothing claims nothing");
        }
        assert_eq!(
            outcome.claims.len(),
            if outcome.complete || best_effort {
                outcome.picks.iter().filter(|p| p.host_id.is_some()).count()
            } else {
                0
            }
        );
        for claim in &outcome.claims {
            self.vms.insert(
                claim.vm_id.clone(),
                EngineVm {
                    host: claim.host_id.clone(),
                    memory_mib: memory,
                    running: false,
                },
            );
        }
    }

    /// The invariants, checked against the engine's truth.
    fn check(&self) {
        for (index, &total) in HOST_MEMORY_MIB.iter().enumerate() {
            let id = host_id(index);
            let on_host: f64 = self
                .vms
                .values()
                .filter(|v| v.host == id)
                .map(|v| v.memory_mib)
                .sum();
            assert!(
                on_host <= total,
                "host {id} holds {on_host} MiB of VMs but has {total} MiB: {:?}",
                self.vms
            );
        }
        for vm_id in self.starting() {
            let claim = self.state.claims().get(&vm_id);
            assert!(
                claim.is_some_and(
                    |c| c.state == ClaimState::Pending && c.host_id == self.vms[&vm_id].host
                ),
                "starting VM {vm_id} holds its claim: {claim:?}"
            );
        }
        for claim in self.state.claims().iter() {
            let vm = self.vms.get(&claim.vm_id);
            assert!(
                vm.is_some_and(|v| v.host == claim.host_id),
                "claim {claim:?} belongs to a VM placed there"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_interleaving_overcommits_a_host(steps in proptest::collection::vec(step(), 1..60)) {
        let mut world = World::new();
        for step in &steps {
            world.apply(step);
            world.check();
        }
    }
}

/// A fixed history that needs every rule at once: a late report that
/// predates a confirmation must not drop the confirmed VM's claim, and the
/// host must still refuse a VM that would not fit.
#[test]
fn a_late_report_does_not_uncount_a_confirmed_vm() {
    let mut world = World::new();
    world.apply(&Step::Report {
        host: 3,
        late: true,
    });
    world.apply(&Step::Schedule {
        size: 4,
        count: 1,
        best_effort: false,
        again: None,
    });
    let placed = world.vms.values().next().map(|v| v.host.clone());
    world.apply(&Step::Confirm { pick: 0 });
    world.apply(&Step::DeliverLate { pick: 0 });
    world.check();
    // Fill everything; nothing may land beyond capacity.
    for _ in 0..20 {
        world.apply(&Step::Schedule {
            size: 4,
            count: 1,
            best_effort: false,
            again: None,
        });
        world.check();
    }
    assert!(placed.is_some());
}
