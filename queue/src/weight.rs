//! The seed's 7×7 table: how much a pending lock is likely to wait for a
//! running one at the same level. Its values are Ganeti's constants
//! (`staticLock*Weight` in `src/Ganeti/Constants.hs` on `attic/master`).

use std::time::Duration;

use crate::lock::{Kind, Lock};

/// `staticLockNoWeight`: no contention, none added.
pub const NO_WEIGHT: f64 = 0.0;
/// `staticLockDegradeWeight`: no contention now, but later contention
/// becomes more likely (a shared lock taken).
pub const DEGRADE_WEIGHT: f64 = 0.3;
/// `staticLockHeavyDegradeWeight`: no contention now, but later contention
/// becomes much more likely (an exclusive lock taken).
pub const HEAVY_DEGRADE_WEIGHT: f64 = 0.5;
/// `staticLockMaybeBlockWeight`: might wait; not enough is known.
pub const MAYBE_BLOCK_WEIGHT: f64 = 1.5;
/// `staticLockSureBlockWeight`: will wait.
pub const SURE_BLOCK_WEIGHT: f64 = 3.0;
/// `staticLockBaseWeight`: every operation's floor, so that aging has
/// something to shrink even with nothing running.
pub const BASE_WEIGHT: f64 = 1.0;
/// Added to the base for a cluster-wide operation: the worst cell on every
/// level (3 × 5), so the BGL never weighs more or less than the worst
/// possible declaration.
pub const CLUSTER_WIDE_WEIGHT: f64 = SURE_BLOCK_WEIGHT * 5.0;

/// A cell: a weight, or one that depends on whether two named sets share
/// a name (the seed's "if j=i"; Ganeti's code tests i∩j≠∅, and so do we).
#[derive(Clone, Copy)]
enum Cell {
    Fixed(f64),
    Overlap { yes: f64, no: f64 },
}

const O: Cell = Cell::Fixed(NO_WEIGHT);
const D: Cell = Cell::Fixed(DEGRADE_WEIGHT);
const H: Cell = Cell::Fixed(HEAVY_DEGRADE_WEIGHT);
const M: Cell = Cell::Fixed(MAYBE_BLOCK_WEIGHT);
const S: Cell = Cell::Fixed(SURE_BLOCK_WEIGHT);
const SD: Cell = Cell::Overlap {
    yes: SURE_BLOCK_WEIGHT,
    no: DEGRADE_WEIGHT,
};
const SH: Cell = Cell::Overlap {
    yes: SURE_BLOCK_WEIGHT,
    no: HEAVY_DEGRADE_WEIGHT,
};

/// Rows: the pending lock; columns: the running one; both in [`Kind::ALL`]
/// order (None, Shared, UnknownShared, AllShared, Exclusive,
/// UnknownExclusive, AllExclusive). tests/cases/compare.txt spells out
/// every cell.
#[rustfmt::skip]
const TABLE: [[Cell; Kind::COUNT]; Kind::COUNT] = [
    // None Sh  UnSh AlSh Ex  UnEx AlEx
    [O,   O,  O,   O,   O,  O,   O], // None
    [D,   O,  O,   O,   SD, M,   S], // Shared(i)
    [D,   D,  D,   D,   M,  M,   S], // UnknownShared
    [D,   D,  D,   D,   S,  S,   S], // AllShared
    [H,   SH, M,   S,   SH, M,   S], // Exclusive(i)
    [H,   M,  M,   S,   M,  M,   S], // UnknownExclusive
    [H,   S,  S,   S,   S,  S,   S], // AllExclusive
];

/// The cell of `pending` against `running`; `overlap` is asked only for
/// the cells that depend on it. Every such cell weighs more when the sets
/// meet, so the worst over many running sets of one kind is this with
/// "does any of them meet", which is what [`crate::Running`] relies on.
pub(crate) fn weight(pending: Kind, running: Kind, overlap: impl FnOnce() -> bool) -> f64 {
    match TABLE[pending.index()][running.index()] {
        Cell::Fixed(weight) => weight,
        Cell::Overlap { yes, no } => {
            if overlap() {
                yes
            } else {
                no
            }
        }
    }
}

/// The seed's table: `pending` compared with `running`'s lock at the same
/// level.
pub fn compare(pending: &Lock, running: &Lock) -> f64 {
    weight(pending.kind(), running.kind(), || pending.overlaps(running))
}

/// Ganeti's `jobQueueTickInSeconds`: the unit ages are counted in.
pub const TICK: Duration = Duration::from_secs(30);
/// Ganeti's `jobQueueStarvationCoeff` (K): after this many ticks (15
/// minutes at 30 s) every operation weighs 0, so the oldest of a priority
/// runs first whatever it locks: the anti-starvation guarantee.
pub const STARVATION_TICKS: f64 = 30.0;
/// The predictive order's tunables; the defaults are Ganeti's.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Every operation's floor weight ([`BASE_WEIGHT`]).
    pub base: f64,
    /// The unit of age ([`TICK`]).
    pub tick: Duration,
    /// K: ticks until every weight is 0 ([`STARVATION_TICKS`]).
    pub starvation_ticks: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: BASE_WEIGHT,
            tick: TICK,
            starvation_ticks: STARVATION_TICKS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Running` relies on: meeting never weighs less.
    #[test]
    fn overlap_never_weighs_less() {
        for pending in Kind::ALL {
            for running in Kind::ALL {
                assert!(weight(pending, running, || true) >= weight(pending, running, || false));
            }
        }
    }

    /// The table and the conflict rule say the same thing: a known conflict
    /// is exactly a "sure block" cell, both ways round.
    #[test]
    fn sure_block_is_a_known_conflict() {
        for a in Kind::ALL {
            for b in Kind::ALL {
                for overlap in [false, true] {
                    let conflict = Kind::conflict(a, b, || overlap);
                    assert_eq!(conflict, Kind::conflict(b, a, || overlap), "{a:?} {b:?}");
                    let sure = weight(a, b, || overlap) == SURE_BLOCK_WEIGHT;
                    assert_eq!(conflict, sure, "{a:?} vs {b:?}, overlap {overlap}");
                }
            }
        }
    }
}
