//! What the running operations hold, aggregated per level, so that judging
//! a pending operation costs O(its names) and not O(running).

use std::collections::HashMap;

use crate::lock::{Kind, Level, Lock, Locks};
use crate::weight::{CLUSTER_WIDE_WEIGHT, Config, weight};

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
    /// Per pending kind and [`Held::met_by`] answer, what it meets here
    /// (kept by [`Held::refresh`] on every change), so that judging a
    /// pending lock is its name lookups and one load.
    verdicts: [[Verdict; MET_BOTH + 1]; Kind::COUNT],
    /// Holds per slot of [`filter_slot`], so that a name held by no one is
    /// told apart without hashing it with the map's SipHash: the picker
    /// asks about every queued name, and most are not held. Allocated with
    /// the first name. A crafted name can only collide into a false
    /// "maybe", which the map then answers.
    filter: Vec<usize>,
}

/// Slots in a level's name filter: with a few hundred names held, about
/// one unheld name in ten still needs the map.
const FILTER_SLOTS: usize = 2048;

/// A name's filter slot: a cheap word-at-a-time hash (not
/// collision-resistant, and need not be).
fn filter_slot(name: &str) -> usize {
    const SEED: u64 = 0x51_7C_C1_B7_27_22_0A_95;
    let mut hash = name.len() as u64;
    let mut chunks = name.as_bytes().chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        hash = (hash.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
    }
    let mut tail = [0; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    hash = (hash.rotate_left(5) ^ u64::from_le_bytes(tail)).wrapping_mul(SEED);
    (hash >> 32) as usize % FILTER_SLOTS
}

#[derive(Clone, Copy, Debug, Default)]
struct Holders {
    shared: usize,
    exclusive: usize,
}

/// Whether judging a pending lock looks its names up.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    LookUp,
    AssumeUnmet,
}

/// What a pending lock meets at one level.
#[derive(Clone, Copy, Debug, Default)]
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
            let count = &mut held.kinds[lock.kind().index()];
            let was_held = *count > 0;
            change(count);
            if (*count > 0) != was_held {
                held.refresh();
            }
            let exclusive = lock.kind() == Kind::Exclusive;
            for name in lock.names().into_iter().flatten() {
                if held.filter.is_empty() {
                    held.filter = vec![0; FILTER_SLOTS];
                }
                change(&mut held.filter[filter_slot(name)]);
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
            value + self.judge(level, pending, Names::LookUp).worst
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
                    .any(|&level| self.judge(level, pending, Names::LookUp).conflict))
    }

    /// Both at once, each level judged once: `None` when blocked, else the
    /// static value (what the picker needs).
    pub(crate) fn weigh_unblocked(&self, pending: &Locks, config: &Config) -> Option<f64> {
        self.weigh(pending, config, Names::LookUp)
    }

    /// The same from the kinds alone, without touching a name: `None` when
    /// blocked whatever the names, else a value no greater than
    /// `weigh_unblocked`'s (no name met; meeting never weighs less, and
    /// the sum is taken in the same order). The picker passes over a
    /// candidate this already rules out.
    pub(crate) fn floor(&self, pending: &Locks, config: &Config) -> Option<f64> {
        self.weigh(pending, config, Names::AssumeUnmet)
    }

    fn weigh(&self, pending: &Locks, config: &Config, names: Names) -> Option<f64> {
        if self.is_empty() {
            let extra = if pending.cluster {
                CLUSTER_WIDE_WEIGHT
            } else {
                0.0
            };
            return Some(config.base + extra);
        }
        if pending.cluster || self.cluster > 0 {
            return None;
        }
        let mut value = config.base;
        for level in Level::ALL {
            let verdict = self.judge(level, pending, names);
            if verdict.conflict {
                return None;
            }
            value += verdict.worst;
        }
        Some(value)
    }

    /// `pending`'s lock at `level`: which named holders it meets is looked
    /// up once, name by name; the rest is the level's precomputed verdict.
    fn judge(&self, level: Level, pending: &Locks, names: Names) -> Verdict {
        let held = &self.levels[level.index()];
        let lock = pending.level(level);
        let kind = lock.kind();
        let met = if kind.is_named() && names == Names::LookUp {
            held.met_by(lock)
        } else {
            0
        };
        held.verdicts[kind.index()][met]
    }
}

/// [`Held::met_by`]'s answer: bit 0, a name is held shared; bit 1, held
/// exclusive.
const MET_SHARED: usize = 1;
const MET_EXCLUSIVE: usize = 2;
const MET_BOTH: usize = MET_SHARED | MET_EXCLUSIVE;

impl Held {
    /// Which of `lock`'s names are held, shared and exclusive.
    fn met_by(&self, lock: &Lock) -> usize {
        let mut met = 0;
        if self.names.is_empty() {
            return met;
        }
        for name in lock.names().into_iter().flatten() {
            if self.filter[filter_slot(name)] == 0 {
                continue;
            }
            if let Some(holders) = self.names.get(name.as_str()) {
                met |= if holders.shared > 0 { MET_SHARED } else { 0 };
                met |= if holders.exclusive > 0 {
                    MET_EXCLUSIVE
                } else {
                    0
                };
                if met == MET_BOTH {
                    break;
                }
            }
        }
        met
    }

    /// Recomputes the verdict of every pending kind and every answer of
    /// `met_by` against the kinds held now: the worst cell and any known
    /// conflict over the running kinds present, as the table says. A
    /// running named set "overlaps" when `met_by` found a name held in
    /// its mode: the worst over many sets of one kind is the cell of
    /// "does any of them meet", since meeting never weighs less.
    fn refresh(&mut self) {
        for pending in Kind::ALL {
            for met in 0..=MET_BOTH {
                let mut verdict = Verdict::default();
                for running in Kind::ALL {
                    if pending == Kind::None || self.kinds[running.index()] == 0 {
                        continue;
                    }
                    let overlap = match running {
                        Kind::Shared => met & MET_SHARED != 0,
                        Kind::Exclusive => met & MET_EXCLUSIVE != 0,
                        _ => false,
                    };
                    verdict.conflict |= Kind::conflict(pending, running, || overlap);
                    verdict.worst = verdict.worst.max(weight(pending, running, || overlap));
                }
                self.verdicts[pending.index()][met] = verdict;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
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

    pub(crate) fn locks() -> impl Strategy<Value = Locks> {
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
            match aggregate.floor(&pending, &config) {
                None => prop_assert!(blocked),
                Some(floor) => prop_assert!(floor <= value),
            }
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
        assert!(running.levels.iter().all(|held| held.names.is_empty()
            && held.filter.iter().all(|&n| n == 0)
            && held.kinds.iter().all(|&n| n == 0)));
    }
}
