//! Running a unit's own source natively through the pipeline: `Unit` for the
//! SDK's [`NativeUnit`], so that benchmarks and tests compare the very same
//! code inside and outside the sandbox.
//!
//! Native calls are not metered (`fuel` is `None`) and cannot be stopped, so
//! a native unit is for code we build ourselves, never for uploads. A panic
//! is caught and reported as a trap, as the sandbox reports a guest panic.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use sandpiper_guest::native::NativeUnit;
use sandpiper_model::Inventory;
use sandpiper_model::{BalanceRequest, Migration, Rejection, Request, Scores, UnitInfo};

use crate::unit::{CallResult, Called, ColumnsRead, Exports, Failed, Role, Unit, UnitError, Usage};

/// The trap name a caught native panic is reported with.
const NATIVE_PANIC_TRAP: &str = "native panic";

impl Unit for NativeUnit {
    fn info(&self) -> &UnitInfo {
        &self.info
    }

    fn exports(&self) -> Exports {
        Exports {
            filter: self.filter.is_some(),
            score: self.score.is_some(),
            balance: self.balance.is_some(),
        }
    }

    fn filter(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Vec<Rejection>> {
        let f = self.filter.ok_or_else(|| not_exported(Role::Filter))?;
        timed(|| f(inventory, request, candidates))
    }

    fn score(
        &self,
        inventory: &Arc<Inventory>,
        request: &Request,
        candidates: &[u32],
    ) -> CallResult<Scores> {
        let f = self.score.ok_or_else(|| not_exported(Role::Score))?;
        timed(|| f(inventory, request, candidates))
    }

    fn balance(
        &self,
        inventory: &Arc<Inventory>,
        request: &BalanceRequest,
    ) -> CallResult<Option<Migration>> {
        let f = self.balance.ok_or_else(|| not_exported(Role::Balance))?;
        timed(|| f(inventory, request))
    }
}

fn not_exported(role: Role) -> Failed {
    Failed {
        error: UnitError::NotExported(role),
        usage: Usage::default(),
    }
}

/// Runs a native entry point, timing it and turning a panic into a trap.
fn timed<T>(call: impl FnOnce() -> T) -> CallResult<T> {
    let start = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(call));
    let usage = Usage {
        fuel: None,
        elapsed: start.elapsed(),
    };
    match outcome {
        // Read directly from the snapshot, unseen.
        Ok(value) => Ok(Called {
            value,
            usage,
            read: ColumnsRead::ALL,
        }),
        Err(payload) => {
            let panic = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned());
            Err(Failed {
                error: UnitError::Trap {
                    trap: NATIVE_PANIC_TRAP.to_owned(),
                    panic,
                },
                usage,
            })
        }
    }
}
