//! Everything Sandpiper holds about one cluster — its host inventory, its
//! claims and the ready-built columns — and every operation on it, as plain
//! synchronous code with time passed in.
//!
//! A [`ClusterState`] does no locking and no I/O: the caller (the
//! `service`) holds the cluster's lock around every call, so each call sees
//! and leaves a consistent state, and persists the [`Change`]s each call
//! returns, in order. Keeping this layer free of clocks, threads and the
//! database is what lets the model-based test drive thousands of random
//! interleavings through the very code the server runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::claims::{Claim, ClaimError, ClaimLedger, ClaimState, settled_by_report};
use super::columns::{Columns, PendingVm};
use super::hosts::{
    Applied, HostInventory, HostRecord, HostUpdate, InventoryError, MAX_GENERATION, check_upsert,
};
use super::resources::Resources;
use super::time::Timestamp;
use crate::pipeline::ReuseCache;
use crate::snapshot::{Snapshot, SnapshotError, SnapshotErrorKind};
use sandpiper_model::Inventory;

/// A change to persist, in the order the state made it.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Every host replaced by these records (a full snapshot); removed-host
    /// markers are forgotten.
    Snapshot {
        generation: u64,
        records: Vec<HostRecord>,
    },
    /// One host added or replaced.
    Host(HostRecord),
    /// One host removed at `generation`.
    HostRemoved { host_id: String, generation: u64 },
    /// The inventory's generations.
    Generations {
        generation: u64,
        snapshot_generation: u64,
    },
    /// A claim made, replaced or confirmed.
    ClaimPut(Claim),
    /// A claim gone (released, expired, covered by a report).
    ClaimDeleted { vm_id: String },
}

/// A held snapshot with claims applied, the candidates resolved against
/// it, and the changes made taking it (expired claims dropped).
pub type HeldSnapshot = (Inventory, Option<Vec<u32>>, Vec<Change>);

/// How one update of a batch went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpdateResult {
    pub host_id: String,
    pub generation: u64,
    /// `applied`, or `stale` when older than what is held.
    pub outcome: &'static str,
    /// The generation held for the host when the update was stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<u64>,
    /// Claims the update resolved (confirmed and now covered, or reported).
    pub claims_resolved: usize,
}

/// A summary of the held inventory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InventorySummary {
    pub generation: u64,
    pub snapshot_generation: u64,
    pub hosts: usize,
    pub vms: usize,
    pub claims: usize,
    /// The sum of every live claim.
    pub pending: Resources,
}

/// The held state of one cluster.
#[derive(Default)]
pub struct ClusterState {
    pub(super) hosts: HostInventory,
    pub(super) claims: ClaimLedger,
    /// `None` after a change of shape, until the next decision rebuilds them.
    pub(super) columns: Option<Columns>,
    /// Where the next sampled decision's window starts (see
    /// `sample::Sampling`); not stored, a restart starts from the top.
    pub(super) next_window: usize,
    /// Per-host units' answers kept for the next decisions; not stored, a
    /// restart asks again.
    pub(super) reuse: ReuseCache,
}

impl ClusterState {
    pub fn new() -> Self {
        ClusterState::default()
    }

    /// Restores a state from its stored parts; the columns are built at the
    /// first decision.
    pub fn restore(hosts: HostInventory, claims: impl IntoIterator<Item = Claim>) -> Self {
        let mut ledger = ClaimLedger::new();
        for claim in claims {
            ledger.insert(claim);
        }
        ClusterState {
            hosts,
            claims: ledger,
            columns: None,
            next_window: 0,
            reuse: ReuseCache::default(),
        }
    }

    pub fn hosts(&self) -> &HostInventory {
        &self.hosts
    }

    pub fn claims(&self) -> &ClaimLedger {
        &self.claims
    }

    /// Sets the cluster's gauges (`crate::metrics`): hosts held and live
    /// claims. Atomic stores, called after every change under the lock.
    pub fn observe(&self, cluster_id: uuid::Uuid) {
        crate::metrics::cluster_held(cluster_id, self.hosts.len(), self.claims.len());
    }

    /// Whether any host was ever pushed (a stateful decision needs one).
    pub fn has_inventory(&self) -> bool {
        !self.hosts.is_empty() || self.hosts.generation() > 0
    }

    pub fn summary(&self) -> InventorySummary {
        let mut pending = Resources::default();
        for claim in self.claims.iter() {
            pending.add(&claim.resources);
        }
        InventorySummary {
            generation: self.hosts.generation(),
            snapshot_generation: self.hosts.snapshot_generation(),
            hosts: self.hosts.len(),
            vms: self.hosts.records().iter().map(|r| r.vms.len()).sum(),
            claims: self.claims.len(),
            pending,
        }
    }

    /// Replaces the inventory with a full snapshot taken at `generation`.
    /// Claims on hosts that are gone, claims the snapshot's VM lists settle
    /// ([`settled_by_report`]), and confirmed claims the snapshot covers are
    /// dropped.
    pub fn replace_snapshot(
        &mut self,
        generation: u64,
        snapshot: Snapshot,
    ) -> Result<Vec<Change>, InventoryError> {
        // The cheap checks first: a refused snapshot costs no column build.
        if generation > MAX_GENERATION {
            return Err(InventoryError::GenerationTooLarge { given: generation });
        }
        if generation <= self.hosts.generation() && self.has_inventory() {
            return Err(InventoryError::StaleSnapshot {
                given: generation,
                held: self.hosts.generation(),
            });
        }
        crate::inputs::check_snapshot(&snapshot)?;
        let columns = Columns::build(&snapshot)?;
        // Where the claimed VMs were listed until now, to tell a migration's
        // source still reporting its VM from a VM that arrived.
        let claimed_were_on: BTreeMap<String, String> = self
            .claimed_listed()
            .map(|(claim, listed_on)| (claim.vm_id.clone(), listed_on.to_owned()))
            .collect();
        self.hosts.replace(generation, snapshot)?;
        self.columns = Some(columns);

        let mut changes = vec![
            Change::Snapshot {
                generation,
                records: self.hosts.records().to_vec(),
            },
            Change::Generations {
                generation,
                snapshot_generation: generation,
            },
        ];
        let present: BTreeSet<&str> = self
            .hosts
            .records()
            .iter()
            .map(|r| r.host.id.as_str())
            .collect();
        let reported_on: BTreeMap<&str, &str> = self
            .hosts
            .records()
            .iter()
            .flat_map(|r| r.vms.iter().map(|v| (v.id.as_str(), r.host.id.as_str())))
            .collect();
        let resolved: Vec<String> = self
            .claims
            .iter()
            .filter(|c| {
                !present.contains(c.host_id.as_str())
                    || reported_on.get(c.vm_id.as_str()).is_some_and(|host| {
                        let was_there = claimed_were_on.get(&c.vm_id).map(String::as_str) == Some(*host);
                        settled_by_report(c, host, was_there)
                    })
                    || matches!(c.state, ClaimState::Confirmed { covered_from } if covered_from <= generation)
            })
            .map(|c| c.vm_id.clone())
            .collect();
        for vm_id in resolved {
            if self.claims.remove(&vm_id).is_some() {
                changes.push(Change::ClaimDeleted { vm_id });
            }
        }
        Ok(changes)
    }

    /// Applies a batch of updates in order. Every update is checked first
    /// and the batch is refused whole if one is invalid (the error names
    /// `updates[i]`); stale updates are not errors, their result says so.
    pub fn apply_updates(
        &mut self,
        updates: Vec<HostUpdate>,
    ) -> Result<(Vec<UpdateResult>, Vec<Change>), SnapshotError> {
        let mut checked = Vec::with_capacity(updates.len());
        for (i, update) in updates.into_iter().enumerate() {
            if update.generation() > MAX_GENERATION {
                return Err(SnapshotError {
                    path: format!("updates[{i}].generation"),
                    kind: SnapshotErrorKind::Json(format!(
                        "{} is above the largest generation, {MAX_GENERATION} (2^53)",
                        update.generation()
                    )),
                });
            }
            let row = match &update {
                HostUpdate::Upsert { host, vms, .. } => Some(
                    check_upsert(host, vms.as_deref()).map_err(|e| SnapshotError {
                        path: format!("updates[{i}].{}", upsert_path(&e.path)),
                        kind: e.kind,
                    })?,
                ),
                HostUpdate::Remove { host_id, .. } if host_id.is_empty() => {
                    return Err(SnapshotError {
                        path: format!("updates[{i}].host_id"),
                        kind: SnapshotErrorKind::EmptyId,
                    });
                }
                HostUpdate::Remove { host_id, .. } => {
                    crate::inputs::check_id(host_id, format_args!("updates[{i}].host_id"))?;
                    None
                }
            };
            checked.push((update, row));
        }

        let mut results = Vec::with_capacity(checked.len());
        let mut changes = Vec::new();
        let before = (self.hosts.generation(), self.hosts.snapshot_generation());
        for (update, one_host) in checked {
            let host_id = update.host_id().to_owned();
            let generation = update.generation();
            let reported: Vec<String> = match &update {
                HostUpdate::Upsert { vms: Some(vms), .. } => {
                    vms.iter().map(|v| v.id.clone()).collect()
                }
                _ => Vec::new(),
            };
            // What the host listed until now, to tell a migration's source
            // still reporting its VM from a VM that arrived.
            let listed_before: BTreeSet<String> = match self.hosts.get(&host_id) {
                Some((_, record)) if !reported.is_empty() => {
                    record.vms.iter().map(|v| v.id.clone()).collect()
                }
                _ => BTreeSet::new(),
            };
            let removal = matches!(update, HostUpdate::Remove { .. });
            let applied = self.hosts.apply(update);
            let mut resolved = Vec::new();
            match applied {
                Applied::Stale { held } => {
                    results.push(UpdateResult {
                        host_id,
                        generation,
                        outcome: "stale",
                        held: Some(held),
                        claims_resolved: 0,
                    });
                    continue;
                }
                Applied::Row(row) => {
                    if let (Some(columns), Some(one)) = (&mut self.columns, &one_host) {
                        columns.patch_row(row, &one.inventory);
                    }
                }
                Applied::Shape => self.columns = None,
            }
            if removal {
                resolved.extend(self.claims.drop_host(&host_id));
                changes.push(Change::HostRemoved {
                    host_id: host_id.clone(),
                    generation,
                });
            } else {
                resolved.extend(self.claims.drop_covered(&host_id, generation));
                resolved.extend(self.claims.drop_reported(
                    &host_id,
                    reported.iter().map(String::as_str),
                    &listed_before,
                ));
                if let Some((_, record)) = self.hosts.get(&host_id) {
                    changes.push(Change::Host(record.clone()));
                }
                if matches!(applied, Applied::Shape) && !reported.is_empty() {
                    // VMs taken off other hosts changed those hosts' records.
                    for record in self.hosts.records() {
                        if record.host.id != host_id {
                            changes.push(Change::Host(record.clone()));
                        }
                    }
                }
            }
            results.push(UpdateResult {
                host_id,
                generation,
                outcome: "applied",
                held: None,
                claims_resolved: resolved.len(),
            });
            changes.extend(
                resolved
                    .into_iter()
                    .map(|c| Change::ClaimDeleted { vm_id: c.vm_id }),
            );
        }
        let after = (self.hosts.generation(), self.hosts.snapshot_generation());
        if after != before {
            changes.push(Change::Generations {
                generation: after.0,
                snapshot_generation: after.1,
            });
        }
        Ok((results, changes))
    }

    /// Confirms the claim of `vm_id`: the engine started the VM, and its
    /// reports of the host from generation `covered_from` on include it.
    /// Without `covered_from`, the next report of the host applied is taken
    /// to include it, which is right when the engine sends reports and
    /// confirmations in order; an engine whose reports may overtake its
    /// confirmations names the generation. The claim keeps counting, and no
    /// longer expires, until that report arrives.
    pub fn confirm(
        &mut self,
        vm_id: &str,
        covered_from: Option<u64>,
    ) -> Result<(Claim, Vec<Change>), ClaimError> {
        let host_id = self
            .claims
            .get(vm_id)
            .map(|c| c.host_id.clone())
            .ok_or_else(|| ClaimError::NoClaim {
                vm_id: vm_id.to_owned(),
            })?;
        let next_report = self.hosts.held_generation(&host_id).saturating_add(1);
        let covered_from = covered_from.unwrap_or(next_report);
        let claim = self.claims.confirm(vm_id, covered_from)?.clone();
        // A report at or after `covered_from` may already be held.
        if covered_from <= self.hosts.held_generation(&host_id)
            && self.hosts.get(&host_id).is_some()
        {
            let dropped = self
                .claims
                .drop_covered(&host_id, self.hosts.held_generation(&host_id));
            let changes = dropped
                .into_iter()
                .map(|c| Change::ClaimDeleted { vm_id: c.vm_id })
                .collect();
            return Ok((claim, changes));
        }
        Ok((claim.clone(), vec![Change::ClaimPut(claim)]))
    }

    /// Releases the claim of `vm_id` (the VM did not start).
    pub fn release(&mut self, vm_id: &str) -> Result<(Claim, Vec<Change>), ClaimError> {
        let claim = self
            .claims
            .remove(vm_id)
            .ok_or_else(|| ClaimError::NoClaim {
                vm_id: vm_id.to_owned(),
            })?;
        let changes = vec![Change::ClaimDeleted {
            vm_id: claim.vm_id.clone(),
        }];
        Ok((claim, changes))
    }

    /// Keeps the pending claims of `vm_ids` alive until at least `until`
    /// (their operations are still queued or running); claims already
    /// expired at `now` are dropped first and stay gone.
    pub fn extend_claims(
        &mut self,
        vm_ids: &[String],
        now: Timestamp,
        until: Timestamp,
    ) -> (usize, Vec<Change>) {
        let (_, mut changes) = self.expire(now);
        let mut extended = 0;
        for vm_id in vm_ids {
            if let Some(claim) = self.claims.extend(vm_id, until) {
                changes.push(Change::ClaimPut(claim.clone()));
                extended += 1;
            }
        }
        (extended, changes)
    }

    /// The hosts at either end of every move the inventory does not show
    /// yet: a VM claimed on one host while another host lists it. That is
    /// a migration decided, queued or done whose VM its destination has not
    /// reported; the periodic balance leaves these hosts out, as it does
    /// those of a migration still queued, since their figures are about to
    /// change.
    pub fn hosts_moving(&self) -> BTreeSet<String> {
        self.claimed_listed()
            .filter(|(claim, listed_on)| claim.host_id != *listed_on)
            .flat_map(|(claim, listed_on)| [listed_on.to_owned(), claim.host_id.clone()])
            .collect()
    }

    /// Each claim whose VM a host lists, with that host: where the claimed
    /// VMs run as far as the inventory knows. Nothing is walked when there
    /// is no claim, as most of the time.
    fn claimed_listed(&self) -> impl Iterator<Item = (&Claim, &str)> {
        let records = if self.claims.is_empty() {
            &[][..]
        } else {
            self.hosts.records()
        };
        records.iter().flat_map(move |record| {
            record.vms.iter().filter_map(move |vm| {
                let claim = self.claims.get(&vm.id)?;
                Some((claim, record.host.id.as_str()))
            })
        })
    }

    /// Drops the claims that expired at or before `now`.
    pub fn expire(&mut self, now: Timestamp) -> (Vec<Claim>, Vec<Change>) {
        let expired = self.claims.expire(now);
        crate::metrics::claims_expired(expired.len());
        let changes = expired
            .iter()
            .map(|c| Change::ClaimDeleted {
                vm_id: c.vm_id.clone(),
            })
            .collect();
        (expired, changes)
    }

    /// The held inventory as a decision over every host sees it — usage
    /// and hardware columns including every live claim, the claimed VMs in
    /// the VM columns — for
    /// a balance decision, which records no claim; `candidates` (host ids)
    /// resolved to hosts of that snapshot. Expired claims are dropped first.
    pub fn held_snapshot(
        &mut self,
        now: Timestamp,
        candidates: Option<&[String]>,
    ) -> Result<HeldSnapshot, SnapshotError> {
        let (_, changes) = self.expire(now);
        self.ensure_columns()?;
        let Some(columns) = self.columns.as_ref() else {
            return Ok((Inventory::new(0, 0), None, changes));
        };
        let candidates = candidates
            .map(|ids| columns.hosts().resolve_all(ids, "candidates"))
            .transpose()?;
        let none = BTreeSet::new();
        let rows: Vec<(usize, Resources)> =
            ClusterState::pending_rows(columns, &self.claims, &none)
                .into_iter()
                .collect();
        let vms = ClusterState::pending_vms(columns, &self.claims, &none);
        let mut inventory = columns.with_pending(&rows, &vms);
        let hardware =
            ClusterState::pending_hardware(columns, &self.claims, &none, 0..columns.host_count());
        let taken: Vec<_> = hardware.iter().map(|(row, c)| (*row, c.as_ref())).collect();
        crate::hardware::claim::apply(&mut inventory, &taken);
        Ok((inventory, candidates, changes))
    }

    /// The columns, rebuilt from the records if a change of shape dropped
    /// them. Records are checked as they arrive, so a failure here means a
    /// bug, reported rather than hidden.
    pub(super) fn ensure_columns(&mut self) -> Result<(), SnapshotError> {
        if self.columns.is_none() {
            self.columns = Some(Columns::build(&self.hosts.to_snapshot())?);
        }
        Ok(())
    }

    /// The rows `lo..hi` that have claims, their sums, and the claimed
    /// VMs as the VM columns show them (by row, then VM), leaving out
    /// `except`: a window's pending, found by looking each of its hosts up
    /// once rather than walking every claim of the cluster. (Walking the
    /// hosts with claims instead, when fewer, was slower in
    /// `cargo bench --bench held`: most of a window's lookups miss, which
    /// is cheaper than each claimed host's lookup and sum.)
    pub(super) fn pending_in<'a>(
        columns: &Columns,
        claims: &'a ClaimLedger,
        except: &'a BTreeSet<String>,
        rows: std::ops::Range<usize>,
    ) -> (HashMap<usize, Resources>, Vec<PendingVm<'a>>) {
        let mut sums = HashMap::new();
        let mut vms = Vec::new();
        if claims.is_empty() {
            return (sums, vms);
        }
        for row in rows {
            let Some(id) = columns.hosts().id(row as u32) else {
                continue;
            };
            let (each, total) = claims.on_host_except(id, except);
            if total.is_empty() {
                continue;
            }
            sums.insert(row, total);
            vms.extend(each.map(|(id, &resources)| PendingVm { row, id, resources }));
        }
        (sums, vms)
    }

    /// Every claimed VM, leaving out `except`, as the VM columns show them,
    /// by row, then VM: each host with claims looked up once, its claims
    /// already in VM order.
    pub(super) fn pending_vms<'a>(
        columns: &Columns,
        claims: &'a ClaimLedger,
        except: &'a BTreeSet<String>,
    ) -> Vec<PendingVm<'a>> {
        let mut claimed: Vec<_> = claims
            .hosts_except(except)
            .filter_map(|(host, each)| Some((columns.hosts().index(host)? as usize, each)))
            .collect();
        claimed.sort_unstable_by_key(|(row, _)| *row);
        claimed
            .into_iter()
            .flat_map(|(row, each)| {
                each.map(move |(id, &resources)| PendingVm { row, id, resources })
            })
            .collect()
    }

    /// The claims of specific hardware on held rows `rows`, leaving out
    /// `except`, as (held row, what was taken), in a stable order.
    pub(super) fn pending_hardware(
        columns: &Columns,
        claims: &ClaimLedger,
        except: &BTreeSet<String>,
        rows: std::ops::Range<usize>,
    ) -> Vec<(usize, std::sync::Arc<crate::hardware::claim::HardwareClaim>)> {
        let mut taken: Vec<_> = claims
            .hardware_except(except)
            .filter_map(|(host, hardware)| {
                let row = columns.hosts().index(host)? as usize;
                rows.contains(&row)
                    .then(|| (row, std::sync::Arc::clone(hardware)))
            })
            .collect();
        taken.sort_by_key(|(row, _)| *row);
        taken
    }

    /// The rows of hosts with claims and their sums, leaving out `except`.
    pub(super) fn pending_rows(
        columns: &Columns,
        claims: &ClaimLedger,
        except: &BTreeSet<String>,
    ) -> HashMap<usize, Resources> {
        claims
            .pending_by_host(except)
            .filter_map(|(host, total)| {
                columns.hosts().index(host).map(|row| (row as usize, total))
            })
            .collect()
    }
}

/// The path of a field of an upsert from the path in its one-host snapshot
/// (`hosts[0].metrics.x` → `host.metrics.x`).
fn upsert_path(path: &str) -> String {
    match path.strip_prefix("hosts[0]") {
        Some(rest) => format!("host{rest}"),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Host;
    use uuid::Uuid;

    fn host(id: &str) -> Host {
        Host {
            id: id.to_owned(),
            metrics: [("memory_free_mib".to_owned(), 1000.0)].into(),
            ..Host::default()
        }
    }

    fn state() -> ClusterState {
        let mut state = ClusterState::new();
        state
            .replace_snapshot(
                5,
                Snapshot {
                    hosts: vec![host("a"), host("b")],
                    vms: Vec::new(),
                },
            )
            .expect("first snapshot");
        state
    }

    fn claim(vm: &str, host: &str) -> Claim {
        Claim {
            vm_id: vm.to_owned(),
            host_id: host.to_owned(),
            resources: Resources {
                memory_mib: 100.0,
                vms: 1.0,
                ..Resources::default()
            },
            decision_id: Uuid::nil(),
            created_at: Timestamp(0),
            expires_at: Timestamp(1000),
            state: ClaimState::Pending,
            hardware: None,
        }
    }

    fn upsert(generation: u64, id: &str) -> HostUpdate {
        HostUpdate::Upsert {
            generation,
            host: host(id),
            vms: None,
        }
    }

    #[test]
    fn a_confirmed_claim_lasts_until_the_report_that_covers_it() {
        let mut state = state();
        state.claims.insert(claim("v", "a"));
        let (confirmed, _) = state.confirm("v", None).expect("claimed");
        assert_eq!(confirmed.state, ClaimState::Confirmed { covered_from: 6 });
        // A report of the other host does not cover it.
        let (results, _) = state.apply_updates(vec![upsert(6, "b")]).expect("valid");
        assert_eq!(results[0].claims_resolved, 0);
        assert_eq!(state.claims.len(), 1);
        let (results, changes) = state.apply_updates(vec![upsert(6, "a")]).expect("valid");
        assert_eq!(results[0].claims_resolved, 1);
        assert!(state.claims.is_empty());
        assert!(changes.contains(&Change::ClaimDeleted {
            vm_id: "v".to_owned()
        }));
    }

    #[test]
    fn a_confirmation_already_covered_drops_the_claim_at_once() {
        let mut state = state();
        state.claims.insert(claim("v", "a"));
        let (_, changes) = state.confirm("v", Some(5)).expect("claimed");
        assert!(state.claims.is_empty());
        assert_eq!(
            changes,
            [Change::ClaimDeleted {
                vm_id: "v".to_owned()
            }]
        );
    }

    #[test]
    fn a_snapshot_drops_claims_on_vanished_hosts_and_reported_vms() {
        let mut state = state();
        state.claims.insert(claim("gone", "a"));
        state.claims.insert(claim("reported", "b"));
        state.claims.insert(claim("starting", "b"));
        let snapshot: Snapshot = crate::snapshot::from_json(
            r#"{"hosts": [{"id": "b"}], "vms": [{"id": "reported", "host": "b"}]}"#,
        )
        .expect("valid");
        let changes = state.replace_snapshot(6, snapshot).expect("newer");
        assert_eq!(state.claims.len(), 1);
        assert!(state.claims.get("starting").is_some());
        assert_eq!(
            changes
                .iter()
                .filter(|c| matches!(c, Change::ClaimDeleted { .. }))
                .count(),
            2
        );
        assert!(matches!(
            state.replace_snapshot(6, Snapshot::default()),
            Err(InventoryError::StaleSnapshot { given: 6, held: 6 })
        ));
    }

    /// A migration's claim on its destination: reports that still list the
    /// VM on its source, full or per host, leave it counting; the VM on
    /// the destination settles it.
    #[test]
    fn a_migrating_vm_reported_on_its_source_keeps_its_claim_on_the_destination() {
        let on_a = || -> Snapshot {
            crate::snapshot::from_json(
                r#"{"hosts": [{"id": "a"}, {"id": "b"}], "vms": [{"id": "m", "host": "a"}]}"#,
            )
            .expect("valid")
        };
        let mut state = ClusterState::new();
        state.replace_snapshot(5, on_a()).expect("first");
        state.claims.insert(claim("m", "b"));

        let both: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
        assert_eq!(state.hosts_moving(), both);

        state.replace_snapshot(6, on_a()).expect("newer");
        assert!(
            state.claims.get("m").is_some(),
            "a full report of the source"
        );
        let still_on_a = HostUpdate::Upsert {
            generation: 7,
            host: host("a"),
            vms: Some(state.hosts.get("a").expect("a").1.vms.clone()),
        };
        let (results, _) = state.apply_updates(vec![still_on_a]).expect("valid");
        assert_eq!(
            results[0].claims_resolved, 0,
            "a report of the source alone"
        );
        assert!(state.claims.get("m").is_some());

        let mut moved = state.hosts.get("a").expect("a").1.vms.clone();
        moved[0].host = "b".to_owned();
        let on_b = HostUpdate::Upsert {
            generation: 8,
            host: host("b"),
            vms: Some(moved),
        };
        let (results, _) = state.apply_updates(vec![on_b]).expect("valid");
        assert_eq!(results[0].claims_resolved, 1, "the VM on the destination");
        assert!(state.claims.is_empty());
        assert!(state.hosts_moving().is_empty());
    }

    #[test]
    fn a_batch_with_a_bad_update_is_refused_whole_naming_it() {
        let mut state = state();
        let mut bad = host("a");
        bad.metrics.insert("nope".to_owned(), 1.0);
        let batch = vec![
            upsert(9, "b"),
            HostUpdate::Upsert {
                generation: 9,
                host: bad,
                vms: None,
            },
        ];
        let err = state.apply_updates(batch).map(|_| ()).unwrap_err();
        assert_eq!(err.path, "updates[1].host.metrics.nope");
        assert_eq!(state.hosts.generation(), 5);
    }

    #[test]
    fn removing_a_host_drops_its_claims_and_reshapes() {
        let mut state = state();
        state.claims.insert(claim("v", "a"));
        let remove = HostUpdate::Remove {
            generation: 7,
            host_id: "a".to_owned(),
        };
        let (results, _) = state.apply_updates(vec![remove]).expect("valid");
        assert_eq!(results[0].claims_resolved, 1);
        assert!(state.columns.is_none());
        state.ensure_columns().expect("rebuilds");
        assert_eq!(state.columns.as_ref().map(Columns::host_count), Some(1));
        assert_eq!(state.summary().hosts, 1);
    }

    /// A window's claims (walked by row) and every claim (walked by host
    /// with claims) come out the same way: sums per row, and the VMs by
    /// row, then VM, the order the VM columns a unit reads show them in.
    #[test]
    fn claims_are_listed_by_row_then_vm_whichever_way_they_are_found() {
        let ids: Vec<String> = (0..12).map(|i| format!("h{i:02}")).collect();
        let mut state = ClusterState::new();
        state
            .replace_snapshot(
                5,
                Snapshot {
                    hosts: ids.iter().map(|id| host(id)).collect(),
                    vms: Vec::new(),
                },
            )
            .expect("snapshot");
        state.ensure_columns().expect("columns");
        // Claims out of order of VM and host, two hosts with several, one
        // VM left out as the decision's own.
        for (vm, host) in [
            ("z", "h07"),
            ("b", "h03"),
            ("a", "h07"),
            ("own", "h03"),
            ("m", "h09"),
            ("c", "h01"),
            ("only-own", "h05"),
        ] {
            state.claims.insert(claim(vm, host));
        }
        let columns = state.columns.as_ref().expect("columns");
        let except: BTreeSet<String> = ["own", "only-own"].map(str::to_owned).into();
        let listed = |rows: std::ops::Range<usize>| {
            let (sums, vms) = ClusterState::pending_in(columns, &state.claims, &except, rows);
            let mut sums: Vec<(usize, f64)> = sums
                .into_iter()
                .map(|(row, r)| (row, r.memory_mib))
                .collect();
            sums.sort_by_key(|(row, _)| *row);
            let vms: Vec<(usize, String)> = vms
                .into_iter()
                .map(|vm| (vm.row, vm.id.to_owned()))
                .collect();
            (sums, vms)
        };
        let expected_vms = |lo: usize, hi: usize| -> Vec<(usize, String)> {
            [(1, "c"), (3, "b"), (7, "a"), (7, "z"), (9, "m")]
                .into_iter()
                .filter(|(row, _)| (lo..hi).contains(row))
                .map(|(row, vm)| (row, vm.to_owned()))
                .collect()
        };
        for (lo, hi) in [(0, 3), (3, 6), (6, 9), (0, 10), (2, 12), (0, 12)] {
            let (sums, vms) = listed(lo..hi);
            assert_eq!(vms, expected_vms(lo, hi), "window {lo}..{hi}");
            let rows: Vec<usize> = sums.iter().map(|(row, _)| *row).collect();
            let mut expected_rows: Vec<usize> = expected_vms(lo, hi).iter().map(|v| v.0).collect();
            expected_rows.dedup();
            // Host 5's only claim is the decision's own: no sum.
            assert_eq!(rows, expected_rows, "window {lo}..{hi}");
            for (row, memory) in sums {
                let claims = expected_vms(lo, hi).iter().filter(|v| v.0 == row).count();
                assert_eq!(memory, 100.0 * claims as f64, "row {row}");
            }
        }
        let every: Vec<(usize, &str)> = ClusterState::pending_vms(columns, &state.claims, &except)
            .into_iter()
            .map(|vm| (vm.row, vm.id))
            .collect();
        assert_eq!(every, [(1, "c"), (3, "b"), (7, "a"), (7, "z"), (9, "m")]);
    }
}
