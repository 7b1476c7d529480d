//! One cluster's unfinished operations in memory: the queued ones in
//! submit order, the leased ones, and the locks the leased ones hold
//! (`sandpiper_queue::Running`), which the choice of the next lease reads.
//!
//! Pure bookkeeping: no I/O, no clock (every call is given `now`). The
//! service (`super`) writes each change to the store first and applies it
//! here only once committed, under the cluster's lock.

use std::collections::{BTreeMap, HashMap};

use sandpiper_queue::{Candidate, Order, Running};
use uuid::Uuid;

use super::model::{Kind, Operation, State};
use crate::time::Timestamp;

/// A cluster's queued and leased operations.
pub(super) struct ClusterQueue {
    /// Queued operations by submit sequence number.
    queued: BTreeMap<u64, Operation>,
    /// Sequence number of each queued operation.
    queued_ids: HashMap<Uuid, u64>,
    leased: HashMap<Uuid, Operation>,
    /// The lock declarations of the leased operations.
    running: Running,
}

impl Default for ClusterQueue {
    fn default() -> Self {
        ClusterQueue {
            queued: BTreeMap::new(),
            queued_ids: HashMap::new(),
            leased: HashMap::new(),
            running: Running::new(),
        }
    }
}

impl ClusterQueue {
    /// Adds an unfinished operation (queued or leased); a finished one is
    /// ignored.
    pub(super) fn insert(&mut self, op: Operation) {
        match op.state {
            State::Queued => {
                self.queued_ids.insert(op.id, op.seq);
                self.queued.insert(op.seq, op);
            }
            State::Leased => {
                self.running.add(&op.locks);
                self.leased.insert(op.id, op);
            }
            _ => {}
        }
    }

    /// Takes an operation out (it is being finished, or replaced by its
    /// next state through [`ClusterQueue::insert`]).
    pub(super) fn remove(&mut self, id: Uuid) -> Option<Operation> {
        if let Some(seq) = self.queued_ids.remove(&id) {
            return self.queued.remove(&seq);
        }
        let op = self.leased.remove(&id)?;
        self.running.remove(&op.locks);
        Some(op)
    }

    pub(super) fn get(&self, id: Uuid) -> Option<&Operation> {
        match self.queued_ids.get(&id) {
            Some(seq) => self.queued.get(seq),
            None => self.leased.get(&id),
        }
    }

    pub(super) fn queued_len(&self) -> usize {
        self.queued.len()
    }

    pub(super) fn leased_len(&self) -> usize {
        self.leased.len()
    }

    /// The queued operation to lease next among those of `kinds` (all when
    /// `None`): `sandpiper_queue::next` in predictive order over the
    /// running locks, or none when `max_leased` are leased already or every
    /// candidate conflicts with a running one.
    pub(super) fn next(
        &self,
        now: Timestamp,
        kinds: Option<&[Kind]>,
        max_leased: usize,
        config: &sandpiper_queue::Config,
    ) -> Option<&Operation> {
        if self.leased.len() >= max_leased {
            return None;
        }
        let ops: Vec<&Operation> = self
            .queued
            .values()
            .filter(|op| kinds.is_none_or(|kinds| kinds.contains(&op.kind)))
            .collect();
        let candidates: Vec<Candidate<'_>> = ops
            .iter()
            .map(|op| Candidate {
                priority: op.priority,
                seq: op.seq,
                age: now.since(op.submitted_at),
                locks: &op.locks,
            })
            .collect();
        let chosen = sandpiper_queue::next(&candidates, &self.running, Order::Predictive, config)?;
        ops.get(chosen).copied()
    }

    /// The leased operations whose lease has expired at `now`.
    pub(super) fn expired(&self, now: Timestamp) -> Vec<Uuid> {
        self.leased
            .values()
            .filter(|op| op.lease.as_ref().is_some_and(|l| l.expires_at <= now))
            .map(|op| op.id)
            .collect()
    }

    /// Every queued and leased operation, in submit order.
    pub(super) fn in_flight(&self) -> Vec<Operation> {
        let mut ops: Vec<Operation> = self
            .queued
            .values()
            .chain(self.leased.values())
            .cloned()
            .collect();
        ops.sort_by_key(|op| op.seq);
        ops
    }
}
