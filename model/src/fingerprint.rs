//! Each host row's fingerprint: a keyed hash of everything a unit can read
//! about the host, so that hosts sent again with a request can be known
//! unchanged without a report saying so.
//!
//! Held hosts need none: the held inventory renews a host's stamp with
//! each report that changes it. Hosts sent inline (JSON or the compact
//! body) arrive whole with every decision, so the only way to know one is
//! the same as last time is to compare what it holds. The fingerprint
//! covers the host's figures, status, flags, texts, labels and named
//! metrics, then every column of each VM on it, in the VMs' order; equal
//! fingerprints mean equal rows for everything a `per-host` unit may look
//! at, short of a 64-bit collision under a key chosen at random when the
//! process starts.
//!
//! A host with hardware (NUMA cells, PCI pools, mediated devices) gets
//! none (`None`): its hardware lies in tables of cells and devices beyond
//! the host's row, and an engine that sends hardware inline is rare
//! enough that hashing it is not worth a second description of those
//! tables.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use foldhash::quality::RandomState;

use crate::inventory::Inventory;
use crate::{
    HostFlag, HostLabels, HostMetric, HostText, Interned, Labels, VmFlag, VmMetric, VmText,
};

/// The key: random, once per process, so fingerprints compare only
/// within one process (they are never stored).
fn key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::default)
}

/// Folds `value` into a row's running hash. For a given value this is a
/// bijection of the hash (an xor, a multiplication by an odd number, a
/// rotation), so two rows that differ in one value never end equal; the
/// rows start from, and end in, the keyed hash. Cheap on purpose: a
/// 10,000-host body folds about a million values, and a hasher's full
/// round per value cost more than the decision it saved.
#[inline]
fn fold(hash: &mut u64, value: u64) {
    *hash = (*hash ^ value)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(26);
}

/// One fingerprint per host of `inventory`; `None` for a host with
/// hardware.
pub fn host_fingerprints(inventory: &Inventory) -> Vec<Option<u64>> {
    let hosts = inventory.host_count();
    let mut rows: Vec<u64> = vec![key().hash_one("host row"); hosts];
    let mut hashed = Hashed::default();

    // Each column folded in with its name's place, so that a column left
    // unset in one body and set in the next never lines up.
    for (place, &metric) in HostMetric::ALL.iter().enumerate() {
        let given = inventory.given_host_metric(metric);
        column(&mut rows, place, given, f64::to_bits);
    }
    for (row, &status) in rows.iter_mut().zip(inventory.host_statuses()) {
        fold(row, status as u64);
    }
    for (place, &flag) in HostFlag::ALL.iter().enumerate() {
        let given = inventory.given_host_flag(flag);
        column(&mut rows, 100 + place, given, u64::from);
    }
    for (place, &text) in HostText::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_host_text(text) {
            mark(&mut rows, 200 + place);
            texts(&mut rows, column, &mut hashed);
        }
    }
    for (place, &kind) in HostLabels::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_host_labels(kind) {
            mark(&mut rows, 300 + place);
            labels(&mut rows, column);
        }
    }
    for name in inventory.host_named_metric_names() {
        let name_hash = key().hash_one(&name);
        for row in rows.iter_mut() {
            fold(row, name_hash);
        }
        let values = inventory.host_named_metric(&name);
        for (row, value) in rows.iter_mut().zip(values.iter()) {
            fold(row, value.to_bits());
        }
    }

    // Each VM's own hash, a column at a time; then each folded into its
    // host's, in VM order.
    let on = inventory.vm_hosts();
    let mut vms: Vec<u64> = vec![VM_MARK; on.len()];
    for (place, &metric) in VmMetric::ALL.iter().enumerate() {
        let given = inventory.given_vm_metric(metric);
        column(&mut vms, 400 + place, given, f64::to_bits);
    }
    for (place, &flag) in VmFlag::ALL.iter().enumerate() {
        let given = inventory.given_vm_flag(flag);
        column(&mut vms, 500 + place, given, u64::from);
    }
    for (place, &text) in VmText::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_vm_text(text) {
            mark(&mut vms, 600 + place);
            texts(&mut vms, column, &mut hashed);
        }
    }
    for (&host, &vm) in on.iter().zip(&vms) {
        if let Some(row) = rows.get_mut(host as usize) {
            fold(row, vm);
        }
    }

    let numa = inventory.numa_topology();
    let pci = inventory.pci_pools();
    let mdev = inventory.mdev_offers();
    rows.into_iter()
        .enumerate()
        .map(|(host, row)| {
            let hardware = !numa.host_cells(host).is_empty()
                || !pci.host_pools(host).is_empty()
                || !mdev.host_offers(host).is_empty();
            (!hardware).then(|| key().hash_one(row))
        })
        .collect()
}

/// Folds a column's place into every row, before the column.
fn mark(rows: &mut [u64], place: usize) {
    for row in rows.iter_mut() {
        fold(row, place as u64);
    }
}

/// Where each VM's own hash starts.
const VM_MARK: u64 = 0x5650_4d5f_524f_5721;

/// Folds in a column of figures or flags, if it was set, after its place:
/// each row's value as `bits` gives it (a figure bit for bit, so -0.0 and
/// NaNs count as sent).
fn column<T: Copy>(rows: &mut [u64], place: usize, column: Option<&[T]>, bits: fn(T) -> u64) {
    let Some(column) = column else {
        return;
    };
    mark(rows, place);
    for (row, &value) in rows.iter_mut().zip(column) {
        fold(row, bits(value));
    }
}

/// Text columns' values hashed so far. Names are most often the ids
/// (a column with the same values), so theirs are hashed once.
#[derive(Default)]
struct Hashed<'a> {
    columns: Vec<(&'a Interned, Vec<u64>)>,
}

impl<'a> Hashed<'a> {
    /// Each distinct value of `column`'s keyed hash, by position.
    fn of(&mut self, column: &'a Interned) -> &[u64] {
        let same = |(seen, _): &(&Interned, Vec<u64>)| {
            seen.text() == column.text() && seen.offsets() == column.offsets()
        };
        let at = match self.columns.iter().position(same) {
            Some(at) => at,
            None => {
                let hashes = column.values().map(|value| key().hash_one(value)).collect();
                self.columns.push((column, hashes));
                self.columns.len() - 1
            }
        };
        &self.columns[at].1
    }
}

/// Folds in each row's text from `column`; each distinct text is hashed
/// once (a cluster's few `cpu_info` texts, not one per host).
fn texts<'a>(rows: &mut [u64], column: &'a Interned, hashed: &mut Hashed<'a>) {
    let hashes = hashed.of(column);
    for (row, &at) in rows.iter_mut().zip(&column.indices) {
        fold(row, hashes.get(at as usize).copied().unwrap_or(0));
    }
}

/// Folds in each row's pairs, after their count.
fn labels(rows: &mut [u64], column: &Labels) {
    let hashes: Vec<u64> = column.strings.iter().map(|s| key().hash_one(s)).collect();
    let hash = |at: u32| hashes.get(at as usize).copied().unwrap_or(0);
    for (i, row) in rows.iter_mut().enumerate() {
        let start = column.offsets.get(i).copied().unwrap_or(0) as usize;
        let end = column.offsets.get(i + 1).copied().unwrap_or(0) as usize;
        fold(row, end.saturating_sub(start) as u64);
        for pair in start..end.min(column.keys.len()).min(column.values.len()) {
            fold(row, hash(column.keys[pair]));
            fold(row, hash(column.values[pair]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostStatus;
    use crate::hardware::NumaTopology;

    /// Three hosts with one VM each, every column set; `edit` then changes
    /// one column.
    fn inventory(edit: &dyn Fn(&mut Inventory)) -> Inventory {
        let mut inv = Inventory::new(3, 3);
        let texts = || Interned::from_values(["a", "b", "c"], vec![0, 1, 2]);
        for &metric in HostMetric::ALL {
            inv.set_host_metric(metric, vec![1.0, 2.0, 3.0]).unwrap();
        }
        inv.set_host_statuses(vec![HostStatus::Up; 3]).unwrap();
        for &flag in HostFlag::ALL {
            inv.set_host_flag(flag, vec![false; 3]).unwrap();
        }
        for &text in HostText::ALL {
            inv.set_host_text(text, texts()).unwrap();
        }
        for &kind in HostLabels::ALL {
            let rows = [[("k", "a")], [("k", "b")], [("k", "c")]];
            inv.set_host_labels(kind, Labels::from_rows(rows)).unwrap();
        }
        inv.set_host_named_metric("n", vec![1.0, 2.0, 3.0]).unwrap();
        inv.set_vm_hosts(vec![0, 1, 2]).unwrap();
        for &metric in VmMetric::ALL {
            inv.set_vm_metric(metric, vec![1.0, 2.0, 3.0]).unwrap();
        }
        for &flag in VmFlag::ALL {
            inv.set_vm_flag(flag, vec![false; 3]).unwrap();
        }
        for &text in VmText::ALL {
            inv.set_vm_text(text, texts()).unwrap();
        }
        edit(&mut inv);
        inv
    }

    /// A column's name and how to change it.
    type Edit = (String, Box<dyn Fn(&mut Inventory)>);

    /// Every column a unit can read, changed for host 1 (or its VM) alone.
    fn edits() -> Vec<Edit> {
        let changed = || Interned::from_values(["a", "z", "c"], vec![0, 1, 2]);
        let mut edits: Vec<Edit> = Vec::new();
        for &metric in HostMetric::ALL {
            edits.push((
                format!("{metric:?}"),
                Box::new(move |inv| inv.set_host_metric(metric, vec![1.0, 9.0, 3.0]).unwrap()),
            ));
        }
        edits.push((
            "status".to_owned(),
            Box::new(|inv| {
                let statuses = vec![HostStatus::Up, HostStatus::Maintenance, HostStatus::Up];
                inv.set_host_statuses(statuses).unwrap()
            }),
        ));
        for &flag in HostFlag::ALL {
            edits.push((
                format!("{flag:?}"),
                Box::new(move |inv| inv.set_host_flag(flag, vec![false, true, false]).unwrap()),
            ));
        }
        for &text in HostText::ALL {
            edits.push((
                format!("{text:?}"),
                Box::new(move |inv| inv.set_host_text(text, changed()).unwrap()),
            ));
        }
        for &kind in HostLabels::ALL {
            edits.push((
                format!("{kind:?}"),
                Box::new(move |inv| {
                    let rows = [
                        vec![("k", "a")],
                        vec![("k", "b"), ("k2", "")],
                        vec![("k", "c")],
                    ];
                    inv.set_host_labels(kind, Labels::from_rows(rows)).unwrap()
                }),
            ));
        }
        edits.push((
            "named metric".to_owned(),
            Box::new(|inv| {
                inv.set_host_named_metric("n", vec![1.0, f64::NAN, 3.0])
                    .unwrap()
            }),
        ));
        for &metric in VmMetric::ALL {
            edits.push((
                format!("{metric:?}"),
                Box::new(move |inv| inv.set_vm_metric(metric, vec![1.0, 9.0, 3.0]).unwrap()),
            ));
        }
        for &flag in VmFlag::ALL {
            edits.push((
                format!("{flag:?}"),
                Box::new(move |inv| inv.set_vm_flag(flag, vec![false, true, false]).unwrap()),
            ));
        }
        for &text in VmText::ALL {
            edits.push((
                format!("{text:?}"),
                Box::new(move |inv| inv.set_vm_text(text, changed()).unwrap()),
            ));
        }
        edits
    }

    #[test]
    fn a_host_is_known_unchanged_only_while_nothing_it_holds_changes() {
        let before = host_fingerprints(&inventory(&|_| {}));
        assert!(before.iter().all(Option::is_some));
        assert_eq!(
            before,
            host_fingerprints(&inventory(&|_| {})),
            "built again"
        );
        for (column, edit) in edits() {
            let after = host_fingerprints(&inventory(edit.as_ref()));
            assert_ne!(before[1], after[1], "{column} changed on host 1");
            assert_eq!(
                (before[0], before[2]),
                (after[0], after[2]),
                "{column} unchanged on hosts 0 and 2"
            );
        }
    }

    #[test]
    fn a_vm_moving_changes_both_hosts_and_hardware_is_never_fingerprinted() {
        let before = host_fingerprints(&inventory(&|_| {}));
        let moved = host_fingerprints(&inventory(&|inv| inv.set_vm_hosts(vec![0, 2, 2]).unwrap()));
        assert_eq!(before[0], moved[0]);
        assert_ne!(before[1], moved[1]);
        assert_ne!(before[2], moved[2]);

        let with_cell = host_fingerprints(&inventory(&|inv| {
            let numa = NumaTopology {
                offsets: vec![0, 0, 1, 1],
                node_ids: vec![0],
                sockets: vec![0],
            };
            inv.set_numa_topology(numa).unwrap()
        }));
        assert_eq!(with_cell[1], None, "a host with a NUMA cell");
        assert_eq!((with_cell[0], with_cell[2]), (before[0], before[2]));
    }
}
