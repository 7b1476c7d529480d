//! `InstantiateTrap`: a unit whose component traps while it is being
//! instantiated, before any export can be called. Not shipped.
//!
//! wit-component turns a core module's `_initialize` export into the
//! component's start function, which runs during instantiation; this
//! crate's `_initialize` executes `unreachable`. Natively there is no
//! instantiation, and `native_unit()` is an ordinary filter that rejects
//! nothing.

use sandpiper_guest::prelude::*;

/// The `InstantiateTrap` test unit.
pub struct InstantiateTrap;

impl Unit for InstantiateTrap {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "InstantiateTrap",
            "Test unit that traps during instantiation. Never use in a policy.",
        )
    }
}

impl Filter for InstantiateTrap {
    fn filter(_cx: &Context<'_>, _candidates: &[u32]) -> Vec<Rejection> {
        Vec::new()
    }
}

/// Called by the component's start function, during instantiation.
#[cfg(target_arch = "wasm32")]
#[unsafe(export_name = "_initialize")]
pub extern "C" fn initialize() {
    core::arch::wasm32::unreachable()
}

sandpiper_guest::export_unit!(InstantiateTrap: filter);
