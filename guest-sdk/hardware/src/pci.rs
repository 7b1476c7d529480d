//! PCI requests against a host's device pools: Nova's
//! `PciDeviceStats.support_requests` (nova/pci/stats.py: `_filter_pools`
//! by spec, by NUMA affinity, without unrequested physical functions, then
//! consuming pools in order) with `pci_device_prop_match`
//! (nova/pci/utils.py) for specs.

use sandpiper_model::hardware::NONE;
use sandpiper_model::inventory::Fetch;
use sandpiper_model::{DeviceKind, Inventory, PciNumaPolicy, PciRequest};

use crate::{PciStage, PciTake, Unfit};

/// A key of a PCI request spec, resolved once per request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PciSpecKey {
    VendorId,
    ProductId,
    /// `dev_type`: Nova's `type-PCI`, `type-PF`, `type-VF` (or the WIT's
    /// kind names); `None` for a type no pool has (`vdpa`).
    DevType(Option<DeviceKind>),
    Address,
    /// The pool's NUMA node number.
    NumaNode,
    /// Any other key: a pool tag (`device-pool-labels`), e.g.
    /// `physical_network`.
    Tag(String),
}

/// A PCI request, normalised: specs with resolved keys and lower-cased
/// values (Nova compares strings case-insensitively).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PciWant {
    pub alias: String,
    pub count: u32,
    /// Alternatives: a pool matches when it matches every pair of one.
    pub specs: Vec<Vec<(PciSpecKey, String)>>,
    pub numa_policy: PciNumaPolicy,
    /// Some spec asks for `dev_type` physical function; otherwise pools
    /// of physical functions are left out.
    pub wants_pf: bool,
}

impl PciWant {
    /// Resolves `request`'s specs. Keys Nova ignores in matching
    /// (`resource_class`, `traits`, `rp_uuids`) are dropped.
    pub fn from_request(request: &PciRequest) -> PciWant {
        let specs: Vec<Vec<(PciSpecKey, String)>> = request
            .specs
            .iter()
            .map(|spec| {
                spec.iter()
                    .filter(|kv| {
                        !matches!(kv.key.as_str(), "resource_class" | "traits" | "rp_uuids")
                    })
                    .map(|kv| {
                        let value = kv.value.to_lowercase();
                        let key = match kv.key.as_str() {
                            "vendor_id" => PciSpecKey::VendorId,
                            "product_id" => PciSpecKey::ProductId,
                            "address" => PciSpecKey::Address,
                            "numa_node" => PciSpecKey::NumaNode,
                            "dev_type" => PciSpecKey::DevType(match value.as_str() {
                                "type-pci" | "pci" => Some(DeviceKind::Pci),
                                "type-pf" | "physical-function" | "physical_function" => {
                                    Some(DeviceKind::PhysicalFunction)
                                }
                                "type-vf" | "virtual-function" | "virtual_function" => {
                                    Some(DeviceKind::VirtualFunction)
                                }
                                _ => None,
                            }),
                            other => PciSpecKey::Tag(other.to_owned()),
                        };
                        (key, value)
                    })
                    .collect()
            })
            .collect();
        let wants_pf = specs.iter().any(|spec| {
            spec.iter()
                .any(|(k, _)| *k == PciSpecKey::DevType(Some(DeviceKind::PhysicalFunction)))
        });
        PciWant {
            alias: request.alias.clone(),
            count: request.count,
            specs,
            numa_policy: request.numa_policy,
            wants_pf,
        }
    }
}

/// Reused buffers for PCI fitting.
#[derive(Default)]
pub(crate) struct PciScratch {
    /// Free devices per pool of the host, as consumed so far.
    free: Vec<u32>,
    /// Candidate pools (host-local indices) of the request at hand.
    candidates: Vec<u32>,
    narrowed: Vec<u32>,
    /// Per (request, pool of the host): the pool matches the request's
    /// specs; computed once per host (a NUMA fit checks the requests for
    /// every placement of the guest cells).
    matched: Vec<bool>,
    /// The host `matched` is for.
    matched_host: Option<usize>,
}

impl PciScratch {
    /// Forgets the previous host's matches.
    pub(crate) fn new_host(&mut self) {
        self.matched_host = None;
    }
}

fn eq_text(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// Whether pool `p` (cluster-wide) matches one of `want`'s specs.
fn matches<F: Fetch>(inv: &Inventory<F>, p: usize, want: &PciWant) -> bool {
    if want.specs.is_empty() {
        return true;
    }
    let pools = inv.pci_pools();
    want.specs.iter().any(|spec| {
        spec.iter().all(|(key, value)| match key {
            PciSpecKey::VendorId => eq_text(
                pools.text(pools.vendors.get(p).copied().unwrap_or(NONE)),
                value,
            ),
            PciSpecKey::ProductId => eq_text(
                pools.text(pools.products.get(p).copied().unwrap_or(NONE)),
                value,
            ),
            PciSpecKey::Address => eq_text(
                pools.text(pools.addresses.get(p).copied().unwrap_or(NONE)),
                value,
            ),
            PciSpecKey::DevType(kind) => kind.is_some() && pools.kinds.get(p) == kind.as_ref(),
            PciSpecKey::NumaNode => {
                let cell = pools.cells.get(p).copied().unwrap_or(NONE);
                cell != NONE
                    && inv
                        .numa_topology()
                        .node_ids
                        .get(cell as usize)
                        .is_some_and(|n| n.to_string() == *value)
            }
            PciSpecKey::Tag(tag) => inv
                .pci_pool_labels()
                .row(p)
                .any(|(k, v)| k == tag && eq_text(v, value)),
        })
    })
}

/// Checks `wants` in order against host `host`'s pools, consuming as it
/// goes; with `cells` (the host cells, cluster-wide, chosen for the guest
/// cells), with Nova's NUMA affinity per request policy. Appends what it
/// takes to `out` (left partial on failure; the caller clears it).
pub(crate) fn fit<F: Fetch>(
    inv: &Inventory<F>,
    host: usize,
    wants: &[PciWant],
    cells: Option<&[u32]>,
    scratch: &mut PciScratch,
    out: &mut Vec<PciTake>,
) -> Result<(), Unfit> {
    let pools = inv.pci_pools();
    let range = pools.host_pools(host);
    let base = range.start;
    scratch.free.clear();
    scratch.free.extend(
        range
            .clone()
            .map(|p| pools.free.get(p).copied().unwrap_or(0)),
    );
    let n = range.len();
    // Without cells the requests are checked once: no memo.
    let memo = cells.is_some();
    if memo && scratch.matched_host != Some(host) {
        scratch.matched.clear();
        for want in wants {
            for local in 0..n {
                scratch.matched.push(matches(inv, base + local, want));
            }
        }
        scratch.matched_host = Some(host);
    }
    let cell_of = |local: u32| {
        pools
            .cells
            .get(base + local as usize)
            .copied()
            .unwrap_or(NONE)
    };
    for (index, want) in wants.iter().enumerate() {
        let fail = |stage, available| Unfit::Pci {
            request: index as u32,
            stage,
            wanted: want.count,
            available,
        };
        let free = &scratch.free;
        let sum = |list: &[u32]| list.iter().map(|&l| free[l as usize]).sum::<u32>();
        scratch.candidates.clear();
        for (local, &left) in free.iter().enumerate() {
            let fits = left > 0
                && if memo {
                    scratch.matched[index * n + local]
                } else {
                    matches(inv, base + local, want)
                };
            if fits {
                scratch.candidates.push(local as u32);
            }
        }
        let matching = sum(&scratch.candidates);
        if matching < want.count {
            return Err(fail(PciStage::Spec, matching));
        }
        if let Some(cells) = cells
            && !cells.is_empty()
        {
            let in_cells = |l: &u32| cells.contains(&cell_of(*l));
            scratch.narrowed.clear();
            scratch
                .narrowed
                .extend(scratch.candidates.iter().copied().filter(in_cells));
            let strict = sum(&scratch.narrowed);
            let policy = want.numa_policy;
            if policy == PciNumaPolicy::Required || strict >= want.count {
                std::mem::swap(&mut scratch.candidates, &mut scratch.narrowed);
            } else if policy == PciNumaPolicy::Socket {
                let topology = inv.numa_topology();
                let host_cells = topology.host_cells(host);
                let socket = |c: usize| topology.sockets.get(c).copied().unwrap_or(NONE);
                scratch.narrowed.clear();
                if host_cells.clone().all(|c| socket(c) != NONE) {
                    let allowed = |l: &u32| {
                        let cell = cell_of(*l);
                        cell != NONE
                            && host_cells.contains(&(cell as usize))
                            && cells
                                .iter()
                                .any(|&c| socket(c as usize) == socket(cell as usize))
                    };
                    scratch
                        .narrowed
                        .extend(scratch.candidates.iter().copied().filter(allowed));
                }
                std::mem::swap(&mut scratch.candidates, &mut scratch.narrowed);
            } else {
                let legacy = |l: &u32| {
                    let cell = cell_of(*l);
                    cell == NONE || cells.contains(&cell)
                };
                scratch.narrowed.clear();
                scratch
                    .narrowed
                    .extend(scratch.candidates.iter().copied().filter(legacy));
                let loose = sum(&scratch.narrowed);
                if policy == PciNumaPolicy::Legacy || loose >= want.count {
                    std::mem::swap(&mut scratch.candidates, &mut scratch.narrowed);
                } else {
                    // Preferred: every pool, those with affinity first.
                    scratch.candidates.sort_by_key(|l| !legacy(l));
                }
            }
            let affine = sum(&scratch.candidates);
            if affine < want.count {
                return Err(fail(PciStage::Affinity, affine));
            }
        }
        if !want.wants_pf {
            scratch.candidates.retain(|&l| {
                pools.kinds.get(base + l as usize) != Some(&DeviceKind::PhysicalFunction)
            });
            let left = sum(&scratch.candidates);
            if left < want.count {
                return Err(fail(PciStage::PhysicalFunctions, left));
            }
        }
        // Consume, in order.
        let mut remaining = want.count;
        for i in 0..scratch.candidates.len() {
            if remaining == 0 {
                break;
            }
            let local = scratch.candidates[i] as usize;
            let take = scratch.free[local].min(remaining);
            if take == 0 {
                continue;
            }
            remaining -= take;
            scratch.free[local] -= take;
            let pool = base + local;
            out.push(PciTake {
                request: index as u32,
                pool: pool as u32,
                count: take,
            });
            // Dependents: a physical function taken uses up its virtual
            // functions; a virtual function taken, its physical function.
            match pools.kinds.get(pool) {
                Some(DeviceKind::PhysicalFunction) => {
                    for other in 0..scratch.free.len() {
                        if pools.parents.get(base + other).copied() == Some(pool as u32) {
                            scratch.free[other] = 0;
                        }
                    }
                }
                Some(DeviceKind::VirtualFunction) => {
                    let parent = pools.parents.get(pool).copied().unwrap_or(NONE);
                    if parent != NONE && range.contains(&(parent as usize)) {
                        scratch.free[parent as usize - base] = 0;
                    }
                }
                _ => {}
            }
        }
        if remaining > 0 {
            // Only when dependents emptied a pool mid-request.
            return Err(fail(PciStage::Spec, want.count - remaining));
        }
    }
    Ok(())
}
