//! Small oVirt hardware conventions shared by several units: CPU
//! passthrough, the VM type, and reading a host's set-like label columns.

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

/// The keys of host `host`'s set-like label column `kind` (CPU flags,
/// emulated machines, cluster levels).
pub fn host_set<'a>(host: &HostRef<'a>, kind: HostLabels) -> Vec<&'a str> {
    host.labels(kind).map(|(key, _)| key).collect()
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
