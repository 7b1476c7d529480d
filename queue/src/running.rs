//! What the running operations hold, aggregated per level, so that judging
//! a pending operation costs O(its names) and not O(running).

use std::collections::HashMap;

use crate::lock::{Kind, Level, Lock, Locks};
use crate::order::Config;
use crate::weight::{CLUSTER_WIDE_WEIGHT, weight};

/// The declarations of the operations that hold a running slot (Ganeti's
/// RUNNING and WAITING alike: a waiting one will take its locks).
///
/// A running cluster-wide operation counts as `AllExclusive` at every
/// level, whatever its levels say: it holds everything. Per level this
/// keeps how many operations hold each kind and, per name, how many hold
/// it shared and exclusive; the table only ever asks "is there one of
/// this kind" and "does any of them meet my names".
#[derive(Clone, Debug, Default)]
pub struct Running {
    /// Every operation added and not yet removed, so that `remove` takes
    /// back exactly what an `add` put in.
    ops: HashMap<Locks, usize>,
    len: usize,
    cluster: usize,
    levels: [Held; Level::ALL.len()],
}

#[derive(Clone, Debug, Default)]
struct Held {
    /// Operations per [`Kind`] at this level.
    kinds: [usize; Kind::COUNT],
    names: HashMap<String, Holders>,
}

#[derive(Clone, Copy, Debug, Default)]
struct Holders {
    shared: usize,
    exclusive: usize,
}

/// What a pending lock meets at one level.
struct Verdict {
    conflict: bool,
    worst: f64,
}

impl Running {
    pub fn new() -> Self {
        Self::default()
    }

    /// An operation started (was leased).
    pub fn add(&mut self, locks: &Locks) {
        *self.ops.entry(locks.clone()).or_default() += 1;
        self.len += 1;
        self.apply(locks, |count| *count += 1);
    }

    /// An operation finished. Identical declarations are counted, so one
    /// of several is removed. Returns false, changing nothing, when no
    /// running operation declared exactly `locks`.
    pub fn remove(&mut self, locks: &Locks) -> bool {
        match self.ops.get_mut(locks) {
            Some(count) if *count > 1 => *count -= 1,
            Some(_) => {
                self.ops.remove(locks);
            }
            None => return false,
        }
        self.len -= 1;
        self.apply(locks, |count| *count -= 1);
        true
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds or takes back one operation's counts.
    fn apply(&mut self, locks: &Locks, change: impl Fn(&mut usize)) {
        if locks.cluster {
            change(&mut self.cluster);
        }
        for level in Level::ALL {
            let held = &mut self.levels[level.index()];
            let lock = if locks.cluster {
                &Lock::AllExclusive
            } else {
                locks.level(level)
            };
            change(&mut held.kinds[lock.kind().index()]);
            let exclusive = lock.kind() == Kind::Exclusive;
            for name in lock.names().into_iter().flatten() {
                let holders = held.names.entry(name.clone()).or_default();
                change(if exclusive {
                    &mut holders.exclusive
                } else {
                    &mut holders.shared
                });
                if holders.shared == 0 && holders.exclusive == 0 {
                    held.names.remove(name);
                }
            }
        }
    }

    /// Ganeti's static predictive value: a cluster-wide `pending` weighs
    /// `base + 15`; any other `base + Σ_level max(0, max over running of
    /// compare(pending[level], running[level]))`. With nothing running
    /// every max is 0, so it weighs `base`.
    pub fn static_value(&self, pending: &Locks, config: &Config) -> f64 {
        if pending.cluster {
            return config.base + CLUSTER_WIDE_WEIGHT;
        }
        // Summed from the base in level order, as the seed writes it (and
        // as `weigh_unblocked` does, to the last bit).
        Level::ALL.iter().fold(config.base, |value, &level| {
            value + self.judge(level, pending).worst
        })
    }

    /// Whether `pending` conflicts (as [`crate::conflicts`]) with any
    /// running operation.
    pub fn blocks(&self, pending: &Locks) -> bool {
        !self.is_empty()
            && (pending.cluster
                || self.cluster > 0
                || Level::ALL
                    .iter()
                    .any(|&level| self.judge(level, pending).conflict))
    }

    /// Both at once, each level judged once: `None` when blocked, else the
    /// static value (what the picker needs).
    pub(crate) fn weigh_unblocked(&self, pending: &Locks, config: &Config) -> Option<f64> {
        if self.is_empty() {
            return Some(
                config.base
                    + if pending.cluster {
                        CLUSTER_WIDE_WEIGHT
                    } else {
                        0.0
                    },
            );
        }
        if pending.cluster || self.cluster > 0 {
            return None;
        }
        let mut value = config.base;
        for level in Level::ALL {
            let verdict = self.judge(level, pending);
            if verdict.conflict {
                return None;
            }
            value += verdict.worst;
        }
        Some(value)
    }

    /// `pending`'s lock at `level` against every running kind present
    /// there. Which named holders it meets is looked up once, name by name.
    fn judge(&self, level: Level, pending: &Locks) -> Verdict {
        let held = &self.levels[level.index()];
        let lock = pending.level(level);
        let pending_kind = lock.kind();
        let mut verdict = Verdict {
            conflict: false,
            worst: 0.0,
        };
        if pending_kind == Kind::None {
            return verdict;
        }
        let mut meets: Option<Holders> = None;
        for running_kind in Kind::ALL {
            if held.kinds[running_kind.index()] == 0 {
                continue;
            }
            // Only named against named asks; both cells share the answer.
            let overlap = pending_kind.is_named() && running_kind.is_named() && {
                let met = *meets.get_or_insert_with(|| held.met_by(lock));
                if running_kind == Kind::Exclusive {
                    met.exclusive > 0
                } else {
                    met.shared > 0
                }
            };
            verdict.conflict |= Kind::conflict(pending_kind, running_kind, || overlap);
            verdict.worst = verdict
                .worst
                .max(weight(pending_kind, running_kind, || overlap));
        }
        verdict
    }
}

impl Held {
    /// Whether any of `lock`'s names is held shared, and exclusive (as
    /// 0 or 1 each).
    fn met_by(&self, lock: &Lock) -> Holders {
        let mut met = Holders::default();
        for name in lock.names().into_iter().flatten() {
            if let Some(holders) = self.names.get(name.as_str()) {
                met.shared |= usize::from(holders.shared > 0);
                met.exclusive |= usize::from(holders.exclusive > 0);
                if met.shared > 0 && met.exclusive > 0 {
                    break;
                }
            }
        }
        met
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Level, compare, conflicts};
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// Names from a small pool, so that sets often meet.
    fn lock() -> impl Strategy<Value = Lock> {
        let names = || proptest::collection::btree_set("[a-e]", 1..4);
        prop_oneof![
            Just(Lock::None),
            names().prop_map(Lock::Shared),
            Just(Lock::UnknownShared),
            Just(Lock::AllShared),
            names().prop_map(Lock::Exclusive),
            Just(Lock::UnknownExclusive),
            Just(Lock::AllExclusive),
        ]
    }

    fn locks() -> impl Strategy<Value = Locks> {
        (
            proptest::bool::weighted(0.1),
            [lock(), lock(), lock(), lock(), lock()],
        )
            .prop_map(|(cluster, levels)| {
                let mut locks = Locks {
                    cluster,
                    ..Locks::default()
                };
                for (level, lock) in Level::ALL.into_iter().zip(levels) {
                    locks.set(level, lock);
                }
                locks
            })
    }

    /// The seed's formula over every running operation, one by one.
    fn naive_static_value(pending: &Locks, running: &[Locks], config: &Config) -> f64 {
        if pending.cluster {
            return config.base + CLUSTER_WIDE_WEIGHT;
        }
        let held = |r: &Locks, level| {
            if r.cluster {
                Lock::AllExclusive
            } else {
                r.level(level).clone()
            }
        };
        let mut value = config.base;
        for level in Level::ALL {
            let mut worst = 0.0_f64;
            for r in running {
                worst = worst.max(compare(pending.level(level), &held(r, level)));
            }
            value += worst;
        }
        value
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// The aggregate answers as the naive max and `any(conflicts)`,
        /// also after some operations finish.
        #[test]
        fn aggregate_matches_naive(
            running in proptest::collection::vec(locks(), 0..12),
            finished in proptest::collection::vec(any::<bool>(), 12),
            pending in locks(),
        ) {
            let config = Config::default();
            let mut aggregate = Running::new();
            for locks in &running {
                aggregate.add(locks);
            }
            let mut still = Vec::new();
            for (locks, done) in running.iter().zip(&finished) {
                if *done {
                    prop_assert!(aggregate.remove(locks));
                } else {
                    still.push(locks.clone());
                }
            }
            prop_assert_eq!(aggregate.len(), still.len());
            let value = aggregate.static_value(&pending, &config);
            prop_assert_eq!(value, naive_static_value(&pending, &still, &config));
            let blocked = still.iter().any(|r| conflicts(&pending, r));
            prop_assert_eq!(aggregate.blocks(&pending), blocked);
            let both = aggregate.weigh_unblocked(&pending, &config);
            prop_assert_eq!(both, (!blocked).then_some(value));
        }
    }

    #[test]
    fn remove_takes_back_only_what_was_added() {
        let vm = |name: &str| {
            Locks::default().with(
                Level::Vm,
                Lock::Exclusive(BTreeSet::from([name.to_owned()])),
            )
        };
        let mut running = Running::new();
        running.add(&vm("a"));
        running.add(&vm("a"));
        assert!(!running.remove(&vm("b")));
        assert!(running.remove(&vm("a")));
        assert!(running.blocks(&vm("a")));
        assert!(running.remove(&vm("a")));
        assert!(!running.blocks(&vm("a")));
        assert!(!running.remove(&vm("a")));
        assert!(running.is_empty());
        assert!(
            running
                .levels
                .iter()
                .all(|held| held.names.is_empty() && held.kinds.iter().all(|&n| n == 0))
        );
    }
}
