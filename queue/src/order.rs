//! Aging and the picker: which queued operation to lease next.

use std::cmp::Ordering;
use std::time::Duration;

use crate::lock::{Locks, conflicts};
use crate::running::Running;
use crate::weight::Config;

/// Ganeti's priorities run from -20 (first) to 19 (last), like `nice`.
pub const PRIORITY_HIGHEST: i32 = -20;
pub const PRIORITY_LOWEST: i32 = 19;
/// Ganeti's `OP_PRIO_DEFAULT`.
pub const PRIORITY_DEFAULT: i32 = 0;

/// An operation's weight in the queue after waiting `age`: `spv × max(0,
/// 1 − age_ticks / K)` with `age_ticks = age / tick`, not rounded down.
/// Ganeti's design says the age is quantised to ticks but its code divides
/// continuously; we follow the code, so two operations submitted a second
/// apart never tie on age alone. A zero tick or K means no horizon at all:
/// every weight is 0 and the order is FIFO within a priority (and every
/// operation is [starving](is_starving), so the first reserves in [`next`]).
pub fn aged_weight(spv: f64, age: Duration, config: &Config) -> f64 {
    let horizon = config.tick.as_secs_f64() * config.starvation_ticks;
    if horizon <= 0.0 || horizon.is_nan() {
        return 0.0;
    }
    spv * (1.0 - age.as_secs_f64() / horizon).max(0.0)
}

/// Whether an operation that has waited `age` is *starving*: its age has
/// reached K ticks, so [`aged_weight`] is 0 whatever it locks (`age /
/// (tick × K) ≥ 1`, computed as `aged_weight` computes it). A zero tick or
/// K has no horizon: every operation is starving. [`next`] lets the first
/// starving candidate reserve its locks.
pub fn is_starving(age: Duration, config: &Config) -> bool {
    let horizon = config.tick.as_secs_f64() * config.starvation_ticks;
    if horizon <= 0.0 || horizon.is_nan() {
        return true;
    }
    age.as_secs_f64() / horizon >= 1.0
}

/// A queued operation as the picker sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    /// Lower runs first; Ganeti's range is [`PRIORITY_HIGHEST`]..=[`PRIORITY_LOWEST`].
    pub priority: i32,
    /// Submit order: the last tie-breaker.
    pub seq: u64,
    /// Time since it was submitted.
    pub age: Duration,
    pub locks: &'a Locks,
}

/// How operations of one priority are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Submit order.
    Fifo,
    /// Ascending aged weight, then submit order (Ganeti's predictive queue).
    Predictive,
}

/// The index of the operation to lease next, or `None` when every
/// candidate is blocked. A candidate whose known locks conflict with a
/// running operation ([`Running::blocks`]) is skipped: leased, it would
/// only hold a slot while it waits. The others are ordered by priority,
/// then (predictive only) aged weight ascending, then `seq`.
///
/// **Reservation** (anti-starvation, both orders): the *reserving*
/// candidate is the first [starving](is_starving) one in (priority, seq)
/// order, blocked or not (see [`reserving`]). No other candidate of its
/// priority or a worse one that [`conflicts`] with it is picked: that
/// candidate would keep it blocked, and a candidate that conflicts with
/// everything running at some time or other (a cluster-wide one) would
/// otherwise wait until the cluster happened to go idle. Once the running
/// operations it conflicts with finish, nothing new holds it up. A
/// candidate of a strictly better priority is not held back: priority
/// stays absolute, as in Ganeti, where aging only orders operations of one
/// priority. Only one candidate reserves at a time, so reservations cannot
/// hold each other up; the next starving one reserves once it is leased.
/// Unblocked, the reserving candidate is the pick when no better priority
/// is runnable and ages follow submit order: it weighs 0 and is the
/// oldest of its priority.
///
/// One pass to find the reserving candidate (its age only), then one pass,
/// O(candidates × their names). A candidate that cannot beat the best so
/// far is passed over before its names are looked up: a worse priority;
/// for FIFO a later seq; for predictive a weight that, even with none of
/// its names held, would be higher (or equal with a later seq). So a slice
/// in submit order (as the host passes its queue) is mostly passed over;
/// in the reverse order every candidate is judged (the benchmark times
/// both). Only a candidate that would lead is checked against the
/// reserving one's declaration (their names only when both name a set at
/// a level).
pub fn next(
    candidates: &[Candidate<'_>],
    running: &Running,
    order: Order,
    config: &Config,
) -> Option<usize> {
    let reserving = reserving(candidates, config).map(|index| (index, &candidates[index]));
    let mut best: Option<(usize, f64)> = None;
    for (index, candidate) in candidates.iter().enumerate() {
        if let Some((best_index, best_weight)) = best {
            let leader = &candidates[best_index];
            match candidate.priority.cmp(&leader.priority) {
                Ordering::Greater => continue,
                Ordering::Equal if order == Order::Fifo && candidate.seq > leader.seq => continue,
                // Its weight is at least its floor's, aged: ruled out
                // before any of its names is looked up.
                Ordering::Equal if order == Order::Predictive => {
                    match running.floor(candidate.locks, config) {
                        None => continue,
                        Some(floor) => {
                            let least = aged_weight(floor, candidate.age, config);
                            if least > best_weight
                                || (least == best_weight && candidate.seq > leader.seq)
                            {
                                continue;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let weight = match order {
            Order::Fifo if running.blocks(candidate.locks) => continue,
            Order::Fifo => 0.0,
            Order::Predictive => match running.weigh_unblocked(candidate.locks, config) {
                Some(spv) => aged_weight(spv, candidate.age, config),
                None => continue,
            },
        };
        let better = match best {
            None => true,
            Some((best_index, best_weight)) => {
                let leader = &candidates[best_index];
                (candidate.priority, weight, candidate.seq).partial_cmp(&(
                    leader.priority,
                    best_weight,
                    leader.seq,
                )) == Some(Ordering::Less)
            }
        };
        // Asked last, of a candidate that would lead: the reservation
        // only narrows what may lead.
        let held_back = |(holder_index, holder): (usize, &Candidate<'_>)| {
            index != holder_index
                && candidate.priority >= holder.priority
                && conflicts(candidate.locks, holder.locks)
        };
        if better && !reserving.is_some_and(held_back) {
            best = Some((index, weight));
        }
    }
    best.map(|(index, _)| index)
}

/// The index of the candidate that reserves its locks in [`next`]: the
/// first [starving](is_starving) one in (priority, seq) order, the earlier
/// in the slice on a tie; `None` when none is starving. Its age alone is
/// looked at.
pub fn reserving(candidates: &[Candidate<'_>], config: &Config) -> Option<usize> {
    let mut first: Option<(usize, &Candidate<'_>)> = None;
    for (index, candidate) in candidates.iter().enumerate() {
        if let Some((_, leader)) = first
            && (candidate.priority, candidate.seq) >= (leader.priority, leader.seq)
        {
            continue;
        }
        if is_starving(candidate.age, config) {
            first = Some((index, candidate));
        }
    }
    first.map(|(index, _)| index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weight::TICK;

    #[test]
    fn aging_reaches_zero_at_k_ticks() {
        let config = Config::default();
        let k = TICK * 30;
        assert_eq!(aged_weight(4.0, Duration::ZERO, &config), 4.0);
        assert_eq!(aged_weight(4.0, k / 2, &config), 2.0);
        assert_eq!(aged_weight(4.0, k, &config), 0.0);
        assert_eq!(aged_weight(4.0, k * 2, &config), 0.0);
        let no_horizon = Config {
            tick: Duration::ZERO,
            ..Config::default()
        };
        assert_eq!(aged_weight(4.0, Duration::ZERO, &no_horizon), 0.0);
    }

    #[test]
    fn starving_at_k_ticks_as_the_weight_reaches_zero() {
        let config = Config::default();
        let k = TICK * 30;
        assert!(!is_starving(k - Duration::from_nanos(1), &config));
        assert!(is_starving(k, &config));
        for age in [k / 2, k - Duration::from_millis(1), k, k * 2] {
            assert_eq!(
                is_starving(age, &config),
                aged_weight(4.0, age, &config) == 0.0
            );
        }
        let no_horizon = Config {
            starvation_ticks: 0.0,
            ..Config::default()
        };
        assert!(is_starving(Duration::ZERO, &no_horizon));
    }

    #[test]
    fn nothing_to_pick() {
        assert_eq!(
            next(&[], &Running::new(), Order::Predictive, &Config::default()),
            None
        );
        let everything = Locks::cluster_wide();
        let mut running = Running::new();
        running.add(&everything);
        let only = [Candidate {
            priority: 0,
            seq: 0,
            age: Duration::ZERO,
            locks: &Locks::default(),
        }];
        assert_eq!(next(&only, &running, Order::Fifo, &Config::default()), None);
    }

    use crate::running::tests::locks;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1_000))]

        /// The one-pass picker with its shortcuts picks as a plain sort of
        /// the eligible candidates would: not blocked by running, and not
        /// (at the reserving candidate's priority or worse) conflicting
        /// with the first starving candidate, found by a plain sort too.
        #[test]
        fn next_is_the_minimum_of_the_eligible(
            running in proptest::collection::vec(locks(), 0..6),
            queued in proptest::collection::vec((-1..=1_i32, 0..2_000_u64, locks()), 0..16),
        ) {
            let config = Config::default();
            let mut aggregate = Running::new();
            for locks in &running {
                aggregate.add(locks);
            }
            // Distinct seqs, shuffled by the generator's order.
            let candidates: Vec<Candidate<'_>> = queued
                .iter()
                .enumerate()
                .map(|(i, (priority, age, locks))| Candidate {
                    priority: *priority,
                    seq: (i as u64 * 7919) % 16,
                    age: Duration::from_secs(*age),
                    locks,
                })
                .collect();
            let mut starving: Vec<(i32, u64, usize)> = candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| c.age >= config.tick.mul_f64(config.starvation_ticks))
                .map(|(i, c)| (c.priority, c.seq, i))
                .collect();
            starving.sort();
            let holder = starving.first().map(|&(.., i)| i);
            prop_assert_eq!(reserving(&candidates, &config), holder);
            let eligible = |i: usize, c: &Candidate<'_>| {
                !aggregate.blocks(c.locks)
                    && match holder {
                        None => true,
                        Some(h) => {
                            let s = &candidates[h];
                            i == h || c.priority < s.priority || !conflicts(c.locks, s.locks)
                        }
                    }
            };
            for order in [Order::Fifo, Order::Predictive] {
                let naive = candidates
                    .iter()
                    .enumerate()
                    .filter(|&(i, c)| eligible(i, c))
                    .map(|(i, c)| {
                        let weight = match order {
                            Order::Fifo => 0.0,
                            Order::Predictive => aged_weight(aggregate.static_value(c.locks, &config), c.age, &config),
                        };
                        (c.priority, weight, c.seq, i)
                    })
                    .min_by(|a, b| a.partial_cmp(b).expect("no NaN"))
                    .map(|(.., i)| i);
                prop_assert_eq!(next(&candidates, &aggregate, order, &config), naive, "{:?}", order);
            }
        }
    }
}
