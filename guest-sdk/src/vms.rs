//! Friendly, zero-copy views of the VMs already running (or pending) in the
//! cluster, which balance units move and affinity-style units count.
//!
//! Like [`crate::hosts`], each [`VmRef`] method reads a lazily fetched column.

use crate::Inventory;
use crate::model::{Interned, VmFlag, VmMetric, VmText};

/// All running VMs of the snapshot, addressed by index.
#[derive(Clone, Copy)]
pub struct Vms<'a> {
    inventory: &'a Inventory,
}

impl<'a> Vms<'a> {
    pub fn new(inventory: &'a Inventory) -> Self {
        Vms { inventory }
    }

    /// Number of VMs in the snapshot.
    pub fn len(&self) -> usize {
        self.inventory.vm_count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The VM at `index`, if the snapshot has one there.
    pub fn get(&self, index: u32) -> Option<VmRef<'a>> {
        ((index as usize) < self.len()).then_some(VmRef {
            inventory: self.inventory,
            index,
        })
    }

    /// Every VM, in index order.
    pub fn iter(&self) -> impl Iterator<Item = VmRef<'a>> + 'a {
        let inventory = self.inventory;
        (0..inventory.vm_count() as u32).map(move |index| VmRef { inventory, index })
    }

    /// The VMs placed on host `host`, in index order.
    pub fn on_host(&self, host: u32) -> impl Iterator<Item = VmRef<'a>> + 'a {
        let inventory = self.inventory;
        inventory
            .vm_hosts()
            .iter()
            .enumerate()
            .filter(move |&(_, &on)| on == host)
            .map(move |(index, _)| VmRef {
                inventory,
                index: index as u32,
            })
    }

    /// Host index of every VM.
    pub fn hosts(&self) -> &'a [u32] {
        self.inventory.vm_hosts()
    }

    /// A whole numeric VM column.
    pub fn metric(&self, metric: VmMetric) -> &'a [f64] {
        self.inventory.vm_metric(metric)
    }

    /// A whole boolean VM column.
    pub fn flags(&self, flag: VmFlag) -> &'a [bool] {
        self.inventory.vm_flag(flag)
    }

    /// A whole string VM column, interned.
    pub fn texts(&self, text: VmText) -> &'a Interned {
        self.inventory.vm_text(text)
    }
}

/// One running VM. Only [`Vms`] makes these, always with an index inside the
/// snapshot.
#[derive(Clone, Copy)]
pub struct VmRef<'a> {
    inventory: &'a Inventory,
    index: u32,
}

impl<'a> VmRef<'a> {
    /// The VM's index in the snapshot (what a `Migration` names).
    pub fn index(&self) -> u32 {
        self.index
    }

    fn row(&self) -> usize {
        self.index as usize
    }

    /// Index of the host the VM runs (or is pending) on.
    pub fn host(&self) -> u32 {
        self.inventory
            .vm_hosts()
            .get(self.row())
            .copied()
            .unwrap_or(u32::MAX)
    }

    /// A numeric column's value for this VM.
    pub fn metric(&self, metric: VmMetric) -> f64 {
        self.inventory
            .vm_metric(metric)
            .get(self.row())
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// Memory size, MiB.
    pub fn memory_mib(&self) -> f64 {
        self.metric(VmMetric::MemoryMib)
    }

    /// Guaranteed memory, MiB.
    pub fn memory_guaranteed_mib(&self) -> f64 {
        self.metric(VmMetric::MemoryGuaranteedMib)
    }

    /// Virtual CPUs.
    pub fn vcpus(&self) -> f64 {
        self.metric(VmMetric::Vcpus)
    }

    /// CPU usage in percent of the VM's own vCPUs.
    pub fn cpu_usage_percent(&self) -> f64 {
        self.metric(VmMetric::CpuUsagePercent)
    }

    /// A boolean column's value for this VM.
    pub fn flag(&self, flag: VmFlag) -> bool {
        self.inventory
            .vm_flag(flag)
            .get(self.row())
            .copied()
            .unwrap_or(false)
    }

    /// True when the VM may be live-migrated.
    pub fn is_migratable(&self) -> bool {
        self.flag(VmFlag::Migratable)
    }

    /// True when the VM is highly available.
    pub fn is_highly_available(&self) -> bool {
        self.flag(VmFlag::HighlyAvailable)
    }

    /// True when the VM is the hosted engine.
    pub fn is_hosted_engine(&self) -> bool {
        self.flag(VmFlag::HostedEngine)
    }

    /// True when the VM is a placement the engine has not reported yet.
    pub fn is_pending(&self) -> bool {
        self.flag(VmFlag::Pending)
    }

    /// The engine's stable identity for the VM.
    pub fn id(&self) -> &'a str {
        self.inventory.vm_text(VmText::Id).get(self.row())
    }

    /// Display name.
    pub fn name(&self) -> &'a str {
        self.inventory.vm_text(VmText::Name).get(self.row())
    }
}

impl std::fmt::Debug for VmRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VmRef")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_vms_of_a_host() {
        let mut inventory = Inventory::new(2, 3);
        inventory.set_vm_hosts(vec![1, 0, 1]).unwrap();
        inventory
            .set_vm_metric(VmMetric::MemoryMib, vec![512.0, 1024.0, 2048.0])
            .unwrap();
        let vms = Vms::new(&inventory);
        let on_one: Vec<(u32, f64)> = vms
            .on_host(1)
            .map(|vm| (vm.index(), vm.memory_mib()))
            .collect();
        assert_eq!(on_one, [(0, 512.0), (2, 2048.0)]);
        assert!(vms.get(3).is_none());
    }
}
