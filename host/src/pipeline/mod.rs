//! The scheduling pipeline: a policy's units, run in order over a cluster
//! snapshot, turned into one decision with a record of why.
//!
//! * [`Policy`] (built and checked by [`PolicyBuilder`]) says which units
//!   filter, score and balance, and with which parameters.
//! * [`schedule`] places one VM: filters, then scores combined by rank
//!   (oVirt) or normalised (Nova), ties to the earliest candidate.
//! * [`balance`] asks the balance unit for a migration and lets the same
//!   filters and scores decide whether it happens.
//! * [`Explain`] records every step for people and golden tests.
//! * [`ReuseCache`] keeps per-host units' answers between decisions, so
//!   [`schedule_reusing`] asks them only about hosts that changed.
//! * A [`Lender`] lends a decision idle cores ([`schedule_with`]): big
//!   per-host filters run in chunks and weights side by side (`parallel`).
//!
//! The pipeline sees units only through [`crate::unit::Unit`], so the same
//! code runs sandboxed WebAssembly units and native builds of their source.

mod balance;
mod combine;
mod degraded;
mod explain;
mod native;
mod parallel;
mod params;
mod policy;
mod reuse;
mod schedule;

pub use balance::{BalanceDecision, BalanceError, BalanceInput, balance};
pub use degraded::{Degraded, merge as merge_degraded};
pub(crate) use explain::nothing_reused;
pub use explain::{
    BalanceExplain, Explain, FailureRecord, FilterRecord, Outcome, ScoreRecord, Standing,
    TIE_BREAK_RULE,
};
pub use parallel::{EveryCore, Lender, Loan, MIN_SIDE_BY_SIDE_SURVIVORS};
pub use params::{
    PATTERN_SIZE_LIMIT_BYTES, ParamError, ParamValues, SpecError, UnitParamsError, check_specs,
    unit_params,
};
pub use policy::{
    Combination, DEFAULT_FACTOR, DEFAULT_WEIGHT_ON_FAILURE, FilterStep, OnFailure, Policy,
    PolicyBuilder, PolicyError, Position, ScoreStep, only_declared,
};
pub use reuse::{
    ContentStamps, Kept, Reuse, ReuseCache, Stamp, Stamps, content_stamps, fresh_stamps,
};
pub use schedule::{
    Decision, Means, Ranked, ScheduleError, ScheduleRequest, schedule, schedule_calling_every_unit,
    schedule_reusing, schedule_with,
};
