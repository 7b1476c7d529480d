//! One decision's unit calls on more than one core.
//!
//! A decision is a chain: each filter judges the survivors of the one
//! before. But two kinds of work inside it are independent, and a decision
//! over thousands of hosts may spread them over idle cores:
//!
//! * a filter that declares `per-host` judges each host from that host's
//!   columns and the request alone, so its candidates can be judged in
//!   chunks, one call per chunk, and the answers joined in candidate order
//!   (`join_rejections`): the same hosts rejected for the same reasons, in
//!   the same groups and order as one call gives. Only a filter whose last
//!   whole call says this one will be long enough to repay a second call's
//!   fixed cost is split ([`SPLIT_WORTH`]);
//! * the weights all score the same survivors, so they can be called side
//!   by side and combined afterwards, in policy order, as before.
//!
//! Every chunk is an ordinary call: a fresh instance, its own fuel,
//! deadline and memory limit. The one difference a user could see is that
//! a chunk has the limits of a whole call, so a per-host filter that needs
//! nearly its whole fuel over all candidates may pass in chunks where one
//! call would have run out.
//!
//! Extra cores are *lent* by the caller ([`Lender`]): the server lends a
//! sandbox slot only when the decision's cluster and the server both have
//! one free at that instant (`placement::fairness`), so a decision never
//! uses more cores than its cluster's share, and work that waits for a
//! slot is never queued behind a helper. Without a lender, or with nothing
//! lent, the work runs on the caller's thread, one call after another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sandpiper_model::Rejection;

use crate::unit::Unit;

/// Fewest candidates a per-host filter is split over helpers for: each
/// chunk needs something to do.
pub const MIN_SPLIT_CANDIDATES: usize = 64;

/// How long one call of a per-host filter over the candidates must be
/// expected to take before it is split. Each chunk pays a call's fixed cost
/// again (a fresh instance, and the columns it reads lowered whole: ~25 µs
/// for `Memory` at 10,000 hosts) and a hand-off to another thread
/// (~10–30 µs), and on this project's 2-vCPU machines two calls at once
/// each ran about 1.45 times slower than one alone (docs/performance.md,
/// "One decision on more than one core"): splitting `Swap` (~100 µs at
/// 10,000 hosts) or `CPU` (~200 µs) lost time there; `Memory` at 50,000
/// hosts (over 1 ms) gains.
pub const SPLIT_WORTH: Duration = Duration::from_micros(300);

/// What each per-host filter's last whole call cost a candidate, by the
/// unit's address (stable while the unit is loaded), and how many calls
/// were split since. Only the guess of whether splitting pays: a wrong
/// guess moves where the same calls run, never what they answer.
/// Forgotten whole past [`MAX_COSTS_KEPT`] units.
static COSTS: Mutex<Option<HashMap<usize, Cost>>> = Mutex::new(None);

/// One unit's entry in [`COSTS`].
#[derive(Clone, Copy)]
struct Cost {
    per_candidate: Duration,
    split_since: u32,
}

/// Most units whose cost is kept.
const MAX_COSTS_KEPT: usize = 4_096;

/// Every this many calls of a unit that is split, one runs whole, so its
/// cost is measured again. Only whole calls are measured: a split call's
/// time says as much about the other core as about the unit (on a shared
/// machine two chunks at once ran slower than one call over both), and
/// measuring it would keep a unit split once it was.
const REMEASURE_EVERY: u32 = 16;

fn unit_key(unit: &Arc<dyn Unit>) -> usize {
    Arc::as_ptr(unit).cast::<()>() as usize
}

/// Whether this call of `unit` over `candidates` is to be split: its last
/// whole call says it will take at least `worth` ([`Lender::worth`]), and
/// it is not the one in [`REMEASURE_EVERY`] that runs whole. A unit never
/// called whole before is not split.
pub(super) fn worth_splitting(unit: &Arc<dyn Unit>, candidates: usize, worth: Duration) -> bool {
    if candidates < MIN_SPLIT_CANDIDATES {
        return false;
    }
    let mut costs = COSTS.lock().unwrap_or_else(|p| p.into_inner());
    let Some(cost) = costs.as_mut().and_then(|c| c.get_mut(&unit_key(unit))) else {
        return false;
    };
    let expected = cost.per_candidate * u32::try_from(candidates).unwrap_or(u32::MAX);
    if expected < worth || cost.split_since + 1 >= REMEASURE_EVERY {
        return false;
    }
    cost.split_since += 1;
    true
}

/// Notes that a whole call of `unit` over `candidates` took `elapsed`.
pub(super) fn note_cost(unit: &Arc<dyn Unit>, candidates: usize, elapsed: Duration) {
    let Some(per_candidate) = u32::try_from(candidates.max(1)).ok().map(|n| elapsed / n) else {
        return;
    };
    let mut costs = COSTS.lock().unwrap_or_else(|p| p.into_inner());
    let costs = costs.get_or_insert_with(HashMap::new);
    if costs.len() >= MAX_COSTS_KEPT {
        costs.clear();
    }
    let cost = Cost {
        per_candidate,
        split_since: 0,
    };
    costs.insert(unit_key(unit), cost);
}

/// Fewest survivors for which weights are called side by side.
pub const MIN_SIDE_BY_SIDE_SURVIVORS: usize = 1_024;

/// A token for one extra core, held while a helper works and
/// released when dropped.
pub struct Loan(#[allow(dead_code)] Box<dyn Send>);

impl Loan {
    /// A loan that holds `token` (say, semaphore permits) until it ends.
    pub fn new(token: impl Send + 'static) -> Loan {
        Loan(Box::new(token))
    }
}

/// Lends a decision extra cores.
pub trait Lender: Sync + std::fmt::Debug {
    /// One core's loan if one is free at once; never waits.
    fn lend(&self) -> Option<Loan>;

    /// How long a filter's call must be expected to take for its
    /// candidates to be split over lent cores.
    fn worth(&self) -> Duration {
        SPLIT_WORTH
    }
}

/// Lends every core the helper pool has: for callers with no one to share
/// the machine with (benchmarks, tools, tests).
#[derive(Debug)]
pub struct EveryCore;

impl Lender for EveryCore {
    fn lend(&self) -> Option<Loan> {
        Some(Loan::new(()))
    }
}

/// The process's helper threads: one per core beyond the first, none on a
/// one-core machine. Made on first use.
fn helper_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if cores < 2 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(cores - 1)
            .thread_name(|i| format!("sandpiper-helper-{i}"))
            // As tokio's blocking threads: room for the guest's stack
            // (`MAX_WASM_STACK_BYTES`) above the host's frames.
            .stack_size(2 << 20)
            .build()
            .ok()
    })
    .as_ref()
}

/// Helpers lent for one piece of work: each holds its loan until the
/// work ends.
pub(super) struct Crew {
    pool: &'static rayon::ThreadPool,
    loans: Vec<Loan>,
}

impl Crew {
    /// Up to `most` helpers, as many as `lender` lends now; `None` when
    /// none is lent (or the machine has one core).
    pub(super) fn gather(lender: &dyn Lender, most: usize) -> Option<Crew> {
        let pool = helper_pool()?;
        let loans: Vec<Loan> = (0..most.min(pool.current_num_threads()))
            .map_while(|_| lender.lend())
            .collect();
        (!loans.is_empty()).then_some(Crew { pool, loans })
    }

    /// Threads the work runs on: the helpers and the caller's.
    pub(super) fn threads(&self) -> usize {
        self.loans.len() + 1
    }

    /// Runs `job(0) .. job(jobs - 1)`, each once, on the caller's thread
    /// and the helpers; their results in job order. Jobs are taken in
    /// order by whichever thread is free, so a slow one does not hold up
    /// the rest, and a helper that starts late finds the work done.
    pub(super) fn run<T: Send + Sync>(
        self,
        jobs: usize,
        job: impl Fn(usize) -> T + Sync,
    ) -> Vec<T> {
        let next = AtomicUsize::new(0);
        let done: Vec<OnceLock<T>> = (0..jobs).map(|_| OnceLock::new()).collect();
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    break;
                }
                // Each index is taken once, so the cell is always empty.
                let _ = done[i].set(job(i));
            }
        };
        self.pool.in_place_scope(|scope| {
            for loan in self.loans {
                let work = &work;
                scope.spawn(move |_| {
                    work();
                    drop(loan);
                });
            }
            work();
        });
        done.into_iter()
            .map(|cell| cell.into_inner().expect("every job ran"))
            .collect()
    }
}

/// Splits `candidates` into `chunks` runs of nearly equal length, in order.
pub(super) fn split(candidates: &[u32], chunks: usize) -> Vec<&[u32]> {
    let size = candidates.len().div_ceil(chunks.max(1)).max(1);
    candidates.chunks(size).collect()
}

/// Joins the rejections of a per-host filter's chunks, in chunk order,
/// into what one call over all of them gives: one group per reason, in
/// the order each reason was first given, each group's hosts (and their
/// figures) in candidate order.
pub(super) fn join_rejections(chunks: Vec<Vec<Rejection>>) -> Vec<Rejection> {
    let mut chunks = chunks.into_iter();
    let mut joined = chunks.next().unwrap_or_default();
    for chunk in chunks {
        for group in chunk {
            match joined.iter_mut().find(|g| g.reason == group.reason) {
                Some(same) => {
                    same.hosts.extend_from_slice(&group.hosts);
                    same.figures.extend_from_slice(&group.figures);
                }
                None => joined.push(group),
            }
        }
    }
    joined
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_once_each_and_answer_in_order() {
        let Some(crew) = Crew::gather(&EveryCore, 8) else {
            return; // one core: nothing to lend
        };
        let ran = AtomicUsize::new(0);
        let results = crew.run(9, |i| {
            ran.fetch_add(1, Ordering::Relaxed);
            i * 10
        });
        assert_eq!(results, (0..9).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(ran.load(Ordering::Relaxed), 9);
    }

    #[test]
    fn no_crew_without_a_loan() {
        #[derive(Debug)]
        struct Nothing;
        impl Lender for Nothing {
            fn lend(&self) -> Option<Loan> {
                None
            }
        }
        assert!(Crew::gather(&Nothing, 4).is_none());
        assert!(Crew::gather(&EveryCore, 0).is_none());
    }

    #[test]
    fn split_keeps_order_and_covers_everything() {
        let candidates: Vec<u32> = (0..10).collect();
        let chunks = split(&candidates, 3);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.concat(), candidates);
        assert_eq!(split(&candidates, 1), vec![&candidates[..]]);
    }

    #[test]
    fn joined_rejections_group_as_one_call_would() {
        let needs = |hosts: Vec<u32>, figures: Vec<f64>| Rejection {
            reason: "needs {} MiB".to_owned(),
            hosts,
            figures,
        };
        let a = vec![
            needs(vec![1, 3], vec![10.0, 30.0]),
            Rejection::new("down", vec![2]),
        ];
        let b = vec![
            Rejection::new("maintenance", vec![5]),
            needs(vec![4], vec![40.0]),
        ];
        let joined = join_rejections(vec![a, b]);
        assert_eq!(
            joined,
            vec![
                needs(vec![1, 3, 4], vec![10.0, 30.0, 40.0]),
                Rejection::new("down", vec![2]),
                Rejection::new("maintenance", vec![5]),
            ]
        );
    }
}
