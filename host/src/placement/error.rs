//! Why a placement operation failed: the one error of the placement
//! service, which the API maps to its answers.

use std::time::Duration;

use uuid::Uuid;

use super::claims::ClaimError;
use super::fairness::TooManyInProgress;
use super::hosts::InventoryError;
use super::persist::PersistError;
use super::place::PlaceError;
use crate::pipeline::BalanceError;
use crate::snapshot::SnapshotError;
use crate::store::StoreError;

/// Why a placement operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error(
        "cluster {cluster_id} is busy: its lock was not free within {} ms; retry",
        waited.as_millis()
    )]
    Busy { cluster_id: Uuid, waited: Duration },
    #[error(transparent)]
    TooManyInProgress(#[from] TooManyInProgress),
    #[error(transparent)]
    Inventory(#[from] InventoryError),
    #[error(transparent)]
    Invalid(#[from] SnapshotError),
    #[error(transparent)]
    Place(#[from] PlaceError),
    #[error(transparent)]
    Balance(#[from] BalanceError),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error(
        "cluster {cluster_id} has no inventory: push a snapshot first, or send the hosts inline"
    )]
    NoInventory { cluster_id: Uuid },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Persist(#[from] PersistError),
    #[error("placement task failed: {0}")]
    Task(String),
}
