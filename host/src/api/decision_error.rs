//! How the errors of deciding map to the one API error: a placement
//! (`placement::PlacementError`, whichever source its hosts came from), the
//! pipeline's schedule and balance errors, and a snapshot or request field
//! that cannot be used. Every decision and inventory route maps its errors
//! here, so one failure has one code whichever route met it.

use serde_json::json;

use super::error::ApiError;
use crate::pipeline::{BalanceError, ScheduleError};
use crate::placement::{ClaimError, InventoryError, PlaceError, PlacementError};
use crate::store::PersistError;

/// The API error for a placement failure.
pub fn placement_error(e: PlacementError) -> ApiError {
    let message = e.to_string();
    match e {
        PlacementError::Busy { waited, .. } => ApiError::Busy {
            code: "cluster_busy",
            message,
            details: json!({ "waited_ms": waited.as_millis() as u64 }),
            retry_after_secs: 1,
        },
        PlacementError::TooManyInProgress(e) => ApiError::Busy {
            code: "cluster_busy",
            message,
            details: json!({ "in_progress": e.limit }),
            retry_after_secs: 1,
        },
        PlacementError::Place(PlaceError::HoldExceeded {
            placed,
            count,
            held,
        }) => ApiError::Busy {
            code: "decision_too_long",
            message,
            details: json!({ "placed": placed, "count": count, "held_ms": held.as_millis() as u64 }),
            retry_after_secs: 1,
        },
        PlacementError::Inventory(InventoryError::StaleSnapshot { given, held }) => {
            ApiError::Conflict {
                code: "stale_generation",
                message,
                details: json!({ "field": "generation", "given": given, "held": held }),
            }
        }
        PlacementError::Inventory(InventoryError::GenerationTooLarge { .. }) => {
            ApiError::Unprocessable {
                code: "invalid_snapshot",
                message,
                details: json!({ "field": "generation" }),
            }
        }
        PlacementError::Inventory(InventoryError::Invalid(e)) | PlacementError::Invalid(e) => {
            invalid_snapshot(e)
        }
        PlacementError::Place(PlaceError::Invalid(e)) => {
            if e.path.starts_with("candidates") {
                ApiError::Unprocessable {
                    code: "invalid_candidates",
                    message,
                    details: json!({ "field": e.path }),
                }
            } else {
                invalid_snapshot(e)
            }
        }
        PlacementError::Place(PlaceError::Instances { field, .. }) => ApiError::Unprocessable {
            code: "invalid_instances",
            message,
            details: json!({ "field": field }),
        },
        PlacementError::Place(PlaceError::BadRequest(reason)) => ApiError::InvalidValue {
            field: "body".to_owned(),
            message: reason,
        },
        PlacementError::Place(PlaceError::Schedule { instance, error }) => {
            schedule_error(*error, Some(&instance))
        }
        PlacementError::Place(PlaceError::InvalidSnapshot(e)) => invalid_snapshot(e),
        PlacementError::Balance(e) => balance_error(e),
        PlacementError::Place(PlaceError::Policy(e)) => ApiError::from(e),
        PlacementError::Place(PlaceError::Inventory(e)) => {
            ApiError::Internal(format!("held inventory: {e}"))
        }
        PlacementError::NoInventory { cluster_id } => ApiError::Conflict {
            code: "no_inventory",
            message,
            details: json!({ "cluster_id": cluster_id }),
        },
        PlacementError::Claim(ClaimError::NoClaim { vm_id }) => ApiError::NotFound {
            resource: "claim",
            id: vm_id,
        },
        PlacementError::Store(e) => ApiError::from(e),
        PlacementError::Persist(PersistError::NotOwner { cluster_id }) => {
            ApiError::cluster_moved(cluster_id)
        }
        PlacementError::Persist(e @ PersistError::Unavailable(_)) => {
            ApiError::database_unavailable(&e)
        }
        PlacementError::Persist(e) => ApiError::Internal(e.to_string()),
        PlacementError::Task(e) => ApiError::Internal(e),
    }
}

/// A snapshot or request field that cannot be used, named.
pub fn invalid_snapshot(e: crate::snapshot::SnapshotError) -> ApiError {
    if let Some(refused) = ApiError::refused_value(&e) {
        return refused;
    }
    ApiError::Unprocessable {
        code: "invalid_snapshot",
        message: e.to_string(),
        details: json!({ "field": e.path }),
    }
}

pub fn invalid_candidates(message: String) -> ApiError {
    ApiError::Unprocessable {
        code: "invalid_candidates",
        message,
        details: json!({ "field": "candidates" }),
    }
}

/// The API error for a decision the pipeline could not make; `instance`
/// names the instance of a multi-instance placement.
pub fn schedule_error(e: ScheduleError, instance: Option<&str>) -> ApiError {
    match e {
        ScheduleError::Params(p) => {
            ApiError::Internal(format!("stored parameters rejected at decision time: {p}"))
        }
        ScheduleError::CandidateOutOfRange { .. } | ScheduleError::DuplicateCandidate { .. } => {
            invalid_candidates(e.to_string())
        }
        ScheduleError::TooManyHosts { .. } => ApiError::Unprocessable {
            code: "invalid_snapshot",
            message: e.to_string(),
            details: json!({ "field": "hosts" }),
        },
        ScheduleError::Overloaded {
            ref unit,
            ref failed,
        } => ApiError::overloaded(unit, failed),
        ScheduleError::ScoreFailed {
            ref unit,
            ref failed,
        } => ApiError::Unprocessable {
            code: "score_failed",
            details: json!({ "unit": unit, "unit_error": failed.error.code(), "instance": instance }),
            message: match instance {
                Some(instance) => format!("instance `{instance}`: {e}"),
                None => e.to_string(),
            },
        },
        ScheduleError::FilterFailed {
            ref unit,
            ref failed,
        } => ApiError::Unprocessable {
            code: "filter_failed",
            details: json!({ "unit": unit, "unit_error": failed.error.code(), "instance": instance }),
            message: match instance {
                Some(instance) => format!("instance `{instance}`: {e}"),
                None => e.to_string(),
            },
        },
    }
}

/// The API error for a balancing round that could not be decided.
pub fn balance_error(e: BalanceError) -> ApiError {
    match e {
        BalanceError::NoBalanceUnit => ApiError::Unprocessable {
            code: "no_balance_unit",
            message: e.to_string(),
            details: json!({}),
        },
        BalanceError::Params(p) => {
            ApiError::Internal(format!("stored parameters rejected at decision time: {p}"))
        }
        BalanceError::CandidateOutOfRange { .. } | BalanceError::DuplicateCandidate { .. } => {
            invalid_candidates(e.to_string())
        }
        BalanceError::BalanceFailed {
            ref unit,
            ref failed,
        } if failed.error.is_overload() => ApiError::overloaded(unit, failed),
        BalanceError::BalanceFailed {
            ref unit,
            ref failed,
        } => ApiError::Unprocessable {
            code: "balance_failed",
            details: json!({ "unit": unit, "unit_error": failed.error.code() }),
            message: e.to_string(),
        },
        BalanceError::VmOnUnknownHost { .. } => ApiError::Unprocessable {
            code: "invalid_snapshot",
            message: e.to_string(),
            details: json!({ "field": "vms" }),
        },
        BalanceError::Schedule(e) => schedule_error(e, None),
    }
}
