//! Incremental decisions are exact: a cluster that reuses per-host units'
//! answers between decisions decides exactly as one that asks every unit
//! about every candidate, whatever happens in between.
//!
//! Two `ClusterState`s, one reusing and one not, go through the same random
//! history: host reports (numbers, status), full snapshots, hosts leaving
//! and coming back, schedules of one or two instances in four request
//! shapes (a hint, an extra spec, an affinity group), dry runs,
//! confirmations and releases, over every built-in policy composed of the
//! built-in units (built natively from the same source as their
//! components, for speed), sampling every host or windows of four. After
//! every decision the two must agree on every pick, every ranked total (bit
//! for bit), every filter's rejections and every raw score.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use sandpiper::arrow_snapshot::write;
use sandpiper::builtin::{BuiltinPolicy, POLICY_FILES, UNITS};
use sandpiper::inputs::build_checked;
use sandpiper::pipeline::{Combination, Decision, OnFailure, ParamValues, Policy, ReuseCache};
use sandpiper::placement::{
    ClaimState, ClusterState, HostUpdate, InlineReuse, Mode, PlaceContext, PlaceOutcome,
    PlaceRequest, Sampling, Timestamp, over_cluster,
};
use sandpiper::snapshot::{Group, HintValue, Host, RunningVm, Scope, Snapshot, Status, VmSpec};
use sandpiper::unit::Unit;
use uuid::Uuid;

const HOSTS: usize = 12;

/// How the units of the policies under test are built.
#[derive(Clone, Copy, Debug)]
enum Build {
    /// Natively from their source: fast, but a native call's reads are
    /// unseen, so every answer counts as depending on the claims.
    Native,
    /// The embedded components, sandboxed: the calls' reads are recorded,
    /// so answers that did not read what claims change outlive claims.
    Sandboxed,
}

/// Nova's policy with its units sandboxed, so their reads are recorded.
fn sandboxed_nova() -> &'static Policy {
    let (_, policy) = (policies(Build::Sandboxed).iter())
        .find(|(name, _)| name == "nova")
        .expect("Nova's policy");
    policy
}

/// Every built-in policy and Nova's (RamFilter, ComputeFilter,
/// ComputeCapabilitiesFilter, RAMWeigher), composed of the built-in units
/// built as `build` says.
fn policies(build: Build) -> &'static [(String, Policy)] {
    static NATIVE: OnceLock<Vec<(String, Policy)>> = OnceLock::new();
    static SANDBOXED: OnceLock<Vec<(String, Policy)>> = OnceLock::new();
    let cell = match build {
        Build::Native => &NATIVE,
        Build::Sandboxed => &SANDBOXED,
    };
    cell.get_or_init(|| {
        let runtime = sandpiper_tests::shared_runtime();
        let units: HashMap<String, Arc<dyn Unit>> = UNITS
            .iter()
            .map(|builtin| {
                let unit: Arc<dyn Unit> = match build {
                    Build::Native => Arc::new(builtin.native()),
                    Build::Sandboxed => runtime
                        .load(builtin.wasm)
                        .unwrap_or_else(|e| panic!("{} loads: {e}", builtin.package)),
                };
                (unit.info().name.clone(), unit)
            })
            .collect();
        let mut policies: Vec<(String, Policy)> = POLICY_FILES
            .iter()
            .map(|(file, json)| {
                let spec = BuiltinPolicy::parse(file, json).unwrap_or_else(|e| panic!("{e}"));
                let mut builder = Policy::builder()
                    .combination(spec.mode)
                    .params(spec.properties.clone());
                for filter in &spec.filters {
                    builder = builder.filter_with(
                        Arc::clone(&units[&filter.unit]),
                        filter.position,
                        OnFailure::FailClosed,
                    );
                }
                for weight in &spec.weights {
                    builder = builder.score(Arc::clone(&units[&weight.unit]), weight.factor);
                }
                if let Some(name) = &spec.balance {
                    builder = builder.balance(Arc::clone(&units[name]));
                }
                let policy = builder
                    .build()
                    .unwrap_or_else(|e| panic!("{file} composes: {e}"));
                (spec.name, policy)
            })
            .collect();
        let nova = Policy::builder()
            .combination(Combination::Normalised)
            .filter(Arc::clone(&units["RamFilter"]))
            .filter(Arc::clone(&units["ComputeFilter"]))
            .filter(Arc::clone(&units["ComputeCapabilitiesFilter"]))
            .score(Arc::clone(&units["RAMWeigher"]), 1)
            .build()
            .unwrap_or_else(|e| panic!("Nova's policy composes: {e}"));
        policies.push(("nova".to_owned(), nova));
        policies
    })
}

#[derive(Clone, Debug)]
enum Step {
    /// A host reports new numbers (and maybe a new status).
    Report {
        host: usize,
        seed: u32,
    },
    Snapshot,
    /// A host leaves, or comes back.
    Toggle {
        host: usize,
    },
    Schedule {
        shape: usize,
        count: u32,
        dry_run: bool,
    },
    Confirm {
        pick: usize,
    },
    Release {
        pick: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..HOSTS, any::<u32>()).prop_map(|(host, seed)| Step::Report { host, seed }),
        1 => Just(Step::Snapshot),
        1 => (0..HOSTS).prop_map(|host| Step::Toggle { host }),
        8 => (0..4usize, 1..=2u32, any::<bool>()).prop_map(|(shape, count, dry_run)| {
            Step::Schedule { shape, count, dry_run }
        }),
        2 => (0..16usize).prop_map(|pick| Step::Confirm { pick }),
        1 => (0..16usize).prop_map(|pick| Step::Release { pick }),
    ]
}

/// Host `index` as reported with `seed`: a little of everything the
/// built-in units read.
fn report(index: usize, seed: u32) -> Host {
    let mix = |k: u32| (seed.wrapping_mul(2_654_435_761).rotate_left(k) ^ index as u32) % 100;
    let total = 8_192.0 * f64::from(1 + mix(3) % 8);
    let free = total * f64::from(mix(7)) / 100.0;
    let mut host = Host {
        id: format!("h{index}"),
        address: format!("h{index}.example.com"),
        status: if mix(11) < 8 {
            Status::Maintenance
        } else {
            Status::Up
        },
        networks: vec!["ovirtmgmt".to_owned()],
        ..Host::default()
    };
    host.capabilities.insert(
        "hypervisor_type".to_owned(),
        if index.is_multiple_of(3) {
            "Xen"
        } else {
            "QEMU"
        }
        .to_owned(),
    );
    for (metric, value) in [
        ("cpu_sockets", 2.0),
        ("cpu_cores", f64::from(2 + mix(13) % 30)),
        ("cpu_threads", 64.0),
        ("cpu_usage_percent", f64::from(mix(17))),
        ("cpu_overloaded_minutes", f64::from(mix(19) % 4)),
        ("memory_total_mib", total),
        ("memory_free_mib", free),
        ("memory_committed_mib", total - free),
        ("disk_total_gib", 1_000.0),
        ("disk_free_gib", f64::from(mix(23)) * 10.0),
        ("vm_count", f64::from(mix(29) % 10)),
        ("vcpus_used", f64::from(mix(31) % 40)),
    ] {
        host.metrics.insert(metric.to_owned(), value);
    }
    host
}

/// One of four request shapes, for VM `id`.
fn request(shape: usize, id: &str, count: u32) -> PlaceRequest {
    let mut vm = VmSpec {
        id: id.to_owned(),
        memory_mib: [1_024.0, 4_096.0, 2_048.0, 3_072.0][shape],
        vcpus: [1, 2, 4, 1][shape],
        ..VmSpec::default()
    };
    let mut request = PlaceRequest {
        count,
        mode: Mode::BestEffort,
        ..PlaceRequest::default()
    };
    match shape {
        1 => {
            request.hints.insert(
                "different_host".to_owned(),
                HintValue::One("nobody".to_owned()),
            );
        }
        2 => {
            vm.extra_specs
                .insert("capabilities:hypervisor_type".to_owned(), "QEMU".to_owned());
        }
        3 => vm.groups.push(Group {
            id: "g".to_owned(),
            name: "g".to_owned(),
            scope: Scope::Vms,
            positive: false,
            enforcing: false,
            priority: 1.0,
            hosts: vec!["h1".to_owned(), "h2".to_owned()],
        }),
        _ => {}
    }
    request.vm = vm;
    request
}

/// The two clusters and the engine's view of them.
struct Twins {
    reusing: ClusterState,
    whole: ClusterState,
    seeds: [u32; HOSTS],
    present: [bool; HOSTS],
    generation: u64,
    next_vm: u32,
    /// Answers reused over the run, to show the test exercises reuse.
    reused: usize,
}

impl Twins {
    fn new() -> Twins {
        let mut twins = Twins {
            reusing: ClusterState::new(),
            whole: ClusterState::new(),
            seeds: std::array::from_fn(|i| i as u32),
            present: [true; HOSTS],
            generation: 0,
            next_vm: 0,
            reused: 0,
        };
        twins.snapshot();
        twins
    }

    fn both(&mut self, f: impl Fn(&mut ClusterState)) {
        f(&mut self.reusing);
        f(&mut self.whole);
    }

    fn snapshot(&mut self) {
        self.generation += 1;
        let snapshot = Snapshot {
            hosts: (0..HOSTS)
                .filter(|&i| self.present[i])
                .map(|i| report(i, self.seeds[i]))
                .collect(),
            vms: Vec::new(),
        };
        let generation = self.generation;
        self.both(|state| {
            state
                .replace_snapshot(generation, snapshot.clone())
                .unwrap_or_else(|e| panic!("a fresh snapshot applies: {e}"));
        });
    }

    fn update(&mut self, update: HostUpdate) {
        self.both(|state| {
            state
                .apply_updates(vec![update.clone()])
                .unwrap_or_else(|e| panic!("a valid report applies: {e}"));
        });
    }

    fn apply(&mut self, step: &Step, policy: &Policy, sampling: Sampling) {
        match *step {
            Step::Report { host, seed } => {
                if !self.present[host] {
                    return;
                }
                self.seeds[host] = seed;
                self.generation += 1;
                self.update(HostUpdate::Upsert {
                    generation: self.generation,
                    host: report(host, seed),
                    vms: None,
                });
            }
            Step::Snapshot => self.snapshot(),
            Step::Toggle { host } => {
                self.generation += 1;
                self.present[host] = !self.present[host];
                let update = if self.present[host] {
                    HostUpdate::Upsert {
                        generation: self.generation,
                        host: report(host, self.seeds[host]),
                        vms: Some(Vec::new()),
                    }
                } else {
                    HostUpdate::Remove {
                        generation: self.generation,
                        host_id: format!("h{host}"),
                    }
                };
                self.update(update);
            }
            Step::Schedule {
                shape,
                count,
                dry_run,
            } => self.schedule(policy, sampling, shape, count, dry_run),
            Step::Confirm { pick } | Step::Release { pick } => {
                let starting = pending(&self.reusing);
                assert_eq!(starting, pending(&self.whole), "the same claims");
                if starting.is_empty() {
                    return;
                }
                let vm_id = starting[pick % starting.len()].clone();
                let confirm = matches!(step, Step::Confirm { .. });
                self.both(|state| {
                    let done = if confirm {
                        state.confirm(&vm_id, None).map(|_| ())
                    } else {
                        state.release(&vm_id).map(|_| ())
                    };
                    done.unwrap_or_else(|e| panic!("{vm_id} has a claim: {e}"));
                });
            }
        }
    }

    fn schedule(
        &mut self,
        policy: &Policy,
        sampling: Sampling,
        shape: usize,
        count: u32,
        dry_run: bool,
    ) {
        if !self.present.iter().any(|&p| p) {
            return;
        }
        self.next_vm += 1;
        let request = request(shape, &format!("vm{}", self.next_vm), count);
        let params = ParamValues::new();
        let decision_id = Uuid::new_v4();
        let place = |state: &mut ClusterState, reuse_answers: bool| {
            let cx = PlaceContext {
                policy,
                params: &params,
                decision_id,
                now: Timestamp(1_000_000),
                claim_ttl: Duration::from_secs(3_600),
                hold_deadline: None,
                dry_run,
                sampling,
                reuse_answers,
                cores: None,
            };
            state.place(&request, &cx).map(|(outcome, _)| outcome)
        };
        let reusing = place(&mut self.reusing, true);
        let whole = place(&mut self.whole, false);
        let (reusing, whole) = match (reusing, whole) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "both fail alike");
                return;
            }
            (a, b) => panic!("one decided, one did not: {a:?} / {b:?}"),
        };
        self.reused += same_outcome(&reusing, &whole);
    }
}

/// The VMs with pending claims, sorted.
fn pending(state: &ClusterState) -> Vec<String> {
    let mut ids: Vec<String> = state
        .claims()
        .iter()
        .filter(|c| c.state == ClaimState::Pending)
        .map(|c| c.vm_id.clone())
        .collect();
    ids.sort();
    ids
}

/// Asserts two outcomes are the same decision; returns the answers the
/// reusing one reused.
fn same_outcome(reusing: &PlaceOutcome, whole: &PlaceOutcome) -> usize {
    assert_eq!(reusing.complete, whole.complete);
    assert_eq!(reusing.claims, whole.claims, "the same claims");
    assert_eq!(reusing.picks.len(), whole.picks.len());
    let mut reused = 0;
    for (a, b) in reusing.picks.iter().zip(&whole.picks) {
        assert_eq!(a.host_id, b.host_id, "the same host for {}", a.vm_id);
        reused += same_decision(&a.decision, &b.decision);
    }
    reused
}

fn same_decision(a: &Decision, b: &Decision) -> usize {
    let totals = |d: &Decision| -> Vec<(u32, u64)> {
        d.ranked
            .iter()
            .map(|r| (r.host, r.total.to_bits()))
            .collect()
    };
    assert_eq!(totals(a), totals(b), "the same ranking, bit for bit");
    let (ea, eb) = (&a.explain, &b.explain);
    assert_eq!(ea.filters.len(), eb.filters.len());
    let mut reused = 0;
    for (fa, fb) in ea.filters.iter().zip(&eb.filters) {
        assert_eq!(fa.unit, fb.unit);
        assert_eq!(
            (fa.input, fa.survivors),
            (fb.input, fb.survivors),
            "{}",
            fa.unit
        );
        let by_host = |f: &sandpiper::pipeline::FilterRecord| -> BTreeMap<u32, String> {
            f.sentences()
                .into_iter()
                .flat_map(|r| r.hosts.into_iter().map(move |h| (h, r.reason.clone())))
                .collect()
        };
        assert_eq!(by_host(fa), by_host(fb), "{} rejects alike", fa.unit);
        assert_eq!(fb.reused, 0, "the whole cluster reuses nothing");
        reused += fa.reused;
    }
    assert_eq!(ea.scored, eb.scored);
    for (sa, sb) in ea.scores.iter().zip(&eb.scores) {
        assert_eq!(sa.unit, sb.unit);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&sa.raw), bits(&sb.raw), "{} scores alike", sa.unit);
        assert_eq!((sa.floor, sa.ceiling), (sb.floor, sb.ceiling));
        reused += sa.reused;
    }
    reused
}

fn run(steps: &[Step], policy: &Policy, sampling: Sampling) -> usize {
    let mut twins = Twins::new();
    for step in steps {
        twins.apply(step, policy, sampling);
    }
    twins.reused
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reusing_answers_never_changes_a_decision(
        steps in proptest::collection::vec(step(), 1..50),
        policy in 0..=POLICY_FILES.len(),
        window in any::<bool>(),
    ) {
        let (_, policy) = &policies(Build::Native)[policy];
        let sampling = if window { Sampling::AtMost(4) } else { Sampling::All };
        run(&steps, policy, sampling);
    }
}

proptest! {
    // Sandboxed calls cost tens of microseconds each; fewer cases.
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// The same with the embedded components, whose recorded reads let
    /// answers outlive claims: still exactly the whole decision.
    #[test]
    fn reusing_sandboxed_answers_never_changes_a_decision(
        steps in proptest::collection::vec(step(), 1..50),
        policy in 0..=POLICY_FILES.len(),
        window in any::<bool>(),
    ) {
        let (_, policy) = &policies(Build::Sandboxed)[policy];
        let sampling = if window { Sampling::AtMost(4) } else { Sampling::All };
        run(&steps, policy, sampling);
    }
}

/// The property above would pass vacuously if nothing were reused: a
/// fixed history in which every policy reuses answers.
#[test]
fn every_default_policy_reuses_answers_in_a_steady_stream() {
    let steps: Vec<Step> = (0..24)
        .flat_map(|i| {
            [
                Step::Schedule {
                    shape: i % 2,
                    count: 1,
                    dry_run: false,
                },
                Step::Report {
                    host: i % HOSTS,
                    seed: 99 + i as u32,
                },
            ]
        })
        .collect();
    for (name, policy) in policies(Build::Native) {
        for sampling in [Sampling::All, Sampling::AtMost(4)] {
            let reused = run(&steps, policy, sampling);
            let per_host = policy.has_per_host_units();
            assert_eq!(
                reused > 0,
                per_host,
                "{name} ({sampling:?}): {reused} answers reused; a per-host unit: {per_host}"
            );
        }
    }
}

/// A claim changes what a unit can read about the host placed on only in
/// the usage and VM columns. Nova's `ComputeFilter` and
/// `ComputeCapabilitiesFilter` (sandboxed, so their reads are recorded)
/// read neither, so the next decision of the same shape asks them nothing;
/// `RamFilter`, which reads free memory, is asked again about the claimed
/// host alone.
#[test]
fn a_claim_leaves_answers_that_never_read_claims() {
    let policy = sandboxed_nova();
    let twins = Twins::new();
    let mut state = twins.reusing;
    let params = ParamValues::new();
    let mut place = |id: &str| {
        let cx = PlaceContext {
            policy,
            params: &params,
            decision_id: Uuid::new_v4(),
            now: Timestamp(1_000_000),
            claim_ttl: Duration::from_secs(3_600),
            hold_deadline: None,
            dry_run: false,
            sampling: Sampling::All,
            reuse_answers: true,
            cores: None,
        };
        let (outcome, _) = state
            .place(&request(2, id, 1), &cx)
            .unwrap_or_else(|e| panic!("{id} is placed: {e}"));
        assert!(outcome.complete, "{id} is placed");
        outcome.picks.into_iter().next().expect("one pick").decision
    };
    place("vm1");
    let second = place("vm2");
    let reused: BTreeMap<&str, (usize, usize)> = second
        .explain
        .filters
        .iter()
        .map(|f| (f.unit.as_str(), (f.reused, f.input)))
        .collect();
    let (ram, ram_input) = reused["RamFilter"];
    assert_eq!(ram, ram_input - 1, "RamFilter asked about the claimed host");
    for unit in ["ComputeFilter", "ComputeCapabilitiesFilter"] {
        let (reused, input) = reused[unit];
        assert_eq!(reused, input, "{unit} asked nothing");
    }
}

/// Hosts sent inline with each decision carry no stamp from a report:
/// their answers are reused when a host is sent again with the same
/// content (`pipeline::content_stamps`), and outlive a change to columns
/// their calls did not read. The engine's hosts change between decisions
/// (new numbers, one column at a time or all at once, VMs started and
/// stopped, hosts leaving and coming back, so rows shift), and each
/// decision is made twice over
/// the same body: reusing the cluster's kept answers, and whole. Most
/// bodies are compact (their columns kept for the next to share, and
/// their fingerprint shares with them); some are JSON, hashed whole and
/// keeping nothing.
#[derive(Clone, Debug)]
enum InlineStep {
    Report {
        host: usize,
        seed: u32,
    },
    /// One column of a host's report changes ([`tweak`]).
    Column {
        host: usize,
        column: usize,
        seed: u32,
    },
    Vms {
        host: usize,
        seed: u32,
    },
    Toggle {
        host: usize,
    },
    Decide {
        shape: usize,
        json: bool,
    },
}

fn inline_step() -> impl Strategy<Value = InlineStep> {
    prop_oneof![
        3 => (0..HOSTS, any::<u32>()).prop_map(|(host, seed)| InlineStep::Report { host, seed }),
        3 => (0..HOSTS, 0..COLUMNS, any::<u32>())
            .prop_map(|(host, column, seed)| InlineStep::Column { host, column, seed }),
        2 => (0..HOSTS, any::<u32>()).prop_map(|(host, seed)| InlineStep::Vms { host, seed }),
        1 => (0..HOSTS).prop_map(|host| InlineStep::Toggle { host }),
        6 => (0..4usize, proptest::bool::weighted(0.25))
            .prop_map(|(shape, json)| InlineStep::Decide { shape, json }),
    ]
}

/// How many columns [`tweak`] changes.
const COLUMNS: usize = 6;

/// Changes column `column` of `host`'s report alone, by `seed`: its free
/// memory, CPU usage, free disk, status, hypervisor type (a capability
/// text) or a named metric.
fn tweak(host: &mut Host, column: usize, seed: u32) {
    let mut metric = |name: &str, value: f64| {
        host.metrics.insert(name.to_owned(), value);
    };
    match column {
        0 => metric("memory_free_mib", f64::from(seed % 65_536)),
        1 => metric("cpu_usage_percent", f64::from(seed % 101)),
        2 => metric("disk_free_gib", f64::from(seed % 1_000)),
        3 => {
            host.status = [Status::Up, Status::Maintenance, Status::Down][seed as usize % 3];
        }
        4 => {
            let hypervisor = ["QEMU", "Xen", "kvm"][seed as usize % 3];
            host.capabilities
                .insert("hypervisor_type".to_owned(), hypervisor.to_owned());
        }
        _ => {
            host.named_metrics
                .insert("tweaked".to_owned(), f64::from(seed % 5));
        }
    }
}

/// The VMs host `index` runs with `seed`: none to two, with a label
/// (named metric) on the host that changes with them.
fn running_vms(index: usize, seed: u32) -> Vec<RunningVm> {
    (0..seed % 3)
        .map(|k| RunningVm {
            id: format!("r{index}-{seed}-{k}"),
            name: None,
            host: format!("h{index}"),
            memory_mib: f64::from(512 * (1 + (seed >> k) % 4)),
            memory_guaranteed_mib: None,
            vcpus: 1 + (seed >> (k + 2)) % 4,
            cpu_usage_percent: f64::from((seed >> k) % 100),
            migratable: true,
            highly_available: k == 1,
            hosted_engine: false,
            pending: false,
        })
        .collect()
}

/// Runs `steps` with `policy`; returns the answers reused. The decision
/// reusing answers is sent its hosts as a compact body, built over the
/// last one (`ArrowHosts::build_reusing`, as the server builds a
/// cluster's compact bodies); the whole one as JSON, built afresh.
fn run_inline(steps: &[InlineStep], policy: &Policy) -> usize {
    let mut seeds: [u32; HOSTS] = std::array::from_fn(|i| i as u32);
    // Each host's columns changed since its last report, by seed.
    let mut tweaks: [[Option<u32>; COLUMNS]; HOSTS] = [[None; COLUMNS]; HOSTS];
    let mut vm_seeds = [0u32; HOSTS];
    let mut present = [true; HOSTS];
    let mut kept = ReuseCache::default();
    let mut last_body = None;
    let params = ParamValues::new();
    let mut reused = 0;
    for step in steps {
        match *step {
            InlineStep::Report { host, seed } => {
                seeds[host] = seed;
                tweaks[host] = [None; COLUMNS];
            }
            InlineStep::Column { host, column, seed } => tweaks[host][column] = Some(seed),
            InlineStep::Vms { host, seed } => vm_seeds[host] = seed,
            InlineStep::Toggle { host } => present[host] = !present[host],
            InlineStep::Decide { shape, json } => {
                let hosts: Vec<usize> = (0..HOSTS).filter(|&i| present[i]).collect();
                let snapshot = Snapshot {
                    hosts: hosts
                        .iter()
                        .map(|&i| {
                            let mut host = report(i, seeds[i]);
                            host.named_metrics
                                .insert("vms.seed".to_owned(), f64::from(vm_seeds[i] % 7));
                            for (column, seed) in tweaks[i].iter().enumerate() {
                                if let Some(seed) = *seed {
                                    tweak(&mut host, column, seed);
                                }
                            }
                            host
                        })
                        .collect(),
                    vms: hosts
                        .iter()
                        .flat_map(|&i| running_vms(i, vm_seeds[i]))
                        .collect(),
                };
                let request = request(shape, "vm", 1);
                // A JSON body is built afresh and leaves the last compact
                // body as it was, as the server does.
                let (reusing_cluster, columns_kept) = if json {
                    let cluster = build_checked(&snapshot).expect("the engine's hosts are valid");
                    (cluster, false)
                } else {
                    let (hosts, vms) = write(&snapshot).expect("compact").read().expect("decoded");
                    let over_last = hosts
                        .build_reusing(vms, &mut last_body)
                        .expect("the engine's hosts are valid");
                    (over_last, true)
                };
                let reuse = InlineReuse {
                    cache: &mut kept,
                    columns_kept,
                };
                let reusing = over_cluster(
                    reusing_cluster,
                    &request,
                    policy,
                    &params,
                    None,
                    Some(reuse),
                );
                let cluster = build_checked(&snapshot).expect("the engine's hosts are valid");
                let whole = over_cluster(cluster, &request, policy, &params, None, None);
                match (reusing, whole) {
                    (Ok(a), Ok(b)) => reused += same_outcome(&a, &b),
                    (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                    (a, b) => panic!("one decided, one did not: {a:?} / {b:?}"),
                }
            }
        }
    }
    reused
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn reusing_answers_over_inline_hosts_never_changes_a_decision(
        steps in proptest::collection::vec(inline_step(), 1..40),
        policy in 0..=POLICY_FILES.len(),
        sandboxed in proptest::bool::weighted(0.25),
    ) {
        let build = if sandboxed { Build::Sandboxed } else { Build::Native };
        let (_, policy) = &policies(build)[policy];
        run_inline(&steps, policy);
    }
}

/// Not vacuous: hosts sent again unchanged are not asked again, and a
/// host that changed is, whatever row it is sent in.
#[test]
fn inline_hosts_sent_again_unchanged_reuse_answers() {
    let decide = InlineStep::Decide {
        shape: 0,
        json: false,
    };
    let steps = [
        decide.clone(),
        decide.clone(),
        InlineStep::Report { host: 3, seed: 77 },
        InlineStep::Decide {
            shape: 0,
            json: true,
        },
        decide.clone(),
        InlineStep::Column {
            host: 4,
            column: 0,
            seed: 9,
        },
        decide.clone(),
        InlineStep::Vms { host: 5, seed: 4 },
        decide.clone(),
        InlineStep::Toggle { host: 0 },
        decide,
    ];
    for build in [Build::Native, Build::Sandboxed] {
        for (name, policy) in policies(build) {
            let reused = run_inline(&steps, policy);
            let per_host = policy.has_per_host_units();
            assert_eq!(
                reused > 0,
                per_host,
                "{name} ({build:?}): {reused} answers reused; a per-host unit: {per_host}"
            );
        }
    }
}

/// Over hosts sent inline, a host whose free memory alone changed is
/// asked again only by the units whose calls read free memory: Nova's
/// `RamFilter` and `RAMWeigher`. `ComputeFilter` and
/// `ComputeCapabilitiesFilter` (sandboxed, so their reads are recorded)
/// keep their answers for it, and the decision is the one made whole.
#[test]
fn an_inline_host_whose_free_memory_changed_is_asked_again_only_where_it_was_read() {
    let policy = sandboxed_nova();
    // An up QEMU host, with more free memory than any other both times,
    // so it passes every filter and is chosen.
    let changed = (0..HOSTS)
        .find(|&i| !i.is_multiple_of(3) && report(i, i as u32).status == Status::Up)
        .expect("an up QEMU host");
    let mut kept = ReuseCache::default();
    let mut last_body = None;
    let params = ParamValues::new();
    // Shape 2's extra spec makes ComputeCapabilitiesFilter apply.
    let request = request(2, "vm", 1);
    let mut decide = |free: f64| -> PlaceOutcome {
        let mut snapshot = Snapshot {
            hosts: (0..HOSTS).map(|i| report(i, i as u32)).collect(),
            vms: Vec::new(),
        };
        tweak(&mut snapshot.hosts[changed], 0, free as u32);
        let (hosts, vms) = write(&snapshot).expect("compact").read().expect("decoded");
        let cluster = hosts
            .build_reusing(vms, &mut last_body)
            .expect("the engine's hosts are valid");
        let reuse = InlineReuse {
            cache: &mut kept,
            columns_kept: true,
        };
        let reusing =
            over_cluster(cluster, &request, policy, &params, None, Some(reuse)).expect("decided");
        let cluster = build_checked(&snapshot).expect("the engine's hosts are valid");
        let whole = over_cluster(cluster, &request, policy, &params, None, None).expect("decided");
        same_outcome(&reusing, &whole);
        reusing
    };
    decide(60_000.0);
    let second = decide(50_000.0);
    let pick = &second.picks[0];
    assert_eq!(
        pick.host_id.as_deref(),
        Some(format!("h{changed}").as_str())
    );
    let explain = &pick.decision.explain;
    for filter in &explain.filters {
        let asked = filter.input - filter.reused;
        let expected = usize::from(filter.unit == "RamFilter");
        assert_eq!(asked, expected, "{} asked about {asked} hosts", filter.unit);
    }
    for score in &explain.scores {
        assert_eq!(score.unit, "RAMWeigher");
        assert_eq!(
            score.reused,
            explain.scored.len() - 1,
            "RAMWeigher asked again"
        );
    }
}
