//! What the queue's order costs and what it buys. docs/operations.md quotes
//! these figures.
//!
//! 1. **Picker speed**: `next` over 10,000 queued operations with 100
//!    running, every candidate of one priority and age 0 (so none can be
//!    passed over unjudged: the worst case), over 10,000 VMs and 1,000
//!    hosts so that most candidates are not blocked and all are weighed.
//!    Median of `PICK_RUNS` picks per order. Then the same with a
//!    reservation in force (`reserving=blocked_migration`): ages fall
//!    from 1,000 s with the submit order, so the oldest tenth is starving,
//!    and the oldest of all declares what a running migration declares
//!    (blocked, so it reserves, and every candidate not passed over is
//!    also checked against it).
//! 2. **Replay** of a contended workload, one line per seed. `OPS` (2,000)
//!    operations over `VMS` (200) VMs and `HOSTS` (50) hosts, arriving as
//!    a Poisson process (mean gap `ARRIVAL_GAP_S`), at most
//!    `RUNNING_LIMIT` (8) holding a slot:
//!    * 70 % migrations: the VM exclusive, source and destination
//!      `host_resources` exclusive;
//!    * 17 % starts: the VM exclusive, its host's `host_resources`
//!      exclusive;
//!    * 10 % placements by an engine that picks the host itself: the VM
//!      exclusive, `host_resources` `unknown_exclusive` (really one
//!      random host);
//!    * 2 % host maintenance: the host exclusive and its `host_resources`
//!      exclusive;
//!    * 1 % cluster-wide.
//!
//!    Durations are `MIN_DURATION_S` plus an exponential of mean
//!    `MEAN_EXTRA_S` (cluster-wide: `CLUSTER_DURATION_S`). With these the
//!    offered load is about 75 % of the slots' capacity before any waiting,
//!    so the queue drains but contention is real (two migrations meet on a
//!    host about half the time with 8 running).
//!
//!    Execution is Ganeti's: a leased operation whose *real* locks (its
//!    declaration with `unknown_*` resolved to the name it really takes)
//!    conflict with a running one, or with one leased before it and still
//!    waiting (the lock manager queues per lock), is WAITING: it holds
//!    its slot until it can take all its locks at once. Three orders:
//!    `fifo` (`Order::Fifo`: submit order, known conflicts skipped),
//!    `predictive` (`Order::Predictive`, the same skip), and
//!    `ganeti_fifo` (strict submit order, nothing skipped: Ganeti's queue
//!    before the predictive one). `fifo` and `predictive` reserve for the
//!    first starving candidate as `next` does. `wait` is submit → locks
//!    taken; `blocked_ticks` the slot-ticks spent WAITING, summed over
//!    operations; `max_wait_over_k_ticks` how far the longest predictive
//!    wait went past K; `over_k_plus_longest` how many predictive waits
//!    went past K plus the workload's longest duration (`longest_ticks`),
//!    the bound the reservation aims at when the queue is not overloaded.
//!    `load` is the seed's offered load with a cluster-wide operation
//!    counted as holding every slot (it runs alone): Σ slot-seconds asked
//!    / (slots × the last arrival), before any waiting or draining.
//!
//! Run with: `cargo bench --bench queue`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sandpiper_queue::{
    Candidate, Config, Level, Lock, Locks, Order, PRIORITY_DEFAULT, Running, STARVATION_TICKS,
    TICK, conflicts, next,
};

/// Queued operations in the picker benchmark.
const PICK_QUEUED: usize = 10_000;
/// Running operations in the picker benchmark.
const PICK_RUNNING: usize = 100;
/// Timed picks per order (the median is printed), after `PICK_WARMUP`.
const PICK_RUNS: usize = 51;
const PICK_WARMUP: usize = 5;
/// The brief's bar for one pick, in microseconds.
const PICK_GOAL_US: f64 = 1_000.0;

/// The replay's operations, VMs and hosts.
const OPS: usize = 2_000;
const VMS: usize = 200;
const HOSTS: usize = 50;
/// Slots: operations RUNNING or WAITING at once (Ganeti's
/// `max_running_jobs`, kept small so the queue matters).
const RUNNING_LIMIT: usize = 8;
/// Mean seconds between arrivals.
const ARRIVAL_GAP_S: f64 = 7.5;
/// An operation's duration: this floor plus an exponential of mean
/// `MEAN_EXTRA_S` (mean 45 s in all).
const MIN_DURATION_S: f64 = 10.0;
const MEAN_EXTRA_S: f64 = 35.0;
const CLUSTER_DURATION_S: f64 = 120.0;
/// Seeds of the replay: one printed line each.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

/// SplitMix64: a seeded generator, so every run replays the same workload.
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

fn named(names: &[String]) -> Lock {
    Lock::Exclusive(names.iter().cloned().collect::<BTreeSet<_>>())
}

/// One operation: what it declares and what it really locks.
struct Op {
    declared: Locks,
    real: Locks,
}

/// A random operation of the replay's mix over `vms` VMs and `hosts` hosts.
fn operation(rng: &mut SplitMix, vms: usize, hosts: usize) -> Op {
    let vm = format!("vm-{}", rng.below(vms));
    let host = |rng: &mut SplitMix| format!("host-{}", rng.below(hosts));
    let roll = rng.below(100);
    let with_vm = Locks::default().with(Level::Vm, named(std::slice::from_ref(&vm)));
    if roll < 70 {
        let source = host(rng);
        let mut destination = host(rng);
        while destination == source {
            destination = host(rng);
        }
        let locks = with_vm.with(Level::HostResources, named(&[source, destination]));
        Op {
            declared: locks.clone(),
            real: locks,
        }
    } else if roll < 87 {
        let locks = with_vm.with(Level::HostResources, named(&[host(rng)]));
        Op {
            declared: locks.clone(),
            real: locks,
        }
    } else if roll < 97 {
        let declared = with_vm
            .clone()
            .with(Level::HostResources, Lock::UnknownExclusive);
        let real = with_vm.with(Level::HostResources, named(&[host(rng)]));
        Op { declared, real }
    } else if roll < 99 {
        let h = [host(rng)];
        let locks = Locks::default()
            .with(Level::Host, named(&h))
            .with(Level::HostResources, named(&h));
        Op {
            declared: locks.clone(),
            real: locks,
        }
    } else {
        Op {
            declared: Locks::cluster_wide(),
            real: Locks::cluster_wide(),
        }
    }
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn pick_speed() {
    let mut rng = SplitMix(0x5EED_0001);
    let (vms, hosts) = (10_000, 1_000);
    let queued: Vec<Locks> = (0..PICK_QUEUED)
        .map(|_| operation(&mut rng, vms, hosts).declared)
        .collect();
    let mut running = Running::new();
    // A running migration's declaration, for the reservation's runs.
    let mut running_migration: Option<Locks> = None;
    // No cluster-wide one among them: it would block every candidate.
    while running.len() < PICK_RUNNING {
        let op = operation(&mut rng, vms, hosts);
        if !op.declared.cluster {
            if running_migration.is_none() && op.declared.vm != Lock::None {
                running_migration = Some(op.declared.clone());
            }
            running.add(&op.declared);
        }
    }
    let running_migration = running_migration.expect("a running operation with a VM");
    let candidates: Vec<Candidate<'_>> = queued
        .iter()
        .enumerate()
        .map(|(seq, locks)| Candidate {
            priority: PRIORITY_DEFAULT,
            seq: seq as u64,
            age: Duration::ZERO,
            locks,
        })
        .collect();
    let blocked = queued.iter().filter(|locks| running.blocks(locks)).count();
    // In submit order most candidates are passed over before their names
    // are looked up; newest first, every one is judged: the worst case.
    let newest_first: Vec<Candidate<'_>> = candidates.iter().rev().copied().collect();
    // Ages falling from 1,000 s (the oldest tenth past K = 900 s), the
    // oldest blocked by the running migration it duplicates: it reserves.
    let reserving_candidates: Vec<Candidate<'_>> = candidates
        .iter()
        .map(|c| Candidate {
            age: Duration::from_secs_f64((PICK_QUEUED - c.seq as usize) as f64 * 0.1),
            locks: if c.seq == 0 {
                &running_migration
            } else {
                c.locks
            },
            ..*c
        })
        .collect();
    let reserving_newest_first: Vec<Candidate<'_>> =
        reserving_candidates.iter().rev().copied().collect();
    let config = Config::default();
    assert_eq!(
        sandpiper_queue::reserving(&reserving_candidates, &config),
        Some(0)
    );
    assert!(running.blocks(reserving_candidates[0].locks));
    let runs = [
        (
            Order::Predictive,
            "predictive",
            "newest_first",
            "no",
            &newest_first,
        ),
        (
            Order::Predictive,
            "predictive",
            "submit_order",
            "no",
            &candidates,
        ),
        (Order::Fifo, "fifo", "newest_first", "no", &newest_first),
        (Order::Fifo, "fifo", "submit_order", "no", &candidates),
        (
            Order::Predictive,
            "predictive",
            "newest_first",
            "blocked_migration",
            &reserving_newest_first,
        ),
        (
            Order::Predictive,
            "predictive",
            "submit_order",
            "blocked_migration",
            &reserving_candidates,
        ),
        (
            Order::Fifo,
            "fifo",
            "submit_order",
            "blocked_migration",
            &reserving_candidates,
        ),
    ];
    for (order, name, arrangement, reserving, slice) in runs {
        let mut times = Vec::with_capacity(PICK_RUNS);
        for run in 0..PICK_WARMUP + PICK_RUNS {
            let started = Instant::now();
            let picked = next(std::hint::black_box(slice), &running, order, &config);
            let took = started.elapsed();
            assert!(picked.is_some());
            if run >= PICK_WARMUP {
                times.push(took.as_secs_f64() * 1e6);
            }
        }
        let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
        let us = median(times);
        let verdict = if us < PICK_GOAL_US { "met" } else { "MISSED" };
        println!(
            "pick queued={PICK_QUEUED} running={PICK_RUNNING} median_us={us:.0} min_us={fastest:.0} order={name} \
             slice={arrangement} reserving={reserving} blocked={blocked} (goal < {PICK_GOAL_US:.0} us: {verdict})"
        );
    }
}

/// How the replay picks.
#[derive(Clone, Copy)]
enum Picker {
    /// `next` with this order, skipping known conflicts.
    Queue(Order),
    /// Strict submit order, nothing skipped.
    GanetiFifo,
}

#[derive(Default)]
struct Outcome {
    mean_wait_s: f64,
    blocked_ticks: f64,
    max_wait_ticks: f64,
    /// Operations that waited past K ticks, and how many of them were
    /// cluster-wide.
    over_k: usize,
    over_k_cluster: usize,
    /// The workload's longest duration, in ticks, and how many operations
    /// waited past K plus that.
    longest_ticks: f64,
    over_k_plus_longest: usize,
    /// When the last operation finished.
    makespan_s: f64,
}

/// One operation in the replay, with when things happened to it.
struct Job {
    op: Op,
    submit: f64,
    duration: f64,
    leased: f64,
    started: f64,
}

fn workload(seed: u64) -> Vec<Job> {
    let mut rng = SplitMix(seed);
    let mut now = 0.0;
    (0..OPS)
        .map(|_| {
            now += rng.exponential(ARRIVAL_GAP_S);
            let op = operation(&mut rng, VMS, HOSTS);
            let duration = if op.declared.cluster {
                CLUSTER_DURATION_S
            } else {
                MIN_DURATION_S + rng.exponential(MEAN_EXTRA_S)
            };
            Job {
                op,
                submit: now,
                duration,
                leased: f64::NAN,
                started: f64::NAN,
            }
        })
        .collect()
}

/// Replays `jobs` (in submit order) under `picker`, as docs say above.
fn replay(mut jobs: Vec<Job>, picker: Picker) -> Outcome {
    let config = Config::default();
    let mut arrived = 0;
    let mut queue: Vec<usize> = Vec::new();
    let mut declared = Running::new();
    // Holding their real locks, with their end; waiting, in lease order.
    let mut holding: Vec<(usize, f64)> = Vec::new();
    let mut waiting: Vec<usize> = Vec::new();
    let mut now = 0.0_f64;
    let mut done = 0;
    while done < jobs.len() {
        while arrived < jobs.len() && jobs[arrived].submit <= now {
            queue.push(arrived);
            arrived += 1;
        }
        // Lease while a slot is free.
        while holding.len() + waiting.len() < RUNNING_LIMIT && !queue.is_empty() {
            let picked = match picker {
                // The queue is in submit order.
                Picker::GanetiFifo => Some(0),
                Picker::Queue(order) => {
                    let candidates: Vec<Candidate<'_>> = queue
                        .iter()
                        .map(|&j| Candidate {
                            priority: PRIORITY_DEFAULT,
                            seq: j as u64,
                            age: Duration::from_secs_f64(now - jobs[j].submit),
                            locks: &jobs[j].op.declared,
                        })
                        .collect();
                    next(&candidates, &declared, order, &config)
                }
            };
            let Some(at) = picked else { break };
            let j = queue.remove(at);
            jobs[j].leased = now;
            declared.add(&jobs[j].op.declared);
            waiting.push(j);
            start_waiters(&mut jobs, &mut holding, &mut waiting, now);
        }
        // The next event: an arrival or an end.
        let next_arrival = jobs.get(arrived).map_or(f64::INFINITY, |j| j.submit);
        let next_end = holding
            .iter()
            .map(|&(_, end)| end)
            .fold(f64::INFINITY, f64::min);
        now = next_arrival.min(next_end);
        assert!(
            now.is_finite(),
            "the replay stalled with {} waiting",
            waiting.len()
        );
        let mut index = 0;
        while index < holding.len() {
            let (j, end) = holding[index];
            if end <= now {
                holding.swap_remove(index);
                assert!(declared.remove(&jobs[j].op.declared));
                done += 1;
            } else {
                index += 1;
            }
        }
        start_waiters(&mut jobs, &mut holding, &mut waiting, now);
    }
    let tick = TICK.as_secs_f64();
    let waits: Vec<f64> = jobs.iter().map(|j| j.started - j.submit).collect();
    let longest_ticks = jobs.iter().map(|j| j.duration).fold(0.0, f64::max) / tick;
    Outcome {
        mean_wait_s: waits.iter().sum::<f64>() / waits.len() as f64,
        blocked_ticks: jobs.iter().map(|j| j.started - j.leased).sum::<f64>() / tick,
        max_wait_ticks: waits.iter().copied().fold(0.0, f64::max) / tick,
        over_k: waits
            .iter()
            .filter(|&&w| w / tick > STARVATION_TICKS)
            .count(),
        over_k_cluster: jobs
            .iter()
            .filter(|j| j.op.declared.cluster && (j.started - j.submit) / tick > STARVATION_TICKS)
            .count(),
        longest_ticks,
        over_k_plus_longest: waits
            .iter()
            .filter(|&&w| w / tick > STARVATION_TICKS + longest_ticks)
            .count(),
        makespan_s: jobs
            .iter()
            .map(|j| j.started + j.duration)
            .fold(0.0, f64::max),
    }
}

/// Starts every waiting job, in lease order, whose real locks meet neither
/// a holder's nor those of a job leased before it and still waiting.
fn start_waiters(
    jobs: &mut [Job],
    holding: &mut Vec<(usize, f64)>,
    waiting: &mut Vec<usize>,
    now: f64,
) {
    let mut still: Vec<usize> = Vec::with_capacity(waiting.len());
    for &j in waiting.iter() {
        let real = &jobs[j].op.real;
        let free = holding
            .iter()
            .all(|&(h, _)| !conflicts(real, &jobs[h].op.real))
            && still.iter().all(|&w| !conflicts(real, &jobs[w].op.real));
        if free {
            jobs[j].started = now;
            holding.push((j, now + jobs[j].duration));
        } else {
            still.push(j);
        }
    }
    *waiting = still;
}

/// The offered load of a workload, a cluster-wide operation holding
/// every slot, as the doc comment says.
fn offered_load(jobs: &[Job]) -> f64 {
    let slot_seconds: f64 = jobs
        .iter()
        .map(|j| {
            let slots = if j.op.declared.cluster {
                RUNNING_LIMIT
            } else {
                1
            };
            j.duration * slots as f64
        })
        .sum();
    let span = jobs.last().map_or(0.0, |j| j.submit);
    slot_seconds / (RUNNING_LIMIT as f64 * span)
}

fn main() {
    // `cargo bench` passes `--bench`; a name filter is not supported.
    pick_speed();
    let mut over_bound = 0;
    for seed in SEEDS {
        let fifo = replay(workload(seed), Picker::Queue(Order::Fifo));
        let predictive = replay(workload(seed), Picker::Queue(Order::Predictive));
        let ganeti = replay(workload(seed), Picker::GanetiFifo);
        over_bound += predictive.over_k_plus_longest;
        println!(
            "queue ops={OPS} fifo_mean_wait={:.1}s predictive_mean_wait={:.1}s ratio={:.3} fifo_blocked_ticks={:.0} \
             predictive_blocked_ticks={:.0} max_wait_ticks={:.1} max_wait_over_k_ticks={:.1} k={STARVATION_TICKS} \
             predictive_over_k={} of_them_cluster_wide={} longest_ticks={:.1} over_k_plus_longest={} \
             fifo_max_wait_ticks={:.1} ganeti_fifo_mean_wait={:.1}s \
             ganeti_fifo_blocked_ticks={:.0} makespan_s={:.0}/{:.0}/{:.0} load={:.2} seed={seed}",
            fifo.mean_wait_s,
            predictive.mean_wait_s,
            predictive.mean_wait_s / fifo.mean_wait_s,
            fifo.blocked_ticks,
            predictive.blocked_ticks,
            predictive.max_wait_ticks,
            (predictive.max_wait_ticks - STARVATION_TICKS).max(0.0),
            predictive.over_k,
            predictive.over_k_cluster,
            predictive.longest_ticks,
            predictive.over_k_plus_longest,
            fifo.max_wait_ticks,
            ganeti.mean_wait_s,
            ganeti.blocked_ticks,
            fifo.makespan_s,
            predictive.makespan_s,
            ganeti.makespan_s,
            offered_load(&workload(seed)),
        );
    }
    println!(
        "queue predictive: {over_bound} operation(s) over all seeds waited past K={STARVATION_TICKS} ticks plus the longest duration"
    );
}
