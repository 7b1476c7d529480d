//! A host's "max scheduling memory" as oVirt's `VDS` computes it: what the
//! host may still promise to VMs under the memory over-commit limit.
//!
//! oVirt: `MaxVdsMemoryOverCommit% × physical − committed − reserved −
//! pending`, never below zero. Our committed column already includes
//! pending placements.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;

use crate::value;

/// The memory columns, fetched once per call, with the over-commit limit.
pub struct MemoryColumns<'a> {
    total: &'a [f64],
    committed: &'a [f64],
    reserved: &'a [f64],
    over_commit_percent: f64,
}

impl<'a> MemoryColumns<'a> {
    /// Fetches the columns; `over_commit_percent` is `MaxMemoryOverCommit`.
    pub fn new(hosts: &Hosts<'a>, over_commit_percent: f64) -> Self {
        MemoryColumns {
            total: hosts.metric(HostMetric::MemoryTotalMib),
            committed: hosts.metric(HostMetric::MemoryCommittedMib),
            reserved: hosts.metric(HostMetric::MemoryReservedMib),
            over_commit_percent,
        }
    }

    /// Host `host`'s max scheduling memory, MiB; 0 when it reports nothing.
    pub fn max_scheduling_mib(&self, host: u32) -> f64 {
        let free = value(self.total, host) * self.over_commit_percent / 100.0
            - value(self.committed, host)
            - value(self.reserved, host);
        // A missing figure (NaN) gives 0: `max` ignores a NaN side.
        float::max(free, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_commit_scales_physical_memory_and_never_goes_negative() {
        let mut inventory = Inventory::new(2, 0);
        inventory
            .set_host_metric(HostMetric::MemoryTotalMib, vec![1000.0, 1000.0])
            .unwrap();
        inventory
            .set_host_metric(HostMetric::MemoryCommittedMib, vec![700.0, 1900.0])
            .unwrap();
        inventory
            .set_host_metric(HostMetric::MemoryReservedMib, vec![100.0, 200.0])
            .unwrap();
        let hosts = Hosts::new(&inventory);
        let memory = MemoryColumns::new(&hosts, 150.0);
        assert_eq!(memory.max_scheduling_mib(0), 700.0);
        assert_eq!(memory.max_scheduling_mib(1), 0.0);
        assert_eq!(memory.max_scheduling_mib(7), 0.0, "outside the snapshot");
    }
}
