//! The one place a unit's trait methods are called from.
//!
//! The WebAssembly exports (after converting the WIT values) and
//! [`crate::native::NativeUnit`] both call these functions, so a unit runs
//! the very same logic sandboxed and natively: benchmarks and tests that run
//! it natively measure and check what the component does.

use crate::Inventory;
use crate::model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};
use crate::unit::{Balance, BalanceContext, Context, Filter, Score, Unit};

/// The unit's self-description.
pub fn info<U: Unit>() -> UnitInfo {
    U::info()
}

/// Runs `U`'s filter over `candidates`.
pub fn filter<U: Filter>(
    inventory: &Inventory,
    request: &Request,
    candidates: &[u32],
) -> Vec<Rejection> {
    U::filter(&Context::new(inventory, request, U::info), candidates)
}

/// Runs `U`'s score over `candidates`.
pub fn score<U: Score>(inventory: &Inventory, request: &Request, candidates: &[u32]) -> Scores {
    U::score(&Context::new(inventory, request, U::info), candidates)
}

/// Runs `U`'s balancer.
pub fn balance<U: Balance>(inventory: &Inventory, request: &BalanceRequest) -> Option<Migration> {
    U::balance(&BalanceContext::new(inventory, request, U::info))
}
