//! What a user's engine does with a pool: take a member
//! ([`allocate`], oVirt's `AllocateVmFromPoolCommand`) and give it back
//! ([`give_back`]). Both hold the pool's lock, so neither races the
//! monitor or the other for a member.

use serde_json::json;
use uuid::Uuid;

use super::Pools;
use super::member::{Member, RunState};
use super::starts::start_member;
use crate::api::AppState;
use crate::api::error::ApiError;
use crate::store::Db;
use crate::store::vm_pools::PoolRecord;

/// A pool with its members.
pub struct Loaded {
    pub pool: PoolRecord,
    pub members: Vec<Member>,
}

/// Reads a pool and its members (404 when it does not exist).
pub async fn load(conn: &mut Db, pool_id: Uuid) -> Result<Loaded, ApiError> {
    let pool = conn
        .vm_pool(pool_id)
        .await?
        .ok_or_else(|| ApiError::NotFound {
            resource: "vm pool",
            id: pool_id.to_string(),
        })?;
    let members = conn
        .vm_pool_members(pool_id)
        .await?
        .into_iter()
        .map(Member::new)
        .collect();
    Ok(Loaded { pool, members })
}

async fn load_now(state: &AppState, pool_id: Uuid) -> Result<Loaded, ApiError> {
    let mut conn = state.store().read().await?;
    load(&mut conn, pool_id).await
}

/// A member given to a user.
pub struct Allocated {
    pub member: Member,
    /// The start operation to wait for; `None` when the member was up.
    pub starting: Option<Uuid>,
}

/// Gives `user` a member: one up and free when there is one (at once),
/// else one already starting, else a down one started now. A pool with
/// no free member answers 409 `pool_exhausted` and changes nothing; a
/// down member that cannot be placed answers 409 `pool_vm_not_placed`
/// (or the placement's own error) and stays free and down.
pub async fn allocate(
    state: &AppState,
    pools: &Pools,
    pool_id: Uuid,
    user: &str,
) -> Result<Allocated, ApiError> {
    let _lock = pools.lock(pool_id).await;
    let Loaded { pool, members } = load_now(state, pool_id).await?;
    let free = |run: RunState| members.iter().find(|m| m.is_free() && m.run == run);
    let (chosen, starting) = if let Some(m) = free(RunState::Up) {
        (m.clone(), None)
    } else if let Some(m) = free(RunState::Starting) {
        (m.clone(), m.row.start_operation_id)
    } else if let Some(m) = free(RunState::Down) {
        // Started before it is assigned: if the assignment is then lost
        // (a crash), the member is simply one more prestarted VM.
        let started = start_member(state, &pool, m).await.map_err(|f| f.error)?;
        (m.clone(), Some(started.operation_id))
    } else {
        let assigned = members.iter().filter(|m| !m.is_free()).count();
        return Err(ApiError::Conflict {
            code: "pool_exhausted",
            message: format!(
                "pool `{}` has no free VM: all {assigned} of its {} VMs are assigned",
                pool.name, pool.size
            ),
            details: json!({ "pool": pool.name, "size": pool.size, "assigned": assigned }),
        });
    };
    let mut tx = state.store().write().await?;
    tx.set_vm_pool_member_user(pool_id, chosen.row.idx, Some(user))
        .await?;
    tx.commit().await?;
    // One fewer prestarted VM: top the pool up.
    pools.trigger();
    let member = load_now(state, pool_id)
        .await?
        .members
        .into_iter()
        .find(|m| m.row.idx == chosen.row.idx)
        .ok_or_else(|| ApiError::Internal(format!("member {} vanished", chosen.row.vm_id)))?;
    Ok(Allocated { member, starting })
}

/// Takes a member back from its user. In a stateful pool the VM keeps
/// running as it is and is free again (counted as prestarted when up).
/// In a stateless pool the user's changes are discarded: the member is
/// down again (the engine powers the VM off and restores its base
/// snapshot, as oVirt does when a stateless pool VM stops), and the
/// monitor starts a fresh one if the pool needs it. A member with no user
/// answers 409 `vm_not_assigned`.
pub async fn give_back(
    state: &AppState,
    pools: &Pools,
    pool_id: Uuid,
    vm_id: &str,
) -> Result<Member, ApiError> {
    let _lock = pools.lock(pool_id).await;
    let Loaded { pool, members } = load_now(state, pool_id).await?;
    let member = members
        .into_iter()
        .find(|m| m.row.vm_id == vm_id)
        .ok_or_else(|| ApiError::NotFound {
            resource: "vm pool member",
            id: vm_id.to_owned(),
        })?;
    if member.is_free() {
        return Err(ApiError::Conflict {
            code: "vm_not_assigned",
            message: format!(
                "VM `{vm_id}` of pool `{}` is not assigned to anyone",
                pool.name
            ),
            details: json!({ "pool": pool.name, "vm_id": vm_id }),
        });
    }
    let mut tx = state.store().write().await?;
    tx.set_vm_pool_member_user(pool_id, member.row.idx, None)
        .await?;
    if !pool.stateful {
        tx.set_vm_pool_member_start(pool_id, member.row.idx, None, None)
            .await?;
    }
    let after = load(&mut tx, pool_id)
        .await?
        .members
        .into_iter()
        .find(|m| m.row.idx == member.row.idx)
        .ok_or_else(|| ApiError::Internal(format!("member {vm_id} vanished")))?;
    tx.commit().await?;
    pools.trigger();
    Ok(after)
}
