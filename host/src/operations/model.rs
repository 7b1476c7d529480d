//! What an operation is: its kind, where it came from, its state, its
//! lease and its outcome, and the conversion to and from the store's row
//! (`crate::store::operations`).

use std::fmt;

use serde_json::Value;
use uuid::Uuid;

use sandpiper_queue::Locks;

use crate::names::{self, NameError};
use crate::store::StoreError;
use crate::store::operations::{LeaseRow, OperationRow};
use crate::time::Timestamp;

/// Longest kind name, in characters: kinds are short verbs
/// (`migrate`, `start`, `hot-plug-disk`); 64 leaves room for namespaced
/// engine kinds (`ovirt.refresh-host-capabilities`) and keeps the lease
/// filter and every event small.
pub const MAX_KIND_CHARS: usize = 64;

/// What an operation does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Live-migrate a VM (made by the balance loop; engines may submit it
    /// too, with their own locks and no claim).
    Migrate,
    /// Start a VM (made by the pools monitor and allocation).
    Start,
    /// Any other kind, defined by the engine that submits and leases it;
    /// its payload is opaque to Sandpiper.
    Engine(String),
}

/// Why a kind name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KindError {
    #[error("{0}")]
    Name(#[from] NameError),
    #[error("must be at most {MAX_KIND_CHARS} characters")]
    TooLong,
}

impl Kind {
    /// The kind called `name`: `migrate`, `start`, or an engine's kind
    /// whose name follows `crate::names` and is at most
    /// [`MAX_KIND_CHARS`] long.
    pub fn parse(name: &str) -> Result<Kind, KindError> {
        match name {
            "migrate" => Ok(Kind::Migrate),
            "start" => Ok(Kind::Start),
            _ => {
                names::check_name(name)?;
                if name.chars().count() > MAX_KIND_CHARS {
                    return Err(KindError::TooLong);
                }
                Ok(Kind::Engine(name.to_owned()))
            }
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Kind::Migrate => "migrate",
            Kind::Start => "start",
            Kind::Engine(name) => name,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who submitted an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An engine, over the API.
    Engine,
    /// The periodic balance loop.
    Balance,
    /// A prestarted VM pool's monitor or allocation.
    Pool { pool_id: Uuid },
}

impl Origin {
    pub fn as_str(&self) -> &'static str {
        match self {
            Origin::Engine => "engine",
            Origin::Balance => "balance",
            Origin::Pool { .. } => "pool",
        }
    }

    pub fn pool_id(&self) -> Option<Uuid> {
        match self {
            Origin::Pool { pool_id } => Some(*pool_id),
            _ => None,
        }
    }
}

/// Where an operation is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Waiting to be leased.
    Queued,
    /// Held by a worker until its lease expires.
    Leased,
    Succeeded,
    Failed,
    Cancelled,
}

impl State {
    pub const ALL: [State; 5] = [
        State::Queued,
        State::Leased,
        State::Succeeded,
        State::Failed,
        State::Cancelled,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Leased => "leased",
            State::Succeeded => "succeeded",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Succeeded, failed or cancelled: nothing changes it any more.
    pub fn is_finished(&self) -> bool {
        !matches!(self, State::Queued | State::Leased)
    }
}

/// How a worker says its operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done. `covered_from`: the first generation of the engine's reports
    /// of the claim's host that count the VM, for the claim the operation
    /// carries (as `POST .../claims/{vm_id}/confirm` takes it); without it,
    /// the host's next report applied.
    Succeeded {
        covered_from: Option<u64>,
    },
    Failed,
}

impl Outcome {
    pub fn state(self) -> State {
        match self {
            Outcome::Succeeded { .. } => State::Succeeded,
            Outcome::Failed => State::Failed,
        }
    }
}

/// A lease on an operation: who holds it and until when. The id is the
/// holder's proof and is shown only to the worker that took the lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: Uuid,
    pub holder: String,
    pub expires_at: Timestamp,
}

/// An operation to submit.
#[derive(Clone, Debug)]
pub struct NewOperation {
    /// Chosen by whoever submits, so that it can be recorded where the
    /// operation will be looked for before the operation exists (a pool
    /// member's start, `crate::pools::starts`): a crash between the two
    /// writes then leaves a reference to nothing, never an operation
    /// nobody knows about.
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub kind: Kind,
    /// -20 (most urgent) .. 19, Ganeti's job priorities; 0 is normal.
    pub priority: i32,
    pub locks: Locks,
    /// Opaque to Sandpiper, at most [`super::MAX_PAYLOAD_BYTES`] as JSON.
    pub payload: Value,
    pub origin: Origin,
    /// The VM whose claim the operation carries: confirmed when it
    /// succeeds, released when it fails or is cancelled.
    pub vm_id: Option<String>,
}

/// An operation as the queue holds it.
#[derive(Clone, Debug)]
pub struct Operation {
    pub id: Uuid,
    pub cluster_id: Uuid,
    /// Submit order (server-wide).
    pub seq: u64,
    pub kind: Kind,
    pub priority: i32,
    pub locks: Locks,
    pub payload: Value,
    pub origin: Origin,
    pub vm_id: Option<String>,
    pub state: State,
    /// Leases taken so far, expired ones included.
    pub attempts: u32,
    pub submitted_at: Timestamp,
    /// Set exactly while leased.
    pub lease: Option<Lease>,
    pub finished_at: Option<Timestamp>,
    /// What the worker reported with its outcome (`null` when nothing).
    pub detail: Option<Value>,
}

impl Operation {
    /// The store's row of this operation.
    pub(crate) fn to_row(&self) -> Result<OperationRow, StoreError> {
        // Encoding a lock declaration cannot fail (string keys, no maps
        // with other keys); an error is still reported, never stored as
        // something else.
        let locks = serde_json::to_string(&self.locks)
            .map_err(|e| StoreError::Corrupt(format!("operation {}: locks: {e}", self.id)))?;
        Ok(OperationRow {
            id: self.id,
            cluster_id: self.cluster_id,
            seq: self.seq,
            kind: self.kind.as_str().to_owned(),
            priority: self.priority,
            locks,
            payload: self.payload.to_string(),
            origin: self.origin.as_str().to_owned(),
            pool_id: self.origin.pool_id(),
            vm_id: self.vm_id.clone(),
            state: self.state.as_str().to_owned(),
            attempts: self.attempts,
            submitted_at_ms: self.submitted_at.0,
            lease: self.lease.as_ref().map(|l| LeaseRow {
                id: l.id,
                holder: l.holder.clone(),
                expires_at_ms: l.expires_at.0,
            }),
            finished_at_ms: self.finished_at.map(|t| t.0),
            outcome: self.detail.as_ref().map(Value::to_string),
        })
    }

    /// The operation of a stored row.
    pub(crate) fn from_row(row: OperationRow) -> Result<Operation, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("operation {}: {what}", row.id));
        let kind = Kind::parse(&row.kind).map_err(|e| corrupt(&format!("kind: {e}")))?;
        let locks: Locks =
            serde_json::from_str(&row.locks).map_err(|e| corrupt(&format!("locks: {e}")))?;
        let payload: Value =
            serde_json::from_str(&row.payload).map_err(|e| corrupt(&format!("payload: {e}")))?;
        let origin = match (row.origin.as_str(), row.pool_id) {
            ("engine", None) => Origin::Engine,
            ("balance", None) => Origin::Balance,
            ("pool", Some(pool_id)) => Origin::Pool { pool_id },
            (other, _) => return Err(corrupt(&format!("origin `{other}`"))),
        };
        let state = State::parse(&row.state).ok_or_else(|| corrupt("state"))?;
        let detail = row
            .outcome
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| corrupt(&format!("outcome: {e}")))?;
        Ok(Operation {
            id: row.id,
            cluster_id: row.cluster_id,
            seq: row.seq,
            kind,
            priority: row.priority,
            locks,
            payload,
            origin,
            vm_id: row.vm_id,
            state,
            attempts: row.attempts,
            submitted_at: Timestamp(row.submitted_at_ms),
            lease: row.lease.map(|l| Lease {
                id: l.id,
                holder: l.holder,
                expires_at: Timestamp(l.expires_at_ms),
            }),
            finished_at: row.finished_at_ms.map(Timestamp),
            detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print_the_same() {
        for name in ["migrate", "start", "refresh-host", "ovirt.hot-plug"] {
            assert_eq!(Kind::parse(name).expect(name).as_str(), name);
        }
        assert_eq!(Kind::parse("migrate"), Ok(Kind::Migrate));
        assert!(Kind::parse("").is_err());
        assert!(Kind::parse(" start").is_err());
        assert!(Kind::parse("a\u{200B}b").is_err());
        assert_eq!(Kind::parse(&"k".repeat(65)), Err(KindError::TooLong));
        assert!(Kind::parse(&"k".repeat(64)).is_ok());
    }

    #[test]
    fn states_parse_and_print_the_same() {
        for state in State::ALL {
            assert_eq!(State::parse(state.as_str()), Some(state));
        }
        assert_eq!(State::parse("running"), None);
    }
}
