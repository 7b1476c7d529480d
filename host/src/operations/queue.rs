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

/// What the picker reads of a queued operation at `now`.
fn candidate(op: &Operation, now: Timestamp) -> Candidate<'_> {
    Candidate {
        priority: op.priority,
        seq: op.seq,
        age: now.since(op.submitted_at),
        locks: &op.locks,
    }
}

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
    ///
    /// The anti-starvation reservation holds across kinds: the first
    /// starving operation of the whole queue reserves its locks even from
    /// a worker that does not take its kind, so a worker leasing only
    /// `start`s cannot keep a starving cluster-wide operation waiting.
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
        let all: Vec<&Operation> = self.queued.values().collect();
        let Some(kinds) = kinds else {
            let candidates: Vec<Candidate<'_>> = all.iter().map(|op| candidate(op, now)).collect();
            let chosen =
                sandpiper_queue::next(&candidates, &self.running, Order::Predictive, config)?;
            return all.get(chosen).copied();
        };
        // The reserving operation of the whole queue, when its kind is not
        // asked for (when it is, it is among the candidates and `next`
        // reserves for it itself).
        let reserved = {
            let candidates: Vec<Candidate<'_>> = all.iter().map(|op| candidate(op, now)).collect();
            sandpiper_queue::reserving(&candidates, config)
                .and_then(|i| all.get(i).copied())
                .filter(|op| !kinds.contains(&op.kind))
        };
        let ops: Vec<&Operation> = all
            .into_iter()
            .filter(|op| kinds.contains(&op.kind))
            .filter(|op| {
                reserved.is_none_or(|r| {
                    op.priority < r.priority || !sandpiper_queue::conflicts(&op.locks, &r.locks)
                })
            })
            .collect();
        let candidates: Vec<Candidate<'_>> = ops.iter().map(|op| candidate(op, now)).collect();
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sandpiper_queue::{Lock, Locks};
    use serde_json::Value;
    use uuid::Uuid;

    use super::*;
    use crate::operations::model::{Lease, Origin};

    fn op(seq: u64, kind: &str, locks: Locks, submitted_at: Timestamp) -> Operation {
        Operation {
            id: Uuid::new_v4(),
            cluster_id: Uuid::nil(),
            seq,
            kind: Kind::parse(kind).expect("a kind"),
            priority: 0,
            locks,
            payload: Value::Null,
            origin: Origin::Engine,
            vm_id: None,
            state: State::Queued,
            attempts: 0,
            submitted_at,
            lease: None,
            finished_at: None,
            detail: None,
        }
    }

    fn vm(name: &str) -> Locks {
        Locks {
            vm: Lock::Exclusive([name.to_owned()].into()),
            ..Locks::default()
        }
    }

    #[test]
    fn a_starving_operation_reserves_even_from_workers_of_other_kinds() {
        // One second per tick, K = 1: an operation ten seconds old starves.
        let config = sandpiper_queue::Config {
            tick: Duration::from_secs(1),
            starvation_ticks: 1.0,
            ..sandpiper_queue::Config::default()
        };
        let now = Timestamp(100_000);
        let mut queue = ClusterQueue::default();
        let mut running = op(0, "work", vm("busy"), Timestamp(0));
        running.state = State::Leased;
        running.lease = Some(Lease {
            id: Uuid::new_v4(),
            holder: "w".to_owned(),
            expires_at: Timestamp(200_000),
        });
        queue.insert(running);
        queue.insert(op(
            1,
            "maintenance",
            Locks::cluster_wide(),
            Timestamp(90_000),
        ));
        queue.insert(op(2, "work", vm("free"), now));
        let work = [Kind::parse("work").expect("kind")];
        // The cluster-wide operation is blocked by the running one and
        // starving: nothing that conflicts with it (everything) is leased,
        // whichever kinds the worker asks for.
        assert!(queue.next(now, None, 4, &config).is_none());
        assert!(queue.next(now, Some(&work), 4, &config).is_none());
        // Not starving yet: the free one goes ahead of it.
        let young = Timestamp(99_900);
        let mut queue2 = ClusterQueue::default();
        queue2.insert(op(1, "maintenance", Locks::cluster_wide(), young));
        queue2.insert(op(2, "work", vm("free"), now));
        let mut running = op(0, "work", vm("busy"), Timestamp(0));
        running.state = State::Leased;
        queue2.insert(running);
        let chosen = queue2.next(now, Some(&work), 4, &config).expect("one");
        assert_eq!(chosen.seq, 2);
    }
}
