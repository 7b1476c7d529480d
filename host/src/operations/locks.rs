//! The lock declarations of the operations Sandpiper makes itself. The
//! levels are Ganeti's (docs/operations.md): a migration holds its VM and
//! both hosts' resources exclusively, a start its VM and its host's
//! resources. Neither takes the host itself (`host`): other operations on
//! the host (a refresh of its capabilities, another VM's start) may run
//! beside it, but none that needs its resources exclusively.

use std::collections::BTreeSet;

use sandpiper_queue::{Lock, Locks};

/// A live migration of `vm_id` from `source_host` to `destination_host`:
/// the VM exclusive, both hosts' resources exclusive.
pub fn migration_locks(vm_id: &str, source_host: &str, destination_host: &str) -> Locks {
    let hosts = BTreeSet::from([source_host.to_owned(), destination_host.to_owned()]);
    Locks {
        vm: Lock::Exclusive(BTreeSet::from([vm_id.to_owned()])),
        host_resources: Lock::Exclusive(hosts),
        ..Locks::default()
    }
}

/// A start of `vm_id` on `host`: the VM exclusive, the host's resources
/// exclusive.
pub fn start_locks(vm_id: &str, host: &str) -> Locks {
    Locks {
        vm: Lock::Exclusive(BTreeSet::from([vm_id.to_owned()])),
        host_resources: Lock::Exclusive(BTreeSet::from([host.to_owned()])),
        ..Locks::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_migration_conflicts_with_a_start_on_either_host_only() {
        let migration = migration_locks("vm-1", "h1", "h2");
        assert!(migration.validate().is_ok());
        assert!(sandpiper_queue::conflicts(
            &migration,
            &start_locks("vm-2", "h2")
        ));
        assert!(sandpiper_queue::conflicts(
            &migration,
            &start_locks("vm-1", "h3")
        ));
        assert!(!sandpiper_queue::conflicts(
            &migration,
            &start_locks("vm-2", "h3")
        ));
    }
}
