//! Friendly, zero-copy views of the hosts in the snapshot.
//!
//! [`HostRef`] reads one host: each method fetches its column from the
//! [`Inventory`] (once per call; later reads are a cached lookup) and indexes
//! it, so a loop over thousands of candidates stays cheap and a unit only
//! pays for the columns it touches. For the tightest loops, [`Hosts`] also
//! hands out whole columns (`hosts.metric(HostMetric::MemoryFreeMib)`).

use std::sync::Arc;

use crate::Inventory;
use crate::model::{HostFlag, HostLabels, HostMetric, HostStatus, HostText, Interned, Labels};

/// All hosts of the snapshot, addressed by index.
#[derive(Clone, Copy)]
pub struct Hosts<'a> {
    inventory: &'a Inventory,
}

impl<'a> Hosts<'a> {
    pub fn new(inventory: &'a Inventory) -> Self {
        Hosts { inventory }
    }

    /// Number of hosts in the snapshot.
    pub fn len(&self) -> usize {
        self.inventory.host_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The host at `index`, if the snapshot has one there.
    pub fn get(&self, index: u32) -> Option<HostRef<'a>> {
        ((index as usize) < self.len()).then_some(HostRef {
            inventory: self.inventory,
            index,
        })
    }

    /// Every host, in index order.
    pub fn iter(&self) -> impl Iterator<Item = HostRef<'a>> + 'a {
        let inventory = self.inventory;
        (0..inventory.host_count() as u32).map(move |index| HostRef { inventory, index })
    }

    /// The hosts behind `candidates`, in order. The host only sends valid,
    /// distinct indices; any out of range are skipped rather than trusted.
    pub fn candidates<'c>(&self, candidates: &'c [u32]) -> impl Iterator<Item = HostRef<'a>> + 'c
    where
        'a: 'c,
    {
        let hosts = *self;
        candidates.iter().filter_map(move |&index| hosts.get(index))
    }

    /// A whole numeric column, one value per host.
    #[inline]
    pub fn metric(&self, metric: HostMetric) -> &'a [f64] {
        self.inventory.host_metric(metric)
    }

    /// Every host's status.
    pub fn statuses(&self) -> &'a [HostStatus] {
        self.inventory.host_statuses()
    }

    /// A whole boolean column.
    #[inline]
    pub fn flags(&self, flag: HostFlag) -> &'a [bool] {
        self.inventory.host_flag(flag)
    }

    /// A whole string column, interned.
    pub fn texts(&self, text: HostText) -> &'a Interned {
        self.inventory.host_text(text)
    }

    /// A whole key/value column.
    pub fn labels(&self, kind: HostLabels) -> &'a Labels {
        self.inventory.host_labels(kind)
    }

    /// An engine-defined metric by name, NaN where a host does not report it.
    pub fn named_metric(&self, name: &str) -> Arc<Vec<f64>> {
        self.inventory.host_named_metric(name)
    }
}

/// One host. Only [`Hosts`] makes these, always with an index inside the
/// snapshot, so every column read below is in range.
#[derive(Clone, Copy)]
pub struct HostRef<'a> {
    inventory: &'a Inventory,
    index: u32,
}

/// Declares one accessor per numeric host column.
macro_rules! metric_accessors {
    ($($(#[$doc:meta])* $method:ident => $metric:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $method(&self) -> f64 {
                self.metric(HostMetric::$metric)
            }
        )*
    };
}

impl<'a> HostRef<'a> {
    /// The host's index in the snapshot (what filters and scores talk about).
    pub fn index(&self) -> u32 {
        self.index
    }

    fn row(&self) -> usize {
        self.index as usize
    }

    /// A numeric column's value for this host (NaN if the column were short,
    /// which the inventory's length checks rule out).
    pub fn metric(&self, metric: HostMetric) -> f64 {
        self.inventory
            .host_metric(metric)
            .get(self.row())
            .copied()
            .unwrap_or(f64::NAN)
    }

    metric_accessors! {
        /// Physical CPU sockets.
        cpu_sockets => CpuSockets,
        /// Physical CPU cores, all sockets.
        cpu_cores => CpuCores,
        /// Logical CPUs (hardware threads), all sockets.
        cpu_threads => CpuThreads,
        /// CPU load in percent of the whole host, pending placements included.
        cpu_usage_percent => CpuUsagePercent,
        /// The part of the CPU load that pending placements add.
        cpu_pending_percent => CpuPendingPercent,
        /// Minutes the load has stayed at or above the high-utilisation threshold.
        cpu_overloaded_minutes => CpuOverloadedMinutes,
        /// vCPUs of all VMs on the host, pending included.
        vcpus_used => VcpusUsed,
        /// The pending part of `vcpus_used`.
        vcpus_pending => VcpusPending,
        /// Physical memory, MiB.
        memory_total_mib => MemoryTotalMib,
        /// Free physical memory after pending placements, MiB.
        memory_free_mib => MemoryFreeMib,
        /// Memory pending placements claim, MiB.
        memory_pending_mib => MemoryPendingMib,
        /// Memory committed to VMs (guaranteed sizes, pending included), MiB.
        memory_committed_mib => MemoryCommittedMib,
        /// Memory reserved for the host itself, MiB.
        memory_reserved_mib => MemoryReservedMib,
        /// Swap size, MiB.
        swap_total_mib => SwapTotalMib,
        /// Free swap, MiB.
        swap_free_mib => SwapFreeMib,
        /// VMs on the host, pending included.
        vm_count => VmCount,
        /// The pending part of `vm_count`.
        vm_pending_count => VmPendingCount,
        /// Local disk, GiB.
        disk_total_gib => DiskTotalGib,
        /// Free local disk after pending placements, GiB.
        disk_free_gib => DiskFreeGib,
        /// Instances in a build, resize or migration state.
        io_ops => IoOps,
        /// Recent failed builds.
        build_failures => BuildFailures,
        /// Hosted-engine HA score, 0 when the host cannot run the engine VM.
        ha_score => HaScore,
        /// Hypervisor version as one comparable number.
        hypervisor_version => HypervisorVersion,
    }

    /// The host's lifecycle state.
    pub fn status(&self) -> HostStatus {
        self.inventory
            .host_statuses()
            .get(self.row())
            .copied()
            .unwrap_or(HostStatus::Down)
    }

    /// True when the host is up and accepting VMs.
    pub fn is_up(&self) -> bool {
        self.status() == HostStatus::Up
    }

    /// A boolean column's value for this host.
    pub fn flag(&self, flag: HostFlag) -> bool {
        self.inventory
            .host_flag(flag)
            .get(self.row())
            .copied()
            .unwrap_or(false)
    }

    /// True when the host holds the storage pool manager role (oVirt SPM).
    pub fn is_spm(&self) -> bool {
        self.flag(HostFlag::Spm)
    }

    /// A string column's value for this host ("" when unset).
    pub fn text(&self, text: HostText) -> &'a str {
        self.inventory.host_text(text).get(self.row())
    }

    /// The engine's stable identity for the host.
    pub fn id(&self) -> &'a str {
        self.text(HostText::Id)
    }

    /// Display name.
    pub fn name(&self) -> &'a str {
        self.text(HostText::Name)
    }

    /// Management address.
    pub fn address(&self) -> &'a str {
        self.text(HostText::Address)
    }

    /// Availability zone, "" when none.
    pub fn zone(&self) -> &'a str {
        self.text(HostText::Zone)
    }

    /// This host's pairs of a key/value column.
    pub fn labels(&self, kind: HostLabels) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.inventory.host_labels(kind).row(self.row())
    }

    /// This host's keys of a key/value column: a set-like column's
    /// members, read without their (empty) values.
    pub fn keys(&self, kind: HostLabels) -> impl Iterator<Item = &'a str> + 'a {
        let column = self.inventory.host_labels(kind);
        (column.keys_of(self.row()).iter()).map(|&key| column.string(key))
    }

    /// Networks the host is attached to.
    pub fn networks(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.keys(HostLabels::Networks)
    }

    /// True when the host is attached to `network`.
    pub fn has_network(&self, network: &str) -> bool {
        self.networks().any(|name| name == network)
    }

    /// The host's capability `key` (first value if it repeats).
    pub fn capability(&self, key: &str) -> Option<&'a str> {
        self.labels(HostLabels::Capabilities)
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// Every capability of the host.
    pub fn capabilities(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.labels(HostLabels::Capabilities)
    }

    /// Names of the aggregates (host groups) the host belongs to.
    pub fn aggregates(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.keys(HostLabels::Aggregates)
    }

    /// Every value the host's aggregates set for `key`: one per aggregate
    /// that sets it, so it can yield several.
    pub fn aggregate_metadata<'k>(&self, key: &'k str) -> impl Iterator<Item = &'a str> + 'k
    where
        'a: 'k,
    {
        self.labels(HostLabels::AggregateMetadata)
            .filter(move |(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// An engine-defined metric, `None` when the host does not report it.
    /// Fetches the whole column each time; in a loop, read
    /// [`Hosts::named_metric`] once instead.
    pub fn named_metric(&self, name: &str) -> Option<f64> {
        self.inventory
            .host_named_metric(name)
            .get(self.row())
            .copied()
            .filter(|value| !value.is_nan())
    }
}

impl std::fmt::Debug for HostRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostRef")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Labels;

    fn inventory() -> Inventory {
        let mut inventory = Inventory::new(2, 0);
        inventory
            .set_host_metric(HostMetric::MemoryFreeMib, vec![1024.0, 2048.0])
            .unwrap();
        inventory
            .set_host_statuses(vec![HostStatus::Up, HostStatus::Maintenance])
            .unwrap();
        inventory
            .set_host_text(HostText::Name, Interned::from_rows(["a", "b"]))
            .unwrap();
        inventory
            .set_host_labels(
                HostLabels::AggregateMetadata,
                Labels::from_rows([vec![("k", "1"), ("x", "y"), ("k", "2")], vec![]]),
            )
            .unwrap();
        inventory
            .set_host_named_metric("score", vec![1.5, f64::NAN])
            .unwrap();
        inventory
    }

    #[test]
    fn reads_each_column_through_the_host_view() {
        let inventory = inventory();
        let hosts = Hosts::new(&inventory);
        let a = hosts.get(0).unwrap();
        let b = hosts.get(1).unwrap();
        assert!(hosts.get(2).is_none());
        assert_eq!(a.memory_free_mib(), 1024.0);
        assert_eq!(b.memory_free_mib(), 2048.0);
        assert!(a.is_up() && !b.is_up());
        assert_eq!((a.name(), b.name()), ("a", "b"));
        assert_eq!(a.aggregate_metadata("k").collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(b.aggregate_metadata("k").count(), 0);
        assert_eq!(a.named_metric("score"), Some(1.5));
        assert_eq!(b.named_metric("score"), None);
        assert_eq!(a.cpu_cores(), 0.0, "unset columns read as defaults");
    }

    #[test]
    fn candidates_skip_indices_outside_the_snapshot() {
        let inventory = inventory();
        let hosts = Hosts::new(&inventory);
        let seen: Vec<u32> = hosts.candidates(&[1, 7, 0]).map(|h| h.index()).collect();
        assert_eq!(seen, [1, 0]);
    }
}
