//! Changes to a cluster's queue, as its event stream carries them
//! (`GET /api/v1/clusters/{id}/operations/events`): one per submit, lease,
//! renewal, completion, expiry and cancel, with the operation as it is
//! after the change.

use std::sync::Arc;

use super::model::Operation;

/// What happened to an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    Submitted,
    Leased,
    Renewed,
    Completed,
    Expired,
    Cancelled,
}

impl EventKind {
    /// The event's name on the stream.
    pub fn as_str(&self) -> &'static str {
        match self {
            EventKind::Submitted => "submitted",
            EventKind::Leased => "leased",
            EventKind::Renewed => "renewed",
            EventKind::Completed => "completed",
            EventKind::Expired => "expired",
            EventKind::Cancelled => "cancelled",
        }
    }
}

/// One change: cheap to clone (every reader of the stream gets a copy).
#[derive(Clone, Debug)]
pub struct Event {
    pub kind: EventKind,
    pub operation: Arc<Operation>,
}

impl Event {
    pub(super) fn new(kind: EventKind, operation: &Operation) -> Event {
        Event {
            kind,
            operation: Arc::new(operation.clone()),
        }
    }
}
