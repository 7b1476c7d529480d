//! The pool monitor (oVirt's `VmPoolMonitor`): every interval, and at once
//! when triggered (a pool created or changed, a member allocated or
//! returned, the server started), each pool whose free running members
//! (starting or up) number fewer than its `prestarted_vms` gets up to
//! `batch_size` of its down, free members started (`super::starts`).
//!
//! **Failures, precisely.** oVirt's monitor stops a run over a pool after
//! `VmPoolMonitorMaxAttempts` consecutive failed `RunVm` calls; a success
//! resets the count. Our starts are asynchronous (an engine carries them
//! out later), so a run counts, in order:
//!
//! 1. the pool's start operations that failed (or were cancelled) since
//!    the previous run, each counted once, in the order they finished,
//!    only those after the last start of the pool that succeeded since
//!    the previous run (a success resets the count, as in oVirt);
//! 2. then each member it tries: a start that cannot be placed (no host,
//!    no inventory, the cluster busy, ...) adds one, a start placed and
//!    queued resets the count to zero.
//!
//! When the count reaches `max_attempts` the run stops for that pool
//! (`stopped_early`); the next run tries again. So after three failed
//! starts in a row the next run starts nothing and reports them, and the
//! one after retries: best effort, as oVirt's prestarted VMs are.
//!
//! Each run's result is stored with the pool (`last_run`, shown by
//! `GET /api/v1/vmpools/{id}`), so it survives a restart and the failures
//! it counted are never counted again.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::Pools;
use super::actions::{Loaded, load};
use super::member::{Member, RunState, StartState};
use super::starts::start_member;
use crate::api::AppState;
use crate::api::error::ApiError;
use crate::time::Timestamp;

/// What one run did for one pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MonitorRun {
    /// When the run began (RFC 3339).
    pub at: String,
    /// The same, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The pool's `prestarted_vms` then.
    pub wanted: u32,
    /// Free members starting or up when the run began.
    pub prestarted: u32,
    /// Members the run started (placed, claimed, start queued).
    pub started: Vec<RunStart>,
    /// Failures the run counted: start operations that failed since the
    /// previous run (`kind: start`) and starts it could not make
    /// (`kind: placement`).
    pub failures: Vec<RunFailure>,
    /// The run gave up on the pool after `max_attempts` consecutive
    /// failures, with members still to start.
    pub stopped_early: bool,
    /// Failed start operations counted by this run or an earlier one, so
    /// that none is counted twice.
    pub counted_failed_starts: Vec<Uuid>,
}

/// A member a run started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunStart {
    pub vm_id: String,
    pub host_id: String,
    pub operation_id: Uuid,
    pub decision_id: Uuid,
}

/// A failure a run counted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunFailure {
    pub vm_id: String,
    /// `start`: its start operation failed; `placement`: it could not be
    /// placed or queued.
    pub kind: String,
    pub reason: String,
    /// Its error code, for a `placement` failure.
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub operation_id: Option<Uuid>,
    #[serde(default)]
    pub decision_id: Option<Uuid>,
}

/// Runs over every pool, then waits for the interval or a trigger, for as
/// long as the server runs.
pub async fn run_forever(state: AppState, pools: Pools) {
    let interval = pools.config().interval;
    loop {
        run_all(&state, &pools).await;
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = pools.triggered() => {}
        }
    }
}

/// One run over every pool; a pool that fails is logged and the others
/// still run.
pub async fn run_all(state: &AppState, pools: &Pools) {
    let ids = match state.store().read().await {
        // With several replicas, a pool is kept topped up by the owner of
        // its cluster (docs/fleet.md).
        Ok(mut conn) => conn.vm_pools().await.map(|p| {
            p.into_iter()
                .filter(|p| state.fleet().owns(p.cluster_id))
                .map(|p| p.id)
        }),
        Err(e) => Err(e),
    };
    let ids: Vec<Uuid> = match ids {
        Ok(ids) => ids.collect(),
        Err(e) => {
            tracing::warn!(error = %e, "pool monitor: pools not read");
            return;
        }
    };
    for id in ids {
        match run_pool(state, pools, id).await {
            Ok(run) if !run.started.is_empty() || !run.failures.is_empty() => tracing::info!(
                pool = %id,
                started = run.started.len(),
                failures = run.failures.len(),
                stopped_early = run.stopped_early,
                "pool monitor run"
            ),
            Ok(_) => {}
            // Deleted since it was listed.
            Err(ApiError::NotFound { .. }) => {}
            Err(e) => tracing::warn!(pool = %id, error = %e, "pool monitor run failed"),
        }
    }
}

/// One run over one pool, holding its lock; its result is stored as the
/// pool's `last_run`.
pub async fn run_pool(
    state: &AppState,
    pools: &Pools,
    pool_id: Uuid,
) -> Result<MonitorRun, ApiError> {
    let config = *pools.config();
    let _lock = pools.lock(pool_id).await;
    let Loaded { pool, members } = {
        let mut conn = state.store().read().await?;
        load(&mut conn, pool_id).await?
    };
    let previous: Option<MonitorRun> = pool
        .last_run
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok());
    let now = Timestamp::now();
    let mut run = MonitorRun {
        at: now.to_rfc3339(),
        at_ms: now.0,
        wanted: pool.prestarted_vms,
        prestarted: members.iter().filter(|m| m.is_prestarted()).count() as u32,
        ..MonitorRun::default()
    };

    // 1. Start operations that failed since the previous run.
    let (fresh, counted) = failed_since(previous.as_ref(), &members);
    run.counted_failed_starts = counted;
    let mut consecutive = 0;
    for FreshFailure {
        vm_id,
        reason,
        operation_id,
        carried,
        ..
    } in fresh
    {
        run.failures.push(RunFailure {
            vm_id,
            kind: "start".to_owned(),
            reason,
            code: None,
            operation_id: Some(operation_id),
            decision_id: None,
        });
        if carried {
            consecutive += 1;
        }
    }

    // 2. Top up.
    let missing = pool.prestarted_vms.saturating_sub(run.prestarted);
    let to_start = missing.min(config.batch_size) as usize;
    let candidates = members
        .iter()
        .filter(|m| m.is_free() && m.run == RunState::Down);
    for member in candidates {
        if run.started.len() >= to_start {
            break;
        }
        if consecutive >= config.max_attempts {
            run.stopped_early = true;
            break;
        }
        match start_member(state, &pool, member).await {
            Ok(started) => {
                consecutive = 0;
                run.started.push(RunStart {
                    vm_id: started.vm_id,
                    host_id: started.host_id,
                    operation_id: started.operation_id,
                    decision_id: started.decision_id,
                });
            }
            Err(failed) => {
                consecutive += 1;
                run.failures.push(RunFailure {
                    reason: failed.reason(),
                    code: Some(failed.error.code().to_owned()),
                    vm_id: failed.vm_id,
                    kind: "placement".to_owned(),
                    operation_id: None,
                    decision_id: failed.decision_id,
                });
            }
        }
    }
    if run.started.len() < to_start && consecutive >= config.max_attempts {
        run.stopped_early = true;
    }

    let text = serde_json::to_string(&run)
        .map_err(|e| ApiError::Internal(format!("a monitor run does not encode: {e}")))?;
    let mut tx = state.store().write().await?;
    tx.set_vm_pool_last_run(pool_id, &text).await?;
    tx.commit().await?;
    Ok(run)
}

/// A failed start a run has not counted before.
struct FreshFailure {
    vm_id: String,
    reason: String,
    operation_id: Uuid,
    /// Milliseconds since the Unix epoch (0 when unknown).
    finished_at_ms: u64,
    /// It finished after the last success since the previous run, so it
    /// counts toward the consecutive failures.
    carried: bool,
}

/// The pool's failed starts not counted by an earlier run, in the order
/// they finished; and every failed start now known, for the next run not
/// to count again.
fn failed_since(
    previous: Option<&MonitorRun>,
    members: &[Member],
) -> (Vec<FreshFailure>, Vec<Uuid>) {
    let since = previous.map_or(0, |r| r.at_ms);
    let seen: &[Uuid] = previous.map_or(&[], |r| &r.counted_failed_starts);
    let finished = |m: &Member| m.row.start.as_ref().and_then(|s| s.finished_at_ms);
    let last_success = members
        .iter()
        .filter(|m| m.start() == Some(StartState::Succeeded))
        .filter_map(finished)
        .filter(|&at| at >= since)
        .max();
    let mut counted = Vec::new();
    let mut fresh = Vec::new();
    for m in members {
        let (Some(StartState::Failed { reason, .. }), Some(op)) =
            (m.start(), m.row.start_operation_id)
        else {
            continue;
        };
        counted.push(op);
        if !seen.contains(&op) {
            let at = finished(m).unwrap_or(0);
            fresh.push(FreshFailure {
                vm_id: m.row.vm_id.clone(),
                reason,
                operation_id: op,
                finished_at_ms: at,
                carried: last_success.is_none_or(|s| at > s),
            });
        }
    }
    fresh.sort_by_key(|f| f.finished_at_ms);
    (fresh, counted)
}
