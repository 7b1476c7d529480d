//! The host inventory Sandpiper holds for a cluster: the engine's last full
//! snapshot with every later incremental update applied, each host stamped
//! with the generation of the report it comes from.
//!
//! Generations are the engine's: any number that grows with every report it
//! sends (a sequence number, or its clock in milliseconds). They make a
//! stream of reports safe to deliver late, twice or out of order:
//!
//! * a **full snapshot** at generation `G` replaces everything, and is
//!   refused unless `G` is above every generation applied so far (a snapshot
//!   taken before an update we already applied would roll that update back);
//! * an **update** of one host (upsert or remove) at generation `g` is
//!   applied only if `g` is above the last snapshot's generation and above
//!   the host's own generation (or, for a removed host, the generation of
//!   its removal, which is remembered); otherwise it is older than what we
//!   hold and is ignored, and the answer says so.
//!
//! Hosts and the VMs on them use the JSON format of `crate::snapshot`; no
//! second host format exists. This module only keeps records and says what
//! changed; `columns` turns them into the column store units read.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::snapshot::{Host, RunningVm, Snapshot, SnapshotError};

/// The largest generation accepted: 2^53, the largest integer every JSON
/// client (JavaScript included) reads exactly, and well inside SQLite's
/// signed 64-bit integers. An engine's millisecond clock stays below it
/// for 285,000 years.
pub const MAX_GENERATION: u64 = 1 << 53;

/// A host as last reported, with the VMs reported on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    pub host: Host,
    /// VMs running (or pending, by the engine's own account) on the host.
    #[serde(default)]
    pub vms: Vec<RunningVm>,
    /// Generation of the report this record comes from.
    pub generation: u64,
}

/// One incremental report about one host.
#[expect(
    clippy::large_enum_variant,
    reason = "updates are parsed and applied at once, never stored in bulk"
)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum HostUpdate {
    /// Adds the host or replaces what is known about it.
    Upsert {
        generation: u64,
        host: Host,
        /// The VMs on the host, replacing the ones reported before; absent
        /// keeps them as they were (a usage-only report).
        #[serde(default)]
        vms: Option<Vec<RunningVm>>,
    },
    /// The host left the cluster.
    Remove {
        generation: u64,
        #[schema(schema_with = crate::names::id_schema, required = true)]
        host_id: String,
    },
}

impl HostUpdate {
    pub fn generation(&self) -> u64 {
        match self {
            HostUpdate::Upsert { generation, .. } | HostUpdate::Remove { generation, .. } => {
                *generation
            }
        }
    }

    pub fn host_id(&self) -> &str {
        match self {
            HostUpdate::Upsert { host, .. } => &host.id,
            HostUpdate::Remove { host_id, .. } => host_id,
        }
    }
}

/// What applying an update did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Only the host's numbers, status or flags changed: its row of the
    /// columns can be patched in place.
    Row(usize),
    /// Hosts were added, removed or renamed, or VMs moved: the columns must
    /// be rebuilt.
    Shape,
    /// Older than what is held; nothing changed.
    Stale { held: u64 },
}

/// A snapshot or update that cannot be applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InventoryError {
    #[error("generation {given} is above the largest allowed, {MAX_GENERATION} (2^53)")]
    GenerationTooLarge { given: u64 },
    #[error(
        "snapshot generation {given} is not above the inventory's generation {held}; \
         send a newer snapshot"
    )]
    StaleSnapshot { given: u64, held: u64 },
    #[error(transparent)]
    Invalid(#[from] SnapshotError),
}

/// The hosts of one cluster with their generations.
#[derive(Clone, Debug, Default)]
pub struct HostInventory {
    /// The highest generation applied, by a snapshot or an update.
    generation: u64,
    /// The generation of the last full snapshot: everything at or below it
    /// is older than that snapshot.
    snapshot_generation: u64,
    /// In snapshot order; hosts added by updates come last.
    records: Vec<HostRecord>,
    index: HashMap<String, usize>,
    /// Removed hosts and the generation of their removal, so that a late
    /// upsert from before the removal does not bring them back. Cleared by
    /// the next snapshot, whose generation then covers them.
    removed: HashMap<String, u64>,
}

impl HostInventory {
    pub fn new() -> Self {
        HostInventory::default()
    }

    /// Restores an inventory from its stored parts.
    pub fn restore(
        generation: u64,
        snapshot_generation: u64,
        records: Vec<HostRecord>,
        removed: HashMap<String, u64>,
    ) -> Self {
        let index = records
            .iter()
            .enumerate()
            .map(|(i, r)| (r.host.id.clone(), i))
            .collect();
        HostInventory {
            generation,
            snapshot_generation,
            records,
            index,
            removed,
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn snapshot_generation(&self) -> u64 {
        self.snapshot_generation
    }

    pub fn records(&self) -> &[HostRecord] {
        &self.records
    }

    pub fn removed(&self) -> &HashMap<String, u64> {
        &self.removed
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The record of host `id` and its row.
    pub fn get(&self, id: &str) -> Option<(usize, &HostRecord)> {
        let row = *self.index.get(id)?;
        self.records.get(row).map(|r| (row, r))
    }

    /// The records as one snapshot, for building columns.
    pub fn to_snapshot(&self) -> Snapshot {
        Snapshot {
            hosts: self.records.iter().map(|r| r.host.clone()).collect(),
            vms: self
                .records
                .iter()
                .flat_map(|r| r.vms.iter().cloned())
                .collect(),
        }
    }

    /// Replaces everything with `snapshot`, taken at `generation`. The
    /// snapshot must already have been checked (`Snapshot::build`).
    pub fn replace(&mut self, generation: u64, snapshot: Snapshot) -> Result<(), InventoryError> {
        if generation > MAX_GENERATION {
            return Err(InventoryError::GenerationTooLarge { given: generation });
        }
        if generation <= self.generation && (self.generation > 0 || !self.records.is_empty()) {
            return Err(InventoryError::StaleSnapshot {
                given: generation,
                held: self.generation,
            });
        }
        let mut vms_by_host: HashMap<String, Vec<RunningVm>> = HashMap::new();
        for vm in snapshot.vms {
            vms_by_host.entry(vm.host.clone()).or_default().push(vm);
        }
        self.records = snapshot
            .hosts
            .into_iter()
            .map(|host| HostRecord {
                vms: vms_by_host.remove(&host.id).unwrap_or_default(),
                host,
                generation,
            })
            .collect();
        self.index = self
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| (r.host.id.clone(), i))
            .collect();
        self.removed.clear();
        self.generation = generation;
        self.snapshot_generation = generation;
        Ok(())
    }

    /// The generation an update about `host_id` must be above to apply.
    pub fn held_generation(&self, host_id: &str) -> u64 {
        let own = match self.index.get(host_id) {
            Some(&row) => self.records[row].generation,
            None => self.removed.get(host_id).copied().unwrap_or(0),
        };
        own.max(self.snapshot_generation)
    }

    /// Applies one update. An upsert must have been checked by
    /// [`check_upsert`] first. VMs an upsert reports on its host are taken
    /// off any other host they were listed on: the newer report wins (a
    /// migration reported by the destination before the source).
    pub fn apply(&mut self, update: HostUpdate) -> Applied {
        let held = self.held_generation(update.host_id());
        let generation = update.generation();
        if generation <= held {
            return Applied::Stale { held };
        }
        self.generation = self.generation.max(generation);
        match update {
            HostUpdate::Remove { host_id, .. } => {
                if let Some(row) = self.index.remove(&host_id) {
                    self.records.remove(row);
                    for (i, record) in self.records.iter().enumerate().skip(row) {
                        self.index.insert(record.host.id.clone(), i);
                    }
                }
                self.removed.insert(host_id, generation);
                Applied::Shape
            }
            HostUpdate::Upsert {
                host,
                vms,
                generation,
            } => {
                self.removed.remove(&host.id);
                let mut shape = false;
                if let Some(vms) = &vms {
                    shape |= self.take_vms_from_other_hosts(&host.id, vms);
                }
                match self.index.get(&host.id).copied() {
                    Some(row) => {
                        let record = &mut self.records[row];
                        shape |= !same_shape(&record.host, &host);
                        if let Some(vms) = vms {
                            shape |= record.vms != vms;
                            record.vms = vms;
                        }
                        record.host = host;
                        record.generation = generation;
                        if shape {
                            Applied::Shape
                        } else {
                            Applied::Row(row)
                        }
                    }
                    None => {
                        self.index.insert(host.id.clone(), self.records.len());
                        self.records.push(HostRecord {
                            host,
                            vms: vms.unwrap_or_default(),
                            generation,
                        });
                        Applied::Shape
                    }
                }
            }
        }
    }

    /// Removes the VMs in `vms` from hosts other than `host_id`; true when
    /// any was listed elsewhere.
    fn take_vms_from_other_hosts(&mut self, host_id: &str, vms: &[RunningVm]) -> bool {
        let ids: BTreeSet<&str> = vms.iter().map(|v| v.id.as_str()).collect();
        let mut moved = false;
        for record in self.records.iter_mut().filter(|r| r.host.id != host_id) {
            let before = record.vms.len();
            record.vms.retain(|v| !ids.contains(v.id.as_str()));
            moved |= record.vms.len() != before;
        }
        moved
    }
}

/// Checks an upsert's host and VMs as a one-host snapshot would be checked,
/// so that a bad update is refused before it is applied (and can never make
/// a later rebuild of the columns fail). Returns the one-host snapshot's
/// columns, whose row 0 is what the host's row becomes.
pub fn check_upsert(
    host: &Host,
    vms: Option<&[RunningVm]>,
) -> Result<crate::snapshot::Cluster, SnapshotError> {
    // A VM listed on another host is an unknown host of this one-host
    // snapshot, and is refused as such (`vms[0].host: unknown host ...`).
    crate::inputs::build_checked(&Snapshot {
        hosts: vec![host.clone()],
        vms: vms.map(<[RunningVm]>::to_vec).unwrap_or_default(),
    })
}

/// True when `a` and `b` differ at most in the fields that live in numeric,
/// status and flag columns, which can be patched row by row. Hardware
/// changes rebuild the columns: a host's cells, CPUs and pools are rows of
/// cluster-wide columns whose offsets move with them.
fn same_shape(a: &Host, b: &Host) -> bool {
    a.id == b.id
        && a.name == b.name
        && a.address == b.address
        && a.zone == b.zone
        && a.networks == b.networks
        && a.capabilities == b.capabilities
        && a.aggregates == b.aggregates
        && a.named_metrics == b.named_metrics
        && a.instances == b.instances
        && a.hardware == b.hardware
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Status;

    fn host(id: &str, free: f64) -> Host {
        Host {
            id: id.to_owned(),
            metrics: [("memory_free_mib".to_owned(), free)].into(),
            ..Host::default()
        }
    }

    fn vm(id: &str, host: &str) -> RunningVm {
        crate::snapshot::from_json(&format!(r#"{{"id": "{id}", "host": "{host}"}}"#))
            .expect("a valid VM")
    }

    fn upsert(generation: u64, host: Host) -> HostUpdate {
        HostUpdate::Upsert {
            generation,
            host,
            vms: None,
        }
    }

    fn seeded() -> HostInventory {
        let mut inv = HostInventory::new();
        inv.replace(
            10,
            Snapshot {
                hosts: vec![host("a", 1.0), host("b", 2.0)],
                vms: vec![vm("v1", "a")],
            },
        )
        .expect("first snapshot");
        inv
    }

    #[test]
    fn a_snapshot_must_be_newer_than_everything_applied() {
        let mut inv = seeded();
        assert_eq!(inv.records()[0].vms.len(), 1);
        assert!(matches!(
            inv.replace(10, Snapshot::default()),
            Err(InventoryError::StaleSnapshot {
                given: 10,
                held: 10
            })
        ));
        assert_eq!(inv.apply(upsert(15, host("a", 3.0))), Applied::Row(0));
        assert!(inv.replace(12, Snapshot::default()).is_err());
        assert!(inv.replace(16, Snapshot::default()).is_ok());
        assert!(inv.is_empty());
    }

    #[test]
    fn late_and_repeated_updates_are_ignored() {
        let mut inv = seeded();
        assert_eq!(
            inv.apply(upsert(9, host("a", 5.0))),
            Applied::Stale { held: 10 }
        );
        assert_eq!(inv.apply(upsert(12, host("a", 5.0))), Applied::Row(0));
        assert_eq!(
            inv.apply(upsert(12, host("a", 6.0))),
            Applied::Stale { held: 12 }
        );
        assert_eq!(
            inv.apply(upsert(11, host("a", 7.0))),
            Applied::Stale { held: 12 }
        );
        // Host b's generation is its own: 11 is still news for it.
        assert_eq!(inv.apply(upsert(11, host("b", 7.0))), Applied::Row(1));
        assert_eq!(
            inv.get("a").map(|(_, r)| r.host.metrics["memory_free_mib"]),
            Some(5.0)
        );
        assert_eq!(inv.generation(), 12);
    }

    #[test]
    fn a_removal_is_remembered_against_late_upserts() {
        let mut inv = seeded();
        let remove = HostUpdate::Remove {
            generation: 20,
            host_id: "a".to_owned(),
        };
        assert_eq!(inv.apply(remove), Applied::Shape);
        assert_eq!(inv.get("b").map(|(row, _)| row), Some(0));
        assert_eq!(
            inv.apply(upsert(19, host("a", 1.0))),
            Applied::Stale { held: 20 }
        );
        assert_eq!(inv.apply(upsert(21, host("a", 1.0))), Applied::Shape);
        assert_eq!(inv.get("a").map(|(row, _)| row), Some(1));
    }

    #[test]
    fn renames_new_hosts_and_moved_vms_change_the_shape() {
        let mut inv = seeded();
        let mut renamed = host("a", 1.0);
        renamed.name = Some("Alpha".to_owned());
        assert_eq!(inv.apply(upsert(11, renamed)), Applied::Shape);
        let mut down = host("b", 1.0);
        down.status = Status::Down;
        assert_eq!(inv.apply(upsert(11, down)), Applied::Row(1));
        // Hardware rows are cluster-wide columns: a change rebuilds them.
        let mut pinned = host("b", 1.0);
        pinned.status = Status::Down;
        pinned.hardware = Some(Box::new(crate::hardware::HostHardware {
            cpu_model: "Skylake".to_owned(),
            ..Default::default()
        }));
        assert_eq!(inv.apply(upsert(12, pinned.clone())), Applied::Shape);
        pinned.metrics.insert("memory_free_mib".to_owned(), 0.5);
        assert_eq!(inv.apply(upsert(13, pinned)), Applied::Row(1));
        // v1 reported on b: taken off a.
        let moved = HostUpdate::Upsert {
            generation: 14,
            host: host("b", 1.0),
            vms: Some(vec![vm("v1", "b")]),
        };
        assert_eq!(inv.apply(moved), Applied::Shape);
        assert!(inv.get("a").is_some_and(|(_, r)| r.vms.is_empty()));
        assert_eq!(inv.to_snapshot().vms.len(), 1);
        assert!(inv.to_snapshot().build().is_ok());
    }

    #[test]
    fn bad_upserts_are_refused_with_the_field() {
        let mut bad = host("a", 1.0);
        bad.metrics.insert("memry_free_mib".to_owned(), 1.0);
        let err = check_upsert(&bad, None).map(|_| ()).unwrap_err();
        assert_eq!(err.path, "hosts[0].metrics.memry_free_mib");
        let err = check_upsert(&host("a", 1.0), Some(&[vm("v", "b")]))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.path, "vms[0].host");
        let ok = check_upsert(&host("a", 4.0), Some(&[vm("v", "a")])).expect("valid");
        assert_eq!(
            ok.inventory
                .host_metric(sandpiper_model::HostMetric::MemoryFreeMib),
            [4.0]
        );
    }

    #[test]
    fn updates_parse_from_json() {
        let u: HostUpdate =
            crate::snapshot::from_json(r#"{"op": "upsert", "generation": 3, "host": {"id": "h"}}"#)
                .expect("valid");
        assert_eq!((u.generation(), u.host_id()), (3, "h"));
        let u: HostUpdate =
            crate::snapshot::from_json(r#"{"op": "remove", "generation": 4, "host_id": "h"}"#)
                .expect("valid");
        assert_eq!(u.host_id(), "h");
        assert!(
            crate::snapshot::from_json::<HostUpdate>(r#"{"op": "upsert", "generation": 3}"#)
                .is_err()
        );
    }
}
