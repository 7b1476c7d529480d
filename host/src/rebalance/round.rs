//! One periodic balancing round of one cluster.
//!
//! 1. A cluster whose policy has no balance unit, or whose inventory is not
//!    held, is not balanced (and nothing is logged).
//! 2. While an earlier migration of the cluster's balance is still queued
//!    or leased, the round does nothing but say so in the decisions log:
//!    at most one migration per cluster is in flight, as in oVirt.
//! 3. Otherwise the balance unit runs over the held inventory (live claims
//!    counted), without the hosts that have a migration in flight: any
//!    `migrate` operation's host locks, and both ends of every VM claimed
//!    on one host while another still lists it (a migration done, or
//!    decided by an engine, that the inventory does not show yet; its
//!    figures are about to change). The policy schedules its
//!    proposal over the proposed destinations plus the current host, so
//!    staying can win (`pipeline::balance`).
//! 4. A proposal that wins is placed again over the held inventory, under
//!    the cluster's lock, between its current host and the destination:
//!    the full pipeline once more, and a claim on the destination if it
//!    still wins. That re-check is what makes the claim safe: the balance
//!    ran unlocked, and a decision engines asked for may have claimed the
//!    destination's room meanwhile. The claim is queued as a `migrate`
//!    operation carrying it.
//!
//! Every round that gets past step 1 is in the decisions log: the balance
//! round as `POST .../balance` would answer it (with the operation it
//! queued), the claim's schedule decision, or why it held back.

use std::collections::BTreeSet;

use serde::Serialize;
use uuid::Uuid;

use crate::api::AppState;
use crate::api::decision_error::placement_error;
use crate::api::error::ApiError;
use crate::api::prepared::prepared;
use crate::api::schedule::answer::to_json;
use crate::api::schedule::logged::Logged;
use crate::api::schedule::request::DecisionQuery;
use crate::api::schedule::{answer_balance, facts, log_entry, place_held, record};
use crate::operations::{Kind, NewOperation, Operation, OperationError, Origin, migration_locks};
use crate::placement::{BalanceJob, HostsSource};
use crate::store::decisions::DecisionKind;
use sandpiper_queue::{Level, Lock, Locks};

/// What a round did.
#[derive(Debug, Clone, PartialEq)]
pub enum Round {
    /// The cluster is not balanced: its policy has no balance unit, or its
    /// inventory is not held. Nothing logged.
    NotBalanced(&'static str),
    /// An earlier migration of the cluster's balance is still in flight.
    InFlight {
        decision_id: Uuid,
        operation_id: Uuid,
    },
    /// The round ran and moves nothing; `outcome` is the balance answer's
    /// (`balanced`, `stay`, `nowhere`), or `stay` when the re-check under
    /// the lock kept the VM where it is.
    NothingToDo { decision_id: Uuid, outcome: String },
    /// A migration claimed and queued.
    Migrating {
        decision_id: Uuid,
        operation_id: Uuid,
        vm_id: String,
        destination: String,
    },
}

/// Why a round failed; the loop logs it and tries again next interval.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// Deciding or recording failed (the same errors a decision engines ask
    /// for would answer).
    #[error(transparent)]
    Decision(#[from] ApiError),
    #[error("queueing the migration failed: {0}")]
    Queue(#[from] OperationError),
}

/// The log entry of a round that held back because a migration is in
/// flight.
#[derive(Serialize)]
struct HeldBack<'a> {
    decision_id: Uuid,
    cluster_id: Uuid,
    policy_id: Uuid,
    /// Always `in_flight`.
    outcome: &'static str,
    reason: String,
    operation_id: Uuid,
    vm_id: Option<&'a str>,
}

/// Runs one round for `cluster_id`.
pub async fn run(state: &AppState, cluster_id: Uuid) -> Result<Round, RoundError> {
    let prepared = prepared(state, cluster_id).await?;
    if prepared.policy.balance_unit().is_none() {
        return Ok(Round::NotBalanced("the policy has no balance unit"));
    }
    let placement = state.placement();
    if !placement
        .has_inventory(cluster_id)
        .await
        .map_err(placement_error)?
    {
        return Ok(Round::NotBalanced("the cluster's inventory is not held"));
    }
    let in_flight = state.operations().in_flight(cluster_id).await;
    let round_facts = facts(cluster_id, DecisionQuery::default(), &prepared);
    let decision_id = round_facts
        .decision_id
        .ok_or_else(|| ApiError::Internal("a periodic round is never a dry run".to_owned()))?;

    if let Some(op) = in_flight
        .iter()
        .find(|op| matches!(op.origin, Origin::Balance))
    {
        hold_back(state, &round_facts, op).await?;
        return Ok(Round::InFlight {
            decision_id,
            operation_id: op.id,
        });
    }

    // After the operations: a migration that finished since is then found
    // here, its claim still on a destination that has not listed the VM.
    let mut busy = hosts_migrating(&in_flight);
    busy.extend(
        placement
            .hosts_moving(cluster_id)
            .await
            .map_err(placement_error)?,
    );
    let candidates: Vec<String> = placement
        .held_host_ids(cluster_id)
        .await
        .map_err(placement_error)?
        .into_iter()
        .filter(|h| !busy.contains(h))
        .collect();
    let admission = placement.admit(cluster_id).map_err(placement_error)?;
    let job = BalanceJob {
        policy: prepared.policy.clone(),
        params: prepared.overrides.clone(),
        candidates: Some(candidates),
        source: HostsSource::Held,
    };
    let balanced = placement
        .balance_admitted(cluster_id, job, &admission)
        .await
        .map_err(placement_error)?;
    let (Some(vm_id), Some(destination)) = (balanced.vm_id.clone(), balanced.destination.clone())
    else {
        let outcome = balanced.decision.explain.outcome().to_owned();
        answer_balance(state, &admission, round_facts, balanced, None).await?;
        return Ok(Round::NothingToDo {
            decision_id,
            outcome,
        });
    };
    let running = placement
        .held_vm(cluster_id, vm_id.clone())
        .await
        .map_err(placement_error)?;
    let Some(running) = running else {
        // The VM's host reported it gone between the round and now.
        answer_balance(state, &admission, round_facts, balanced, None).await?;
        return Ok(Round::NothingToDo {
            decision_id,
            outcome: "gone".to_owned(),
        });
    };
    let source = running.host.clone();

    // The re-check under the lock, which claims the destination if it
    // still wins.
    let placed = place_held(
        state,
        cluster_id,
        running.to_migration(),
        Some(vec![source.clone(), destination.clone()]),
    )
    .await?;
    let claimed = placed.host_id.as_deref() == Some(destination.as_str());
    if !claimed {
        answer_balance(state, &admission, round_facts, balanced, None).await?;
        return Ok(Round::NothingToDo {
            decision_id,
            outcome: "stay".to_owned(),
        });
    }

    let submitted = state
        .operations()
        .submit(NewOperation {
            id: Uuid::new_v4(),
            cluster_id,
            kind: Kind::Migrate,
            priority: 0,
            locks: migration_locks(&vm_id, &source, &destination),
            payload: serde_json::json!({
                "vm_id": vm_id,
                "source_host": source,
                "destination_host": destination,
                "decision_id": decision_id,
            }),
            origin: Origin::Balance,
            vm_id: Some(vm_id.clone()),
        })
        .await;
    let operation = match submitted {
        Ok(operation) => operation,
        Err(e) => {
            // Nothing will carry the claim out: free its room at once.
            if let Err(release) = placement.release(cluster_id, vm_id.clone()).await {
                tracing::warn!(cluster = %cluster_id, vm = %vm_id, error = %release,
                    "releasing the claim of a migration that could not be queued");
            }
            return Err(e.into());
        }
    };
    answer_balance(state, &admission, round_facts, balanced, Some(operation.id)).await?;
    Ok(Round::Migrating {
        decision_id,
        operation_id: operation.id,
        vm_id,
        destination,
    })
}

/// Logs a round that held back for a migration still in flight.
async fn hold_back(
    state: &AppState,
    round_facts: &crate::api::schedule::answer::Facts,
    op: &Operation,
) -> Result<(), ApiError> {
    let Some(decision_id) = round_facts.decision_id else {
        return Ok(());
    };
    let held_back = HeldBack {
        decision_id,
        cluster_id: round_facts.cluster_id,
        policy_id: round_facts.policy_id,
        outcome: "in_flight",
        reason: format!(
            "migration operation {} is still {}: at most one migration per cluster is in flight",
            op.id,
            op.state.as_str()
        ),
        operation_id: op.id,
        vm_id: op.vm_id.as_deref(),
    };
    let text = to_json(&held_back)?;
    if let Some(entry) = log_entry(
        round_facts,
        DecisionKind::Balance,
        op.vm_id.clone(),
        None,
        Logged::whole(text),
        Vec::new(),
        None,
    ) {
        record(state, entry).await?;
    }
    Ok(())
}

/// The hosts named by the host and host-resource locks of the `migrate`
/// operations in flight: a migration's source and destination, whoever
/// queued it. Left out of the round, as oVirt leaves out hosts with a
/// migration in progress.
fn hosts_migrating(in_flight: &[Operation]) -> BTreeSet<String> {
    in_flight
        .iter()
        .filter(|op| op.kind == Kind::Migrate)
        .flat_map(|op| host_names(&op.locks))
        .collect()
}

fn host_names(locks: &Locks) -> Vec<String> {
    [Level::Host, Level::HostResources]
        .into_iter()
        .flat_map(|level| match locks.level(level) {
            Lock::Shared(names) | Lock::Exclusive(names) => names.iter().cloned().collect(),
            _ => Vec::new(),
        })
        .collect()
}
