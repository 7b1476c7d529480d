//! The component's exports, called by the code `export_unit!` expands to
//! (WebAssembly only; public for the macro, not for authors).
//!
//! Each converts the WIT values to model values, reads the inventory through
//! the import, and calls the same [`crate::entry`] function a native unit
//! runs.

use crate::bindings::types as wit;
use crate::entry;
use crate::imports;
use crate::model;
use crate::unit::{Balance, Filter, Score, Unit};

/// `metadata.info`.
pub fn info<U: Unit>() -> wit::UnitInfo {
    entry::info::<U>().into()
}

/// `filter.filter`.
pub fn filter<U: Filter>(request: wit::Request, candidates: Vec<u32>) -> Vec<wit::Rejection> {
    let inventory = imports::inventory();
    let request = model::Request::from(request);
    entry::filter::<U>(&inventory, &request, &candidates)
        .into_iter()
        .map(Into::into)
        .collect()
}

/// `score.score`.
pub fn score<U: Score>(request: wit::Request, candidates: Vec<u32>) -> wit::Scores {
    let inventory = imports::inventory();
    let request = model::Request::from(request);
    entry::score::<U>(&inventory, &request, &candidates).into()
}

/// `balance.balance`.
pub fn balance<U: Balance>(request: wit::BalanceRequest) -> Option<wit::Migration> {
    let inventory = imports::inventory();
    let request = model::BalanceRequest::from(request);
    entry::balance::<U>(&inventory, &request).map(Into::into)
}
