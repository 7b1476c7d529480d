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
//! A row's fingerprint is also kept in parts ([`RowFingerprints`]): its
//! host metrics one by one, its VMs, and the rest of its host columns. So
//! a row can be fingerprinted again over only the columns a unit's call
//! read ([`RowFingerprints::over`]): a per-host answer from a call that
//! read none of a change's columns could not have depended on it.
//!
//! A host with hardware (NUMA cells, PCI pools, mediated devices) gets
//! none (`None`): its hardware lies in tables of cells and devices beyond
//! the host's row, and an engine that sends hardware inline is rare
//! enough that hashing it is not worth a second description of those
//! tables.

use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

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

/// Folds `value` into a running hash. For a given value this is a
/// bijection of the hash (an xor, a multiplication by an odd number, a
/// rotation), and for a given hash a bijection of the value. Cheap on
/// purpose: a 10,000-host body holds about a million values, and a
/// hasher's full round per value cost more than the decision it saved.
#[inline]
fn fold(hash: &mut u64, value: u64) {
    *hash = (*hash ^ value)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(26);
}

/// A value's share of its row: `value` folded into its column's seed, so
/// two values of one column never give the same share.
#[inline]
fn share(seed: u64, value: u64) -> u64 {
    let mut hash = seed;
    fold(&mut hash, value);
    hash
}

/// Each column's shares of the rows' fingerprints, kept from one call of
/// [`host_fingerprints_kept`] to the next by the column's allocation: a
/// column the next snapshot shares (a compact body's column sent again
/// unchanged, `host::arrow_snapshot`) is not hashed again.
///
/// A row's fingerprint is the keyed hash of the sum of its shares, one
/// per column set, plus a fold of its VMs' own sums in VM order. Two rows
/// that differ in one value differ in exactly one share, so their sums
/// never end equal; columns are told apart by their seeds, a keyed hash
/// of their place (or a named metric's name).
///
/// The sums of the two groups of columns that change least are kept too:
/// the host columns but the metrics, and the VMs' columns folded by host.
/// A group made of the very columns the last call's was made of (each
/// one kept, as many as then) is not summed again: a body whose hosts
/// changed only their figures adds up only its metrics.
#[derive(Default)]
pub struct ColumnShares {
    kept: Vec<Kept>,
    reused: usize,
    rest: Option<GroupSums>,
    vms: Option<GroupSums>,
}

/// A group of columns' sums by row, and what made them.
struct GroupSums {
    /// How many columns were summed.
    columns: usize,
    /// The VMs' hosts the VMs' sums were folded by (`None` for the host
    /// columns), held so that their address stays theirs.
    vm_hosts: Option<Arc<Vec<u32>>>,
    sums: Arc<Vec<u64>>,
}

/// One column's shares, and the column itself, held so that its address
/// is not another column's while the shares are kept.
struct Kept {
    _column: Box<dyn std::any::Any + Send + Sync>,
    address: usize,
    seed: u64,
    /// Shared with the [`RowFingerprints`] of the call that kept them,
    /// for a host metric's column.
    shares: Arc<Vec<u64>>,
}

impl ColumnShares {
    /// How many columns' shares the last call took from the call before.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// How many columns' shares are kept.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }
}

/// The shares being gathered in one call, and those of the call before.
struct Gather<'a> {
    /// The last call's shares, taken from and left for the next call;
    /// `None` when nothing is kept (see [`host_fingerprints`]).
    last: Option<&'a mut ColumnShares>,
    next: Vec<Kept>,
    reused: usize,
    /// Where a column's shares are written when they are not kept: one
    /// buffer for every column, so its pages stay in the cache.
    scratch: Vec<u64>,
    /// The shares of the group being gathered (when they are kept), and
    /// how many of them were the last call's.
    group: Vec<Arc<Vec<u64>>>,
    group_reused: usize,
}

impl Gather<'_> {
    /// Adds `column`'s shares (seeded by `seed`; `compute` writes them
    /// into an empty buffer) to the group's sums: when nothing is kept,
    /// to `sums` now; otherwise the shares (kept ones when the last call
    /// saw the same allocation there) join the group, summed at
    /// [`Gather::sum_group`].
    fn add<T: Send + Sync + ?Sized + 'static>(
        &mut self,
        sums: &mut [u64],
        seed: u64,
        column: &Arc<T>,
        compute: impl FnOnce(&mut Vec<u64>),
    ) {
        if self.last.is_none() {
            self.scratch.clear();
            compute(&mut self.scratch);
            add_shares(sums, &self.scratch);
            return;
        }
        let reused = self.reused;
        let shares = self.shares(seed, column, compute);
        self.group_reused += self.reused - reused;
        self.group.push(shares);
    }

    /// Ends a group of columns: `sums` with the group's shares added, or
    /// the last call's sums for the group (`last`) when the group is made
    /// of the same columns as then, folded by the same `vm_hosts`.
    fn sum_group(
        &mut self,
        mut sums: Vec<u64>,
        last: Option<GroupSums>,
        vm_hosts: Option<&Arc<Vec<u32>>>,
        fold_by_host: impl FnOnce(Vec<u64>) -> Vec<u64>,
    ) -> GroupSums {
        let group = std::mem::take(&mut self.group);
        let all_kept = std::mem::replace(&mut self.group_reused, 0) == group.len();
        let columns = group.len();
        let vm_hosts = vm_hosts.cloned();
        let same = |last: &GroupSums| {
            all_kept
                && last.columns == columns
                && match (&last.vm_hosts, &vm_hosts) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                }
        };
        if let Some(last) = last.filter(same) {
            return last;
        }
        for shares in &group {
            add_shares(&mut sums, shares);
        }
        GroupSums {
            columns,
            vm_hosts,
            sums: Arc::new(fold_by_host(sums)),
        }
    }

    /// `column`'s shares (seeded by `seed`; `compute` writes them into an
    /// empty buffer): kept ones when the last call saw the same allocation
    /// there, and kept for the next call when the last call's are.
    fn shares<T: Send + Sync + ?Sized + 'static>(
        &mut self,
        seed: u64,
        column: &Arc<T>,
        compute: impl FnOnce(&mut Vec<u64>),
    ) -> Arc<Vec<u64>> {
        let Some(last) = self.last.as_deref_mut() else {
            let mut shares = Vec::new();
            compute(&mut shares);
            return Arc::new(shares);
        };
        let address = Arc::as_ptr(column).cast::<()>() as usize;
        let found = last
            .kept
            .iter()
            .position(|k| k.address == address && k.seed == seed);
        let kept = match found {
            Some(at) => {
                self.reused += 1;
                last.kept.swap_remove(at)
            }
            None => {
                // The last call's buffer for the column in this place (a
                // changed column: same seed, another allocation) is
                // written again, not a fresh one whose pages would all
                // fault in. Seeds differ between places, so no other
                // column of this call could have been matched to it. (The
                // last call's fingerprints, which may share it, are gone
                // by now; if not, a fresh buffer it is.)
                let mut shares = match last.kept.iter().position(|k| k.seed == seed) {
                    Some(at) => {
                        Arc::try_unwrap(last.kept.swap_remove(at).shares).unwrap_or_default()
                    }
                    None => Vec::new(),
                };
                shares.clear();
                compute(&mut shares);
                Kept {
                    _column: Box::new(Arc::clone(column)),
                    address,
                    seed,
                    shares: Arc::new(shares),
                }
            }
        };
        let shares = Arc::clone(&kept.shares);
        self.next.push(kept);
        shares
    }
}

fn add_shares(sums: &mut [u64], shares: &[u64]) {
    for (sum, share) in sums.iter_mut().zip(shares) {
        *sum = sum.wrapping_add(*share);
    }
}

/// A column's seed: the keyed hash of its place.
fn seed(place: usize) -> u64 {
    key().hash_one(("column", place))
}

/// Each host row's fingerprint ([`RowFingerprints::whole`]), and its
/// parts.
pub struct RowFingerprints {
    whole: Vec<Option<u64>>,
    /// By row: the sum of its shares of every host column but the metrics
    /// (status, flags, texts, labels, named metrics), none of which a
    /// call's record of its reads names one by one.
    rest: Arc<Vec<u64>>,
    /// Each host metric given, with its shares by row.
    metrics: Vec<(HostMetric, Arc<Vec<u64>>)>,
    /// By row: its VMs' own sums folded in VM order; 0 for none.
    vms: Arc<Vec<u64>>,
}

impl RowFingerprints {
    /// One fingerprint per host; `None` for a host with hardware.
    pub fn whole(&self) -> &[Option<u64>] {
        &self.whole
    }

    /// Host `host`'s fingerprint over its host metrics that `read` names,
    /// its VMs if `vms`, and all its other host columns; `None` for a host
    /// with hardware (or none at `host`). Two rows with equal fingerprints
    /// over the same columns hold the same in those columns; over every
    /// metric and the VMs it is the row's whole fingerprint.
    pub fn over(&self, host: usize, read: impl Fn(HostMetric) -> bool, vms: bool) -> Option<u64> {
        self.whole.get(host)?.as_ref()?;
        let mut sum = self.rest[host];
        for (metric, shares) in &self.metrics {
            if read(*metric) {
                sum = sum.wrapping_add(shares[host]);
            }
        }
        let vms = if vms { self.vms[host] } else { 0 };
        Some(key().hash_one((sum, vms)))
    }
}

/// Each host's fingerprint of `inventory`, in parts. Keeps nothing but
/// the host metrics' shares (which the parts are): for columns no later
/// snapshot shares (a JSON body's, read afresh each time), where keeping
/// each column's shares would only write and fault in megabytes that are
/// never read again.
pub fn host_fingerprints(inventory: &Inventory) -> RowFingerprints {
    fingerprints(inventory, None)
}

/// [`host_fingerprints`], taking the shares of the columns `kept` from
/// the last call still has, and keeping this call's in their place.
pub fn host_fingerprints_kept(inventory: &Inventory, kept: &mut ColumnShares) -> RowFingerprints {
    fingerprints(inventory, Some(kept))
}

fn fingerprints(inventory: &Inventory, mut kept: Option<&mut ColumnShares>) -> RowFingerprints {
    let host_count = inventory.host_count();
    // The last call's group sums, for rows as many as now.
    let (last_rest, last_vms) = match kept.as_deref_mut() {
        Some(kept) => {
            let fits = |sums: &GroupSums| sums.sums.len() == host_count;
            (kept.rest.take().filter(fits), kept.vms.take().filter(fits))
        }
        None => (None, None),
    };
    let mut gather = Gather {
        last: kept,
        next: Vec::new(),
        reused: 0,
        scratch: Vec::new(),
        group: Vec::new(),
        group_reused: 0,
    };
    // Summed here only when nothing is kept (`Gather::add`).
    let mut rows: Vec<u64> = vec![0; host_count];
    let mut hashed = Hashed::default();

    let mut metrics = Vec::new();
    for (place, &metric) in HostMetric::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_host_metric(metric) {
            let seed = seed(place);
            let shares = gather.shares(seed, column, |out| figures(seed, column, out));
            metrics.push((metric, shares));
        }
    }
    let statuses = inventory.host_statuses_column();
    let status_seed = seed(99);
    gather.add(&mut rows, status_seed, statuses, |out| {
        out.extend(statuses.iter().map(|&s| share(status_seed, s as u64)));
    });
    for (place, &flag) in HostFlag::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_host_flag(flag) {
            let seed = seed(100 + place);
            gather.add(&mut rows, seed, column, |out| flags(seed, column, out));
        }
    }
    for (place, &text) in HostText::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_host_text(text) {
            let seed = seed(200 + place);
            gather.add(&mut rows, seed, column, |out| {
                texts(seed, column, &mut hashed, out);
            });
        }
    }
    for (place, &kind) in HostLabels::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_host_labels(kind) {
            let seed = seed(300 + place);
            gather.add(&mut rows, seed, column, |out| labels(seed, column, out));
        }
    }
    for name in inventory.host_named_metric_names() {
        let seed = key().hash_one(&name);
        let column = inventory.host_named_metric(&name);
        gather.add(&mut rows, seed, &column, |out| figures(seed, &column, out));
    }

    let rest_group = gather.sum_group(rows, last_rest, None, |sums| sums);

    // Each VM's own sum, a column at a time; then each folded into its
    // host's, in VM order.
    let on = inventory.vm_hosts_shared();
    let mut vms: Vec<u64> = vec![VM_MARK; on.len()];
    for (place, &metric) in VmMetric::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_vm_metric(metric) {
            let seed = seed(400 + place);
            gather.add(&mut vms, seed, column, |out| figures(seed, column, out));
        }
    }
    for (place, &flag) in VmFlag::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_vm_flag(flag) {
            let seed = seed(500 + place);
            gather.add(&mut vms, seed, column, |out| flags(seed, column, out));
        }
    }
    for (place, &text) in VmText::ALL.iter().enumerate() {
        if let Some(column) = inventory.given_vm_text(text) {
            let seed = seed(600 + place);
            gather.add(&mut vms, seed, column, |out| {
                texts(seed, column, &mut hashed, out);
            });
        }
    }
    let on_host = gather.sum_group(vms, last_vms, Some(&on), |vms| {
        let mut on_host: Vec<u64> = vec![0; host_count];
        for (&host, &vm) in on.iter().zip(&vms) {
            if let Some(row) = on_host.get_mut(host as usize) {
                fold(row, vm);
            }
        }
        on_host
    });
    let (rest, vms) = (Arc::clone(&rest_group.sums), Arc::clone(&on_host.sums));
    if let Some(last) = gather.last {
        *last = ColumnShares {
            kept: gather.next,
            reused: gather.reused,
            rest: Some(rest_group),
            vms: Some(on_host),
        };
    }

    let mut sums = rest.to_vec();
    for (_, shares) in &metrics {
        add_shares(&mut sums, shares);
    }
    let numa = inventory.numa_topology();
    let pci = inventory.pci_pools();
    let mdev = inventory.mdev_offers();
    let whole = sums
        .into_iter()
        .zip(vms.iter())
        .enumerate()
        .map(|(host, (sum, &vms))| {
            let hardware = !numa.host_cells(host).is_empty()
                || !pci.host_pools(host).is_empty()
                || !mdev.host_offers(host).is_empty();
            (!hardware).then(|| key().hash_one((sum, vms)))
        })
        .collect();
    RowFingerprints {
        whole,
        rest,
        metrics,
        vms,
    }
}

/// Where each VM's own sum starts.
const VM_MARK: u64 = 0x5650_4d5f_524f_5721;

/// A column of figures' shares: each figure bit for bit, so -0.0 and NaNs
/// count as sent.
fn figures(seed: u64, column: &[f64], out: &mut Vec<u64>) {
    out.extend(column.iter().map(|v| share(seed, v.to_bits())));
}

fn flags(seed: u64, column: &[bool], out: &mut Vec<u64>) {
    out.extend(column.iter().map(|&v| share(seed, u64::from(v))));
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

/// A text column's shares; each distinct text is hashed once (a cluster's
/// few `cpu_info` texts, not one per host).
fn texts<'a>(seed: u64, column: &'a Interned, hashed: &mut Hashed<'a>, out: &mut Vec<u64>) {
    let hashes = hashed.of(column);
    let shares = column.indices.iter();
    out.extend(shares.map(|&at| share(seed, hashes.get(at as usize).copied().unwrap_or(0))));
}

/// A label column's shares: each row's pairs folded after their count.
fn labels(seed: u64, column: &Labels, out: &mut Vec<u64>) {
    let hashes: Vec<u64> = column.strings.iter().map(|s| key().hash_one(s)).collect();
    let hash = |at: u32| hashes.get(at as usize).copied().unwrap_or(0);
    let rows = column.offsets.len().saturating_sub(1);
    out.extend((0..rows).map(|i| {
        let start = column.offsets[i] as usize;
        let end = column.offsets[i + 1] as usize;
        let mut row = share(seed, end.saturating_sub(start) as u64);
        for pair in start..end.min(column.keys.len()).min(column.values.len()) {
            fold(&mut row, hash(column.keys[pair]));
            fold(&mut row, hash(column.values[pair]));
        }
        row
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HostStatus;
    use crate::hardware::NumaTopology;

    fn whole(inventory: &Inventory) -> Vec<Option<u64>> {
        host_fingerprints(inventory).whole().to_vec()
    }

    fn kept_whole(inventory: &Inventory, kept: &mut ColumnShares) -> Vec<Option<u64>> {
        host_fingerprints_kept(inventory, kept).whole().to_vec()
    }

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

    /// A column's name, which part of a row it is, and how to change it.
    type Edit = (String, Part, Box<dyn Fn(&mut Inventory)>);

    /// Which part of its row's fingerprint a column is
    /// ([`RowFingerprints::over`]).
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Part {
        Metric(HostMetric),
        Vms,
        Rest,
    }

    /// Every column a unit can read, changed for host 1 (or its VM) alone.
    fn edits() -> Vec<Edit> {
        let changed = || Interned::from_values(["a", "z", "c"], vec![0, 1, 2]);
        let mut edits: Vec<Edit> = Vec::new();
        for &metric in HostMetric::ALL {
            edits.push((
                format!("{metric:?}"),
                Part::Metric(metric),
                Box::new(move |inv| inv.set_host_metric(metric, vec![1.0, 9.0, 3.0]).unwrap()),
            ));
        }
        edits.push((
            "status".to_owned(),
            Part::Rest,
            Box::new(|inv| {
                let statuses = vec![HostStatus::Up, HostStatus::Maintenance, HostStatus::Up];
                inv.set_host_statuses(statuses).unwrap()
            }),
        ));
        for &flag in HostFlag::ALL {
            edits.push((
                format!("{flag:?}"),
                Part::Rest,
                Box::new(move |inv| inv.set_host_flag(flag, vec![false, true, false]).unwrap()),
            ));
        }
        for &text in HostText::ALL {
            edits.push((
                format!("{text:?}"),
                Part::Rest,
                Box::new(move |inv| inv.set_host_text(text, changed()).unwrap()),
            ));
        }
        for &kind in HostLabels::ALL {
            edits.push((
                format!("{kind:?}"),
                Part::Rest,
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
            Part::Rest,
            Box::new(|inv| {
                inv.set_host_named_metric("n", vec![1.0, f64::NAN, 3.0])
                    .unwrap()
            }),
        ));
        for &metric in VmMetric::ALL {
            edits.push((
                format!("{metric:?}"),
                Part::Vms,
                Box::new(move |inv| inv.set_vm_metric(metric, vec![1.0, 9.0, 3.0]).unwrap()),
            ));
        }
        for &flag in VmFlag::ALL {
            edits.push((
                format!("{flag:?}"),
                Part::Vms,
                Box::new(move |inv| inv.set_vm_flag(flag, vec![false, true, false]).unwrap()),
            ));
        }
        for &text in VmText::ALL {
            edits.push((
                format!("{text:?}"),
                Part::Vms,
                Box::new(move |inv| inv.set_vm_text(text, changed()).unwrap()),
            ));
        }
        edits
    }

    #[test]
    fn a_host_is_known_unchanged_only_while_nothing_it_holds_changes() {
        let before = whole(&inventory(&|_| {}));
        assert!(before.iter().all(Option::is_some));
        assert_eq!(before, whole(&inventory(&|_| {})), "built again");
        for (column, _, edit) in edits() {
            let after = whole(&inventory(edit.as_ref()));
            assert_ne!(before[1], after[1], "{column} changed on host 1");
            assert_eq!(
                (before[0], before[2]),
                (after[0], after[2]),
                "{column} unchanged on hosts 0 and 2"
            );
        }
    }

    #[test]
    fn shares_kept_for_shared_columns_give_what_hashing_whole_gives() {
        let mut kept = ColumnShares::default();
        let first = inventory(&|_| {});
        let whole_first = whole(&first);
        assert_eq!(kept_whole(&first, &mut kept), whole_first);
        assert_eq!(kept.reused(), 0);
        let columns = kept.kept();
        assert_eq!(
            kept_whole(&first.share(), &mut kept),
            whole_first,
            "every column shared"
        );
        assert_eq!(kept.reused(), columns);
        // One column replaced on a share: only it is hashed again.
        for (column, _, edit) in edits() {
            let mut changed = first.share();
            edit(&mut changed);
            let fingerprints = kept_whole(&changed, &mut kept);
            assert_eq!(fingerprints, whole(&changed), "{column}");
            assert_ne!(fingerprints[1], whole_first[1], "{column}");
            assert_eq!(kept.reused(), columns - 1, "{column}");
            assert_eq!(kept_whole(&first, &mut kept), whole_first, "{column} back");
            assert_eq!(kept.reused(), columns - 1, "{column} back");
        }
        // Every column shared, but a VM moved: the VMs' sums folded anew.
        let mut moved = first.share();
        moved.set_vm_hosts(vec![0, 2, 2]).unwrap();
        let fingerprints = kept_whole(&moved, &mut kept);
        assert_eq!(fingerprints, whole(&moved), "a VM moved");
        assert_ne!(fingerprints, whole_first, "a VM moved");
        assert_eq!(kept_whole(&first, &mut kept), whole_first, "moved back");
    }

    /// A row fingerprinted over some of its columns changes exactly when
    /// one of those columns changes, or a host column no call's record
    /// names; over all of them it is the whole fingerprint. Shares kept
    /// from the body before give the same.
    #[test]
    fn a_row_over_the_columns_read_changes_only_with_them() {
        let first = inventory(&|_| {});
        let before = host_fingerprints(&first);
        for host in 0..3 {
            let whole = before.over(host, |_| true, true);
            assert_eq!(whole, before.whole()[host], "host {host}");
        }
        // What a call may have read: no metric, with or without the VMs,
        // or one metric.
        let reads: Vec<(Option<HostMetric>, bool)> = [(None, false), (None, true)]
            .into_iter()
            .chain(HostMetric::ALL.iter().map(|&m| (Some(m), false)))
            .collect();
        for (column, part, edit) in edits() {
            let mut changed = first.share();
            edit(&mut changed);
            let after = host_fingerprints(&changed);
            let mut kept = ColumnShares::default();
            host_fingerprints_kept(&first, &mut kept);
            let after_kept = host_fingerprints_kept(&changed, &mut kept);
            for &(metric, vms) in &reads {
                let read = |m: HostMetric| Some(m) == metric;
                let seen = match part {
                    Part::Metric(m) => Some(m) == metric,
                    Part::Vms => vms,
                    Part::Rest => true,
                };
                let what = format!("{column} over {metric:?}, VMs {vms}");
                let (was, is) = (before.over(1, read, vms), after.over(1, read, vms));
                assert_eq!(was != is, seen, "{what}");
                assert_eq!(after_kept.over(1, read, vms), is, "{what}: kept");
                let others = |f: &RowFingerprints| (f.over(0, read, vms), f.over(2, read, vms));
                assert_eq!(others(&before), others(&after), "{what}: hosts 0 and 2");
            }
        }
    }

    #[test]
    fn a_vm_moving_changes_both_hosts_and_hardware_is_never_fingerprinted() {
        let before = whole(&inventory(&|_| {}));
        let moved = whole(&inventory(&|inv| inv.set_vm_hosts(vec![0, 2, 2]).unwrap()));
        assert_eq!(before[0], moved[0]);
        assert_ne!(before[1], moved[1]);
        assert_ne!(before[2], moved[2]);

        let with_cell = whole(&inventory(&|inv| {
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
