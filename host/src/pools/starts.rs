//! Starting a pool member, whoever asks (the monitor topping a pool up, or
//! an allocation that found no member running): the member's VM is placed
//! over the cluster's held inventory with the cluster's policy and a claim
//! on the chosen host, the decision recorded in the decisions log like an
//! engine's (`api::schedule::place_held`); then a `start` operation
//! carrying that claim is queued (origin: the pool), which an engine
//! leases and carries out. When it succeeds the queue confirms the claim,
//! when it fails the queue releases it; the member reads its state from
//! that operation (`super::member`).

use serde_json::json;
use uuid::Uuid;

use super::member::Member;
use crate::api::AppState;
use crate::api::error::ApiError;
use crate::api::schedule::place_held;
use crate::operations::{Kind, NewOperation, Origin, start_locks};
use crate::snapshot::VmSpec;
use crate::store::vm_pools::PoolRecord;

/// Priority of the start operations pools make: Ganeti's normal job
/// priority. A prestarted VM is a convenience, never more urgent than what
/// an engine queued itself.
pub const START_PRIORITY: i32 = 0;

/// A member started: placed, claimed, and its start operation queued.
#[derive(Clone, Debug, PartialEq)]
pub struct Started {
    pub vm_id: String,
    pub operation_id: Uuid,
    pub host_id: String,
    pub decision_id: Uuid,
}

/// A member that could not be started; nothing of it is left behind (no
/// claim, no operation, the member unchanged).
#[derive(Debug)]
pub struct StartFailed {
    pub vm_id: String,
    /// The placement decision, when one was made (and logged).
    pub decision_id: Option<Uuid>,
    pub error: ApiError,
}

impl StartFailed {
    /// Why, in one line.
    pub fn reason(&self) -> String {
        self.error.to_string()
    }
}

/// The members' shape, stored as JSON.
pub fn shape(pool: &PoolRecord) -> Result<VmSpec, ApiError> {
    serde_json::from_str(&pool.vm)
        .map_err(|e| ApiError::Internal(format!("pool {}: stored VM shape: {e}", pool.id)))
}

/// Places `member` and queues its start. The caller holds the pool's lock.
pub async fn start_member(
    state: &AppState,
    pool: &PoolRecord,
    member: &Member,
) -> Result<Started, StartFailed> {
    let vm_id = member.row.vm_id.clone();
    let failed = |decision_id, error| StartFailed {
        vm_id: vm_id.clone(),
        decision_id,
        error,
    };
    let mut vm = shape(pool).map_err(|e| failed(None, e))?;
    vm.id = vm_id.clone();
    let placed = place_held(state, pool.cluster_id, vm.clone(), None)
        .await
        .map_err(|e| failed(None, e))?;
    let Some(host_id) = placed.host_id else {
        let reason = placed
            .reason
            .unwrap_or_else(|| "no host can take the VM".to_owned());
        return Err(failed(
            Some(placed.decision_id),
            ApiError::Conflict {
                code: "pool_vm_not_placed",
                message: format!("VM `{vm_id}` could not be placed: {reason}"),
                details: json!({
                    "vm_id": vm_id,
                    "decision_id": placed.decision_id,
                    "reason": reason,
                }),
            },
        ));
    };
    // The member is pointed at its start operation before the operation
    // exists: stopped in between, the member reads as down (its operation
    // is unknown to the queue) and is simply started again. The other order
    // could leave a queued start no member knows about, holding the VM's
    // lock, so that the member's own later start would never be leased.
    let operation_id = Uuid::new_v4();
    record_start(
        state,
        pool,
        member.row.idx,
        Some(operation_id),
        Some(&host_id),
    )
    .await
    .map_err(|e| failed(Some(placed.decision_id), e))?;
    let new = NewOperation {
        id: operation_id,
        cluster_id: pool.cluster_id,
        kind: Kind::Start,
        priority: START_PRIORITY,
        locks: start_locks(&vm_id, &host_id),
        payload: json!({
            "vm": vm,
            "host_id": host_id,
            "pool_id": pool.id,
            "decision_id": placed.decision_id,
            "stateless": !pool.stateful,
        }),
        origin: Origin::Pool { pool_id: pool.id },
        vm_id: Some(vm_id.clone()),
    };
    if let Err(e) = state.operations().submit(new).await {
        // Nothing will carry the claim out or back: free its host now
        // rather than when it expires, and give the member back its
        // previous start (if this fails too, it points at an operation that
        // does not exist, and reads as down all the same).
        if let Err(release) = state
            .placement()
            .release(pool.cluster_id, vm_id.clone())
            .await
        {
            tracing::warn!(%vm_id, error = %release, "claim of an unqueued start not released");
        }
        let previous = (member.row.start_operation_id, member.row.host_id.as_deref());
        if let Err(restore) =
            record_start(state, pool, member.row.idx, previous.0, previous.1).await
        {
            tracing::warn!(%vm_id, error = %restore, "pool member's previous start not restored");
        }
        return Err(failed(
            Some(placed.decision_id),
            crate::api::operations::operation_error(e),
        ));
    }
    Ok(Started {
        vm_id,
        operation_id,
        host_id,
        decision_id: placed.decision_id,
    })
}

/// Points member `idx` at its start operation and where it placed the VM.
async fn record_start(
    state: &AppState,
    pool: &PoolRecord,
    idx: u32,
    operation_id: Option<Uuid>,
    host_id: Option<&str>,
) -> Result<(), ApiError> {
    let mut tx = state.store().write().await?;
    tx.set_vm_pool_member_start(pool.id, idx, operation_id, host_id)
        .await?;
    tx.commit().await?;
    Ok(())
}
