//! The order of the operations queue: which queued operation the host
//! leases next, as Ganeti's predictive queue decided it.
//!
//! Every operation declares the locks it will take, per level
//! ([`Locks`]). An operation whose declaration is *known* to conflict with
//! a running one is never leased ([`Running::blocks`]); among the others
//! the order is priority, then (with [`Order::Predictive`]) a contention
//! weight that ages to zero ([`Running::static_value`], [`aged_weight`]),
//! then submit order. A candidate that has waited K ticks or more
//! (starving) reserves its locks: nothing of its priority or worse that
//! conflicts with it is leased before it ([`next`]), so that one that
//! conflicts with everything (cluster-wide) is not skipped for ever. This crate is pure logic: no clock, no store, no
//! I/O; the host owns the queue and passes ages and running sets in.
//!
//! Ganeti's design is `doc/design-predictive-queue.rst`; what it actually
//! shipped (on the abandoned 2.17 line) is `src/Ganeti/JQueue/LockDecls.hs`
//! and `JQScheduler.hs`. docs/operations.md explains every constant.

mod lock;
mod order;
mod running;
mod weight;

pub use lock::{Level, Lock, LockError, LockErrorKind, Locks, MAX_NAMES_PER_LEVEL, conflicts};
pub use order::{
    Candidate, Order, PRIORITY_DEFAULT, PRIORITY_HIGHEST, PRIORITY_LOWEST, aged_weight,
    is_starving, next, reserving,
};
pub use running::Running;
pub use weight::{
    BASE_WEIGHT, CLUSTER_WIDE_WEIGHT, Config, DEGRADE_WEIGHT, HEAVY_DEGRADE_WEIGHT,
    MAYBE_BLOCK_WEIGHT, NO_WEIGHT, STARVATION_TICKS, SURE_BLOCK_WEIGHT, TICK, compare,
};
