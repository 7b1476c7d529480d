//! Small oVirt hardware conventions shared by several units: CPU
//! passthrough, the VM type, and reading a host's set-like label columns.

use sandpiper_guest::model::Labels;
use sandpiper_guest::prelude::*;

use crate::pinning::extra_spec;

/// The VM CPU model that stands for oVirt's CPU passthrough
/// (`VM.isUsingCpuPassthrough`), as libvirt names the mode.
pub const CPU_PASSTHROUGH_MODEL: &str = "host-passthrough";

/// The VM extra spec carrying oVirt's VM type (`desktop`, `server`,
/// `high_performance`).
pub const VM_TYPE_SPEC: &str = "ovirt:vm_type";

/// The VM uses CPU passthrough.
pub fn uses_cpu_passthrough(vm: &Vm) -> bool {
    vm.hardware.cpu_model.trim() == CPU_PASSTHROUGH_MODEL
}

/// The VM is of oVirt's type "high performance".
pub fn is_high_performance(vm: &Vm) -> bool {
    extra_spec(vm, VM_TYPE_SPEC).is_some_and(|value| value.trim() == "high_performance")
}

/// A set-like label column (CPU flags, emulated machines, cluster levels)
/// read by string id: a host's set is a slice of ids into the column's
/// string table, so a unit looks the VM's strings up once and compares
/// numbers per host. Building each host's set as strings (a `Vec` or a
/// `HashSet` per host) cost CPU-Level about a microsecond a host.
pub struct HostSets<'a> {
    labels: &'a Labels,
    /// Per string id: the stamp of the last row [`HostSets::load`]ed that
    /// has it, so loading the next row clears nothing.
    stamps: Vec<u32>,
    stamp: u32,
}

impl<'a> HostSets<'a> {
    /// The hosts' column `kind`.
    pub fn new(hosts: &Hosts<'a>, kind: HostLabels) -> Self {
        let labels = hosts.labels(kind);
        HostSets {
            labels,
            stamps: vec![0; labels.strings.len()],
            stamp: 0,
        }
    }

    /// The id of `text`; none when no host has it.
    pub fn id(&self, text: &str) -> Option<u32> {
        self.labels.id(text)
    }

    /// Per id, whether its string satisfies `test`.
    pub fn ids_where(&self, test: impl Fn(&str) -> bool) -> Vec<bool> {
        self.labels.ids_where(test)
    }

    /// The string with id `id` ("" for an id outside the table).
    pub fn text(&self, id: u32) -> &'a str {
        self.labels.string(id)
    }

    /// Host `host`'s ids, in the order the host reported them; none when
    /// the row is out of range or malformed.
    #[inline]
    pub fn row(&self, host: u32) -> &'a [u32] {
        self.labels.keys_of(host as usize)
    }

    /// Makes `host`'s set the one [`HostSets::has`] answers for: for
    /// asking about several ids per host.
    #[inline]
    pub fn load(&mut self, host: u32) {
        self.stamp += 1;
        for &id in self.row(host) {
            if let Some(stamp) = self.stamps.get_mut(id as usize) {
                *stamp = self.stamp;
            }
        }
    }

    /// Whether the loaded host's set has id `id` (never for none).
    #[inline]
    pub fn has(&self, id: Option<u32>) -> bool {
        id.and_then(|id| self.stamps.get(id as usize))
            .is_some_and(|&stamp| stamp == self.stamp)
    }
}

/// Up to `limit` items joined by ", ", with "and N more" after.
pub fn list(items: &[&str], limit: usize) -> String {
    if items.len() <= limit {
        items.join(", ")
    } else {
        format!(
            "{} and {} more",
            items[..limit].join(", "),
            items.len() - limit
        )
    }
}
