//! A pool member's state. Only who it is assigned to is stored; whether
//! it is down, starting or up is read from its last start operation, so
//! an engine completing that operation changes the member with no second
//! write (and no crash between two writes can leave it stale):
//!
//! | last start operation      | running state |
//! |---------------------------|---------------|
//! | none                      | down          |
//! | queued or leased          | starting      |
//! | succeeded                 | up            |
//! | failed or cancelled       | down          |
//! | unknown to the queue      | down          |
//!
//! A member with a user is `assigned` whatever its running state (which
//! stays visible as `run_state`); one without is free. "Prestarted" means
//! free and starting or up, as oVirt's monitor counts it (its
//! `startingVms` set plus the free VMs that are up).

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::vm_pools::{MemberRow, StartRow};

/// A start operation's state, as far as its member is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartState {
    /// Queued or leased.
    Starting,
    Succeeded,
    /// Failed or cancelled, with what the worker reported.
    Failed {
        reason: String,
        /// Milliseconds since the Unix epoch.
        finished_at_ms: Option<u64>,
    },
}

impl StartState {
    /// The state of a stored operation row; `None` for a state the code
    /// does not know (read as down).
    pub fn of(row: &StartRow) -> Option<StartState> {
        match row.state.as_str() {
            "queued" | "leased" => Some(StartState::Starting),
            "succeeded" => Some(StartState::Succeeded),
            "failed" | "cancelled" => Some(StartState::Failed {
                reason: failure_reason(&row.state, row.outcome.as_deref()),
                finished_at_ms: row.finished_at_ms,
            }),
            _ => None,
        }
    }
}

/// What a worker reported with a failed start (its `detail`), in one
/// line; just the state when it reported nothing.
fn failure_reason(state: &str, outcome: Option<&str>) -> String {
    let detail = outcome
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .map(|v| v.get("detail").cloned().unwrap_or(v))
        .filter(|d| !d.is_null());
    match detail {
        Some(serde_json::Value::String(text)) => format!("start {state}: {text}"),
        Some(other) => format!("start {state}: {other}"),
        None => format!("start {state}"),
    }
}

/// Whether a member's VM runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Down,
    Starting,
    Up,
}

/// A member's state as the API shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemberState {
    Down,
    Starting,
    /// Up and free: ready to hand to a user at once.
    Up,
    /// Given to a user.
    Assigned,
}

/// A member with its derived state.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub row: MemberRow,
    pub run: RunState,
    /// Why its last start failed, when it did.
    pub failure: Option<String>,
}

impl Member {
    /// The member as its start operation's state makes it.
    pub fn new(row: MemberRow) -> Member {
        let start = row.start.as_ref().and_then(StartState::of);
        let (run, failure) = match (row.start_operation_id, start) {
            (None, _) | (Some(_), None) => (RunState::Down, None),
            (Some(_), Some(StartState::Starting)) => (RunState::Starting, None),
            (Some(_), Some(StartState::Succeeded)) => (RunState::Up, None),
            (Some(_), Some(StartState::Failed { reason, .. })) => (RunState::Down, Some(reason)),
        };
        Member { row, run, failure }
    }

    /// Its start operation's state, if the queue knows it.
    pub fn start(&self) -> Option<StartState> {
        self.row.start.as_ref().and_then(StartState::of)
    }

    pub fn is_free(&self) -> bool {
        self.row.assigned_to.is_none()
    }

    pub fn state(&self) -> MemberState {
        match (self.is_free(), self.run) {
            (false, _) => MemberState::Assigned,
            (true, RunState::Down) => MemberState::Down,
            (true, RunState::Starting) => MemberState::Starting,
            (true, RunState::Up) => MemberState::Up,
        }
    }

    /// Counts toward the pool's prestarted VMs.
    pub fn is_prestarted(&self) -> bool {
        self.is_free() && self.run != RunState::Down
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;

    fn row(op: Option<Uuid>, state: Option<&str>, user: Option<&str>) -> MemberRow {
        MemberRow {
            idx: 1,
            vm_id: "p-1".to_owned(),
            assigned_to: user.map(str::to_owned),
            start_operation_id: op,
            host_id: None,
            start: state.map(|state| StartRow {
                state: state.to_owned(),
                finished_at_ms: None,
                outcome: Some(r#"{"outcome":"failed","detail":"no disk"}"#.to_owned()),
            }),
        }
    }

    #[test]
    fn the_start_operation_decides_the_running_state() {
        let op = Some(Uuid::new_v4());
        let cases = [
            (None, None, RunState::Down),
            (op, None, RunState::Down),
            (op, Some("queued"), RunState::Starting),
            (op, Some("leased"), RunState::Starting),
            (op, Some("succeeded"), RunState::Up),
            (op, Some("failed"), RunState::Down),
            (op, Some("cancelled"), RunState::Down),
        ];
        for (op, state, run) in cases {
            let m = Member::new(row(op, state, None));
            assert_eq!(m.run, run, "{state:?}");
            assert_eq!(m.is_prestarted(), run != RunState::Down);
        }
        let failed = Member::new(row(op, Some("failed"), None));
        assert_eq!(failed.failure.as_deref(), Some("start failed: no disk"));
        let assigned = Member::new(row(op, Some("succeeded"), Some("ann")));
        assert_eq!(
            (assigned.state(), assigned.is_prestarted()),
            (MemberState::Assigned, false)
        );
    }
}
