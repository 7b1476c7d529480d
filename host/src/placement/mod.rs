//! Placement with state: the host inventory Sandpiper holds for a cluster
//! (a full snapshot, then a stream of generation-stamped updates), the
//! claims every decision records against the host it chose, and placing
//! one VM or `count` instances so that no host is ever overcommitted,
//! however many callers decide at once.
//!
//! * [`hosts`]: the inventory records and the generation rules that make a
//!   late or repeated report harmless.
//! * [`claims`]: the claim ledger, one claim per VM, and how claims end
//!   (confirmed and covered, reported, released, expired).
//! * [`resources`]: what a VM consumes and which usage columns a pending
//!   claim moves.
//! * [`columns`]: the held inventory kept as ready columns, and the
//!   per-decision snapshot with pending claims applied.
//! * [`sample`]: how many held hosts a decision considers (a rotating
//!   window above 1,000 hosts).
//! * [`request`]: the one schedule request, whichever source its hosts
//!   come from, and the decision to make of it ([`PlaceJob`]).
//! * [`cluster`] and [`place`]: one cluster's state and every operation on
//!   it, synchronous and clock-free, so the model-based test runs the very
//!   code the server runs; [`place`] also decides over hosts sent inline.
//! * [`balance`]: a balancing round over either source of hosts.
//! * [`service`]: the clusters' locks, the delayed retry, and the one
//!   entry point of a decision, which records the caller's log entry with
//!   the decision's claims before its cluster is unlocked.
//! * [`turns`]: held decisions queued at their cluster, decided back to
//!   back by whichever request holds its lock.
//! * [`config`] and [`error`]: the service's settings with their
//!   defaults, and its one error.
//! * [`time`]: wall-clock instants for claims, which survive restarts.
//! * [`fairness`]: per-cluster bounds on decisions in progress and on the
//!   CPU their units may take, so one cluster cannot slow the others.
//!
//! How concurrent decisions are kept from overcommitting is documented in
//! docs/architecture.md ("Concurrency: one decision per cluster at a time").

pub mod args;
pub mod balance;
pub mod claims;
pub mod cluster;
pub mod columns;
pub mod config;
pub mod error;
pub mod fairness;
pub mod hosts;
pub mod persist;
pub mod place;
pub mod request;
pub mod resources;
pub mod sample;
pub mod service;
#[cfg(test)]
mod test_store;
pub mod turns;
pub mod usage;
/// Wall-clock instants, defined below placement (the store keeps them too).
pub use crate::time;

pub use crate::inputs::MAX_INSTANCES_PER_REQUEST;
pub use args::PlacementArgs;
pub use balance::{BalanceJob, Balanced};
pub use claims::{Claim, ClaimError, ClaimLedger, ClaimState};
pub use cluster::{Change, ClusterState, InventorySummary, UpdateResult};
pub use config::PlacementConfig;
pub use error::PlacementError;
pub use fairness::{Admission, Fairness, FairnessConfig, TooManyInProgress};
pub use hosts::{Applied, HostInventory, HostRecord, HostUpdate, InventoryError};
pub use persist::{LoggedDecision, Persister, Retention};
pub use place::{
    InlineReuse, Pick, PlaceContext, PlaceError, PlaceOutcome, over_cluster, over_snapshot,
    pick_over,
};
pub use request::{
    ExplainDetail, HostsSource, InlineHosts, Mode, PlaceJob, PlaceRequest, SourceMismatch,
    check_compact_request,
};
pub use resources::Resources;
pub use sample::{Sample, Sampling};
pub use service::{HeldView, PlacementService};
pub use time::Timestamp;
pub use turns::{Decided, Recorder};
pub use usage::HostUsage;
