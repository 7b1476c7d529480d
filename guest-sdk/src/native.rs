//! A unit compiled natively, as plain function pointers, for benchmarks and
//! tests that run a unit's own source outside WebAssembly.
//!
//! `export_unit!` defines `native_unit()` in every unit crate built for a
//! native target; its functions are the same [`crate::entry`] functions the
//! component's exports call, so there is no hand-written native twin.

use crate::Inventory;
use crate::model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};

/// A filter entry point; see [`crate::entry::filter`].
pub type FilterFn = fn(&Inventory, &Request, &[u32]) -> Vec<Rejection>;
/// A score entry point; see [`crate::entry::score`].
pub type ScoreFn = fn(&Inventory, &Request, &[u32]) -> Scores;
/// A balance entry point; see [`crate::entry::balance`].
pub type BalanceFn = fn(&Inventory, &BalanceRequest) -> Option<Migration>;

/// A unit's description and the roles it implements, exactly those listed
/// in its `export_unit!`.
#[derive(Clone, Debug)]
pub struct NativeUnit {
    pub info: UnitInfo,
    pub filter: Option<FilterFn>,
    pub score: Option<ScoreFn>,
    pub balance: Option<BalanceFn>,
}
