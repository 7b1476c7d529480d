//! The held inventory as the column store units read, kept ready between
//! decisions, and the per-decision snapshot with pending claims applied.
//!
//! Building the columns of 10,000 hosts from their records takes
//! milliseconds (strings are interned, labels packed), far too long to do
//! for every decision. So the columns are built once, by
//! `Snapshot::build`, and then:
//!
//! * an update that changes only a host's numbers, status or flags patches
//!   that host's row in place;
//! * anything else (a host added, removed or renamed, VMs moved) drops the
//!   columns and the next decision rebuilds them;
//! * each decision gets its own [`Inventory`] that *shares* every column
//!   with the held one ([`Inventory::share`]) except the ten usage columns
//!   pending claims move, which are copied and adjusted only on the hosts
//!   that have claims;
//! * a decision over a sampled [`Window`] of hosts gets an inventory of just
//!   those hosts. A unit pulls whole columns, so over the full inventory
//!   every decision would move every host's numbers into the sandbox
//!   (about 10 µs per column at 10,000 hosts) however few hosts it
//!   considers; a window's columns are a twentieth of that. Its strings,
//!   labels and VMs are built once per window and kept until the shape of
//!   the inventory changes; its numbers, statuses and flags are sliced from
//!   the held columns once and shared until a row of the window is
//!   patched, except the usage columns claims move, copied for each
//!   decision.
//! * the VMs claimed on the considered hosts and not reported yet appear in
//!   the VM columns too, after the reported VMs, with the `pending` flag
//!   ([`PendingVm`]): a unit that looks at which VMs a host runs
//!   ((anti-)affinity, `same_host`/`different_host`, VM counts) sees them,
//!   not only their resources in the usage columns. The WIT snapshot's VMs
//!   are "running (or pending)". The host columns are still shared
//!   ([`Inventory::share_hosts`]); the VM columns are copied for each
//!   decision with such VMs (a column is shared whole or not at all):
//!   buffers copied whole, the text columns included (their values are
//!   one text, not a `String` each), so even over every host it is a few
//!   `memcpy`s, not an allocation per VM.

use std::collections::HashMap;
use std::sync::Arc;

use sandpiper_model::Inventory;
use sandpiper_model::{HostFlag, HostMetric, HostStatus, MoreVm, VmFlag, VmMetric};

use super::hosts::HostRecord;
use super::resources::{self, PENDING_METRICS, Resources};
use crate::snapshot::{Cluster, HostIndex, Snapshot, SnapshotError};
use crate::unit::ColumnsRead;

/// The held inventory's columns.
pub struct Columns {
    /// Every column as built; its numeric, status and flag columns go stale
    /// once a row is patched, and are then always replaced by the fields
    /// below in the snapshots handed out.
    base: Inventory,
    hosts: HostIndex,
    /// The reported numeric columns, by `HostMetric` position.
    metrics: Vec<Arc<Vec<f64>>>,
    statuses: Vec<HostStatus>,
    flags: Vec<Vec<bool>>,
    /// Whether any row was patched since the build.
    patched: bool,
    /// Each row's reported stamp (`pipeline::Stamp::reported`): new with
    /// the build and with every patch of the row, so a per-host unit's
    /// kept answers for a host are reused only while its row is the same.
    stamps: Vec<u64>,
    /// Windows built so far, by (index, number of windows).
    windows: HashMap<(usize, usize), Arc<Window>>,
    /// Each window's reported columns that no claim moves, by its rows
    /// (`lo`, `hi`): sliced when a decision first needs them and dropped
    /// when a row of the window is patched.
    window_reported: HashMap<(usize, usize), WindowReported>,
}

/// The columns of a window's hosts that pending claims never change (every
/// metric but [`PENDING_METRICS`], the statuses, the flags), sliced from
/// the held columns once and shared by every decision over the window
/// until one of its rows is patched, instead of copied for each decision
/// (building a window's snapshot was a seventh of a 500-host decision's
/// time in its cluster's turn, much of it these copies;
/// docs/performance.md).
struct WindowReported {
    /// By `HostMetric` position; `None` for the pending metrics, which
    /// each decision copies and adjusts.
    metrics: Vec<Option<Arc<Vec<f64>>>>,
    statuses: Arc<Vec<HostStatus>>,
    flags: Vec<Arc<Vec<bool>>>,
}

/// A VM claimed on a host and not reported yet, as the VM columns show it:
/// its claimed resources, `pending` and `migratable` set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PendingVm<'a> {
    /// The host's held row.
    pub row: usize,
    pub id: &'a str,
    pub resources: Resources,
}

/// Every column pending claims change in a decision's snapshot
/// ([`Columns::with_pending`]): the usage metrics, the VM columns (the
/// claimed VMs are added), and the hardware columns (a claim of specific
/// hardware takes it; such a host is never reused anyway). An answer from
/// a call that read none of these did not depend on the claims.
pub const CLAIMED_COLUMNS: ColumnsRead = ColumnsRead::of(&PENDING_METRICS, true, true);

/// A snapshot with `base`'s hosts and VMs plus `extra` VMs (host row in
/// the snapshot, VM): every host column shared with `base` (the caller
/// replaces the numeric ones pending placements change), the VM columns
/// extended when a unit first reads them (`Inventory::with_more_vms`).
fn with_vms(base: &Inventory, extra: &[(u32, &PendingVm<'_>)]) -> Inventory {
    let more = extra
        .iter()
        .map(|&(host, vm)| {
            let r = &vm.resources;
            MoreVm {
                host,
                id: vm.id.to_owned(),
                metrics: std::array::from_fn(|i| match VmMetric::ALL[i] {
                    VmMetric::MemoryMib => r.memory_mib,
                    VmMetric::MemoryGuaranteedMib => r.memory_guaranteed_mib,
                    VmMetric::Vcpus => r.vcpus,
                    // Claimed as vCPU-percent; the column is per vCPU.
                    VmMetric::CpuUsagePercent if r.vcpus > 0.0 => r.cpu_vcpu_percent / r.vcpus,
                    VmMetric::CpuUsagePercent => 0.0,
                }),
                flags: std::array::from_fn(|i| {
                    matches!(VmFlag::ALL[i], VmFlag::Pending | VmFlag::Migratable)
                }),
            }
        })
        .collect();
    base.with_more_vms(more)
}

/// A contiguous run of hosts, rows `lo..hi` of the held inventory, with
/// its own column store in which they are hosts `0..hi - lo`.
pub struct Window {
    pub lo: usize,
    pub hi: usize,
    /// Strings, labels, named metrics and VMs of the window's hosts.
    base: Inventory,
    /// Host ids and their row in the window.
    hosts: HostIndex,
}

impl Window {
    /// Host ids and their rows in the window.
    pub fn hosts(&self) -> &HostIndex {
        &self.hosts
    }

    pub fn len(&self) -> usize {
        self.hi - self.lo
    }

    pub fn is_empty(&self) -> bool {
        self.hi == self.lo
    }
}

impl Columns {
    /// Takes over the columns of a built snapshot.
    pub fn from_cluster(cluster: Cluster) -> Self {
        let Cluster {
            inventory: base,
            hosts,
        } = cluster;
        let metrics = HostMetric::ALL
            .iter()
            .map(|&m| Arc::new(base.host_metric(m).to_vec()))
            .collect();
        let statuses = base.host_statuses().to_vec();
        let flags = HostFlag::ALL
            .iter()
            .map(|&f| base.host_flag(f).to_vec())
            .collect();
        let stamps = crate::pipeline::fresh_stamps(base.host_count()).collect();
        Columns {
            base,
            hosts: Arc::unwrap_or_clone(hosts),
            metrics,
            statuses,
            flags,
            patched: false,
            stamps,
            windows: HashMap::new(),
            window_reported: HashMap::new(),
        }
    }

    /// Window `index` of `count` equal windows over the held hosts (rows
    /// `index * n / count` up to `(index + 1) * n / count`), built from
    /// `records` on first use. `records` must be the records the columns
    /// were built from.
    pub fn window(
        &mut self,
        records: &[HostRecord],
        index: usize,
        count: usize,
    ) -> Result<Arc<Window>, SnapshotError> {
        let n = self.host_count();
        let count = count.clamp(1, n.max(1));
        let index = index % count;
        let (lo, hi) = (index * n / count, (index + 1) * n / count);
        if !self.window_reported.contains_key(&(lo, hi)) {
            let reported = self.reported_in(lo..hi);
            self.window_reported.insert((lo, hi), reported);
        }
        if let Some(window) = self.windows.get(&(index, count)) {
            return Ok(Arc::clone(window));
        }
        let part = records.get(lo..hi).unwrap_or_default();
        let built = Snapshot {
            hosts: part.iter().map(|r| r.host.clone()).collect(),
            vms: part.iter().flat_map(|r| r.vms.iter().cloned()).collect(),
        }
        .build()?;
        let window = Arc::new(Window {
            lo,
            hi,
            base: built.inventory,
            hosts: Arc::unwrap_or_clone(built.hosts),
        });
        self.windows.insert((index, count), Arc::clone(&window));
        Ok(window)
    }

    /// Builds the columns of a snapshot.
    pub fn build(snapshot: &crate::snapshot::Snapshot) -> Result<Self, SnapshotError> {
        Ok(Columns::from_cluster(snapshot.build()?))
    }

    /// The columns no claim moves, of rows `rows`.
    fn reported_in(&self, rows: std::ops::Range<usize>) -> WindowReported {
        WindowReported {
            metrics: HostMetric::ALL
                .iter()
                .map(|&metric| {
                    (!PENDING_METRICS.contains(&metric))
                        .then(|| Arc::new(self.metrics[metric as usize][rows.clone()].to_vec()))
                })
                .collect(),
            statuses: Arc::new(self.statuses[rows.clone()].to_vec()),
            flags: HostFlag::ALL
                .iter()
                .map(|&flag| Arc::new(self.flags[flag as usize][rows.clone()].to_vec()))
                .collect(),
        }
    }

    /// Host ids and their rows.
    pub fn hosts(&self) -> &HostIndex {
        &self.hosts
    }

    pub fn host_count(&self) -> usize {
        self.base.host_count()
    }

    /// The reported value of `metric` for host `row` (no pending claims).
    pub fn reported(&self, metric: HostMetric, row: usize) -> f64 {
        self.metrics[metric as usize]
            .get(row)
            .copied()
            .unwrap_or(0.0)
    }

    /// The reported status of host `row`.
    pub fn status(&self, row: usize) -> HostStatus {
        self.statuses.get(row).copied().unwrap_or_default()
    }

    /// Replaces host `row`'s numbers, status and flags with row 0 of `one`
    /// (a one-host snapshot of the host's new report).
    pub fn patch_row(&mut self, row: usize, one: &Inventory) {
        if row >= self.host_count() {
            return;
        }
        for &metric in HostMetric::ALL {
            let value = one.host_metric(metric).first().copied().unwrap_or(0.0);
            let column = &mut self.metrics[metric as usize];
            if column[row] != value && !(column[row].is_nan() && value.is_nan()) {
                Arc::make_mut(column)[row] = value;
            }
        }
        self.statuses[row] = one.host_statuses().first().copied().unwrap_or_default();
        for &flag in HostFlag::ALL {
            self.flags[flag as usize][row] = one.host_flag(flag).first().copied().unwrap_or(false);
        }
        self.patched = true;
        self.stamps[row] = crate::pipeline::fresh_stamps(1).start;
        self.window_reported
            .retain(|&(lo, hi), _| !(lo..hi).contains(&row));
    }

    /// Each held row's reported stamp.
    pub fn stamps(&self) -> &[u64] {
        &self.stamps
    }

    /// The snapshot a decision over `window` reads: its hosts only, with
    /// `pending` (held rows and their claims) and `vms` applied like
    /// [`Columns::with_pending`].
    pub fn window_with_pending(
        &self,
        window: &Window,
        pending: &[(usize, Resources)],
        vms: &[PendingVm<'_>],
    ) -> Inventory {
        let (lo, hi) = (window.lo, window.hi.min(self.host_count()));
        let extra: Vec<(u32, &PendingVm<'_>)> = vms
            .iter()
            .filter(|vm| (lo..hi).contains(&vm.row))
            .map(|vm| ((vm.row - lo) as u32, vm))
            .collect();
        let mut inventory = with_vms(&window.base, &extra);
        let local: Vec<(usize, Resources, f64)> = pending
            .iter()
            .filter(|(row, _)| (lo..hi).contains(row))
            .map(|&(row, claimed)| {
                let threads = self.reported(HostMetric::CpuThreads, row);
                let cores = self.reported(HostMetric::CpuCores, row);
                (row - lo, claimed, resources::host_cpus(threads, cores))
            })
            .collect();
        // Kept by `window`; sliced here only for a window patched since.
        let sliced;
        let reported = match self.window_reported.get(&(lo, hi)) {
            Some(reported) => reported,
            None => {
                sliced = self.reported_in(lo..hi);
                &sliced
            }
        };
        for &metric in HostMetric::ALL {
            if let Some(column) = &reported.metrics[metric as usize] {
                let _ = inventory.set_host_metric_shared(metric, Arc::clone(column));
                continue;
            }
            let mut column = self.metrics[metric as usize][lo..hi].to_vec();
            for (row, claimed, cpus) in &local {
                column[*row] = resources::with_pending(metric, column[*row], claimed, *cpus);
            }
            let _ = inventory.set_host_metric(metric, column);
        }
        let _ = inventory.set_host_statuses_shared(Arc::clone(&reported.statuses));
        for &flag in HostFlag::ALL {
            let _ =
                inventory.set_host_flag_shared(flag, Arc::clone(&reported.flags[flag as usize]));
        }
        inventory
    }

    /// The snapshot a decision reads: the reported columns with `pending`
    /// (host row and the sum of its claims) applied to the usage columns,
    /// and `vms` (the claimed VMs) after the reported VMs. What this can
    /// change is [`CLAIMED_COLUMNS`].
    pub fn with_pending(&self, pending: &[(usize, Resources)], vms: &[PendingVm<'_>]) -> Inventory {
        let extra: Vec<(u32, &PendingVm<'_>)> = vms
            .iter()
            .filter(|vm| vm.row < self.host_count())
            .map(|vm| (vm.row as u32, vm))
            .collect();
        let mut inventory = with_vms(&self.base, &extra);
        let cpus: Vec<(usize, f64)> = pending
            .iter()
            .map(|&(row, _)| {
                let threads = self.reported(HostMetric::CpuThreads, row);
                let cores = self.reported(HostMetric::CpuCores, row);
                (row, resources::host_cpus(threads, cores))
            })
            .collect();
        for &metric in HostMetric::ALL {
            let reported = &self.metrics[metric as usize];
            let column = if pending.is_empty() || !PENDING_METRICS.contains(&metric) {
                Arc::clone(reported)
            } else {
                let mut column = reported.as_ref().clone();
                for (&(row, ref claimed), &(_, cpus)) in pending.iter().zip(&cpus) {
                    if let Some(value) = column.get_mut(row) {
                        *value = resources::with_pending(metric, *value, claimed, cpus);
                    }
                }
                Arc::new(column)
            };
            // The lengths match by construction; a mismatch would be a bug
            // here, and the base column then stays, which only loses the
            // pending adjustment of a snapshot that cannot exist.
            let _ = inventory.set_host_metric_shared(metric, column);
        }
        if self.patched || !extra.is_empty() {
            let _ = inventory.set_host_statuses(self.statuses.clone());
            for &flag in HostFlag::ALL {
                let _ = inventory.set_host_flag(flag, self.flags[flag as usize].clone());
            }
        }
        inventory
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Host, Snapshot, Status};
    use sandpiper_model::VmText;

    fn host(id: &str, free: f64, cores: f64) -> Host {
        Host {
            id: id.to_owned(),
            metrics: [
                ("memory_free_mib".to_owned(), free),
                ("cpu_cores".to_owned(), cores),
                ("cpu_usage_percent".to_owned(), 10.0),
            ]
            .into(),
            ..Host::default()
        }
    }

    fn columns() -> Columns {
        Columns::build(&Snapshot {
            hosts: vec![host("a", 4096.0, 4.0), host("b", 8192.0, 8.0)],
            vms: Vec::new(),
        })
        .expect("valid snapshot")
    }

    #[test]
    fn pending_moves_usage_on_claimed_hosts_only() {
        let columns = columns();
        let claimed = Resources {
            memory_mib: 1024.0,
            cpu_vcpu_percent: 40.0,
            vms: 1.0,
            ..Resources::default()
        };
        let inv = columns.with_pending(&[(1, claimed)], &[]);
        assert_eq!(inv.host_metric(HostMetric::MemoryFreeMib), [4096.0, 7168.0]);
        assert_eq!(inv.host_metric(HostMetric::MemoryPendingMib), [0.0, 1024.0]);
        assert_eq!(inv.host_metric(HostMetric::CpuUsagePercent), [10.0, 15.0]);
        assert_eq!(inv.host_metric(HostMetric::VmPendingCount), [0.0, 1.0]);
        assert_eq!(inv.host_metric(HostMetric::CpuCores), [4.0, 8.0]);
        assert_eq!(inv.host_text(sandpiper_model::HostText::Id).get(1), "b");
        // The held columns are untouched.
        let plain = columns.with_pending(&[], &[]);
        assert_eq!(
            plain.host_metric(HostMetric::MemoryFreeMib),
            [4096.0, 8192.0]
        );
    }

    #[test]
    fn a_patched_row_shows_in_every_later_snapshot() {
        let mut columns = columns();
        let held = columns.with_pending(&[], &[]);
        let mut report = host("a", 100.0, 4.0);
        report.status = Status::Maintenance;
        report.flags = vec!["spm".to_owned()];
        let one = Snapshot {
            hosts: vec![report],
            vms: Vec::new(),
        }
        .build()
        .expect("valid host");
        columns.patch_row(0, &one.inventory);
        let inv = columns.with_pending(&[], &[]);
        assert_eq!(inv.host_metric(HostMetric::MemoryFreeMib), [100.0, 8192.0]);
        assert_eq!(inv.host_statuses()[0], HostStatus::Maintenance);
        assert_eq!(inv.host_flag(HostFlag::Spm), [true, false]);
        // A snapshot handed out before the patch keeps what it saw.
        assert_eq!(
            held.host_metric(HostMetric::MemoryFreeMib),
            [4096.0, 8192.0]
        );
        assert_eq!(held.host_statuses()[0], HostStatus::Up);
    }

    /// Hosts a, b and c with 1, 2 and 3 MiB free and `cores` cores each,
    /// and their records.
    fn three_hosts(cores: [f64; 3]) -> (Snapshot, Vec<HostRecord>) {
        let snapshot = Snapshot {
            hosts: vec![
                host("a", 1.0, cores[0]),
                host("b", 2.0, cores[1]),
                host("c", 3.0, cores[2]),
            ],
            vms: Vec::new(),
        };
        let records = snapshot
            .hosts
            .iter()
            .map(|h| HostRecord {
                host: h.clone(),
                vms: Vec::new(),
                generation: 1,
            })
            .collect();
        (snapshot, records)
    }

    #[test]
    fn a_window_holds_its_hosts_with_the_held_numbers_and_claims() {
        let (snapshot, records) = three_hosts([1.0, 1.0, 1.0]);
        let mut columns = Columns::build(&snapshot).expect("valid");
        let window = columns.window(&records, 1, 2).expect("valid");
        assert_eq!((window.lo, window.hi), (1, 3));
        assert_eq!(window.hosts().index("c"), Some(1));
        let mut report = host("c", 30.0, 1.0);
        report.status = Status::Down;
        let one = Snapshot {
            hosts: vec![report],
            vms: Vec::new(),
        }
        .build()
        .expect("valid");
        columns.patch_row(2, &one.inventory);
        let claimed = Resources {
            memory_mib: 1.0,
            ..Resources::default()
        };
        let inv = columns.window_with_pending(&window, &[(1, claimed), (0, claimed)], &[]);
        assert_eq!(inv.host_count(), 2);
        assert_eq!(inv.host_metric(HostMetric::MemoryFreeMib), [1.0, 30.0]);
        assert_eq!(inv.host_statuses(), [HostStatus::Up, HostStatus::Down]);
        assert_eq!(inv.host_text(sandpiper_model::HostText::Id).get(0), "b");
        // Built once, then reused.
        let again = columns.window(&records, 3, 2).expect("valid");
        assert!(Arc::ptr_eq(&window, &again));
    }

    #[test]
    fn a_windows_unclaimed_columns_are_shared_until_one_of_its_rows_is_patched() {
        let (snapshot, records) = three_hosts([1.0, 2.0, 3.0]);
        let mut columns = Columns::build(&snapshot).expect("valid");
        let window = columns.window(&records, 1, 2).expect("valid");
        let cores = |inv: &Inventory| inv.host_metric(HostMetric::CpuCores).as_ptr();
        let first = columns.window_with_pending(&window, &[], &[]);
        let second = columns.window_with_pending(&window, &[], &[]);
        assert_eq!(cores(&first), cores(&second), "shared, not copied");
        assert_eq!(
            first.host_statuses().as_ptr(),
            second.host_statuses().as_ptr()
        );
        assert_ne!(
            first.host_metric(HostMetric::MemoryFreeMib).as_ptr(),
            second.host_metric(HostMetric::MemoryFreeMib).as_ptr(),
            "a column claims move is each decision's own"
        );

        // A report of a host outside the window keeps the window's columns.
        let report = |id: &str, cores: f64, status: Status| {
            let mut host = host(id, 1.0, cores);
            host.status = status;
            Snapshot {
                hosts: vec![host],
                vms: Vec::new(),
            }
            .build()
            .expect("valid")
            .inventory
        };
        columns.patch_row(0, &report("a", 9.0, Status::Down));
        let window = columns.window(&records, 1, 2).expect("valid");
        let third = columns.window_with_pending(&window, &[], &[]);
        assert_eq!(cores(&first), cores(&third));

        // A report of one of its hosts is seen by the next decision, and
        // not by the one before.
        columns.patch_row(2, &report("c", 30.0, Status::Down));
        let window = columns.window(&records, 1, 2).expect("valid");
        let fourth = columns.window_with_pending(&window, &[], &[]);
        assert_eq!(fourth.host_metric(HostMetric::CpuCores), [2.0, 30.0]);
        assert_eq!(fourth.host_statuses(), [HostStatus::Up, HostStatus::Down]);
        assert_eq!(third.host_metric(HostMetric::CpuCores), [2.0, 3.0]);
        assert_eq!(third.host_statuses(), [HostStatus::Up, HostStatus::Up]);
        let fifth = columns.window_with_pending(&window, &[], &[]);
        assert_eq!(cores(&fourth), cores(&fifth), "shared again");
    }

    #[test]
    fn claimed_vms_show_in_the_vm_columns_after_the_reported_ones() {
        let snapshot = Snapshot {
            hosts: vec![host("a", 4096.0, 4.0), host("b", 8192.0, 8.0)],
            vms: vec![crate::snapshot::RunningVm {
                id: "running".to_owned(),
                name: None,
                host: "b".to_owned(),
                memory_mib: 512.0,
                memory_guaranteed_mib: None,
                vcpus: 1,
                cpu_usage_percent: 50.0,
                migratable: false,
                highly_available: true,
                hosted_engine: false,
                pending: false,
            }],
        };
        let claimed = Resources {
            memory_mib: 1024.0,
            memory_guaranteed_mib: 1024.0,
            vcpus: 2.0,
            cpu_vcpu_percent: 20.0,
            vms: 1.0,
            ..Resources::default()
        };
        let vms = [PendingVm {
            row: 0,
            id: "claimed",
            resources: claimed,
        }];
        let mut columns = Columns::build(&snapshot).expect("valid");
        let inv = columns.with_pending(&[(0, claimed)], &vms);
        assert_eq!(inv.vm_count(), 2);
        assert_eq!(inv.vm_hosts(), [1, 0]);
        assert_eq!(inv.vm_text(VmText::Id).get(0), "running");
        assert_eq!(inv.vm_text(VmText::Id).get(1), "claimed");
        assert_eq!(inv.vm_flag(VmFlag::Pending), [false, true]);
        assert_eq!(inv.vm_flag(VmFlag::HighlyAvailable), [true, false]);
        assert_eq!(inv.vm_metric(VmMetric::MemoryMib), [512.0, 1024.0]);
        assert_eq!(inv.vm_metric(VmMetric::CpuUsagePercent), [50.0, 10.0]);
        // The same hosts, with the claim in the usage columns.
        assert_eq!(inv.host_metric(HostMetric::MemoryFreeMib), [3072.0, 8192.0]);
        assert_eq!(inv.host_text(sandpiper_model::HostText::Id).get(1), "b");

        // A window shows the claimed VMs of its own hosts only.
        let records: Vec<HostRecord> = snapshot
            .hosts
            .iter()
            .map(|h| HostRecord {
                host: h.clone(),
                vms: snapshot
                    .vms
                    .iter()
                    .filter(|v| v.host == h.id)
                    .cloned()
                    .collect(),
                generation: 1,
            })
            .collect();
        let second = columns.window(&records, 1, 2).expect("valid");
        let inv = columns.window_with_pending(&second, &[(0, claimed)], &vms);
        assert_eq!(inv.vm_count(), 1);
        assert_eq!(inv.vm_flag(VmFlag::Pending), [false]);
        let first = columns.window(&records, 0, 2).expect("valid");
        let inv = columns.window_with_pending(&first, &[(0, claimed)], &vms);
        assert_eq!(inv.vm_count(), 1);
        assert_eq!(inv.vm_hosts(), [0]);
        assert_eq!(inv.vm_text(VmText::Name).get(0), "claimed");
    }
}
