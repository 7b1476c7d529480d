//! `HugePages`: rejects hosts without enough free huge pages of the VM's
//! page size.
//!
//! Behaviour from oVirt's `HugePagesFilterPolicyUnit` (reference notes
//! §2.1): a VM not backed by huge pages passes every host; otherwise the
//! host needs `ceil(memory KiB / page KiB)` free pages of exactly the VM's
//! size (`HugePageUtils.getHugePages`), free meaning after pending
//! placements. Pages of other sizes do not count. The host the VM runs on
//! already holds its pages and is never rejected.
//!
//! Encodings: oVirt's `hugepages` custom property (a size in KiB) is the
//! VM's `page_size` `kib(n)`; a host's free pages of a size are the sum
//! over its NUMA cells (oVirt reads host-wide totals).
//!
//! Differs: oVirt knows only exact sizes. `large` (any huge size) needs
//! enough free pages of one size larger than the host's smallest; `small`
//! and `any` need no huge pages, so they pass every host.
//!
//! Data: `numa-cell-pages`; VM `memory-mib`, hardware `page_size`,
//! `current-host`.

use sandpiper_guest::float;
use sandpiper_guest::model::hardware::PageSize;
use sandpiper_guest::prelude::*;

/// The small page size when a host reports none, KiB.
const SMALL_PAGE_KIB: u32 = 4;

/// The `HugePages` filter.
pub struct HugePages;

impl Unit for HugePages {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "HugePages",
            "Rejects hosts without enough free huge pages of the VM's page size for all its \
             memory.",
        )
        .applies_to([RequestProperty::PageSize])
        .per_host()
    }
}

/// Pages of `size_kib` that `memory_mib` needs, rounded up.
fn pages_for(memory_mib: f64, size_kib: u32) -> f64 {
    (memory_mib * 1024.0 / f64::from(size_kib)).ceil()
}

impl Filter for HugePages {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let vm = cx.vm();
        let page_size = vm.hardware.page_size;
        let exact = match page_size {
            PageSize::Kib(size) if size > 0 => Some(size),
            PageSize::Large => None,
            _ => return rejections.into_vec(),
        };
        let inventory = cx.inventory();
        let topology = inventory.numa_topology();
        let pages = inventory.cell_pages();
        // The sentences are the request's; only the pages a host has vary.
        let short = exact.map(|size| {
            let need = pages_for(vm.memory_mib, size);
            (
                size,
                need,
                format!("needs {need} free huge pages of {size} KiB, has {{}}"),
            )
        });
        let no_size = rejections.reason(format!(
            "has no huge page size with enough free pages for the VM's {} MiB",
            vm.memory_mib
        ));
        // Free pages per size over a host's cells, sizes in the order
        // listed (a host has two or three).
        let mut free: Vec<(u32, f64)> = Vec::new();
        for &host in candidates {
            if vm.current_host == Some(host) {
                continue;
            }
            free.clear();
            for cell in topology.host_cells(host as usize) {
                for entry in pages.cell(cell) {
                    let (Some(&size), Some(&count)) =
                        (pages.size_kib.get(entry), pages.free.get(entry))
                    else {
                        continue;
                    };
                    let count = float::max(count, 0.0);
                    match free.iter_mut().find(|(s, _)| *s == size) {
                        Some((_, total)) => *total += count,
                        None => free.push((size, count)),
                    }
                }
            }
            match &short {
                Some((size, need, template)) => {
                    let have = free
                        .iter()
                        .find(|(s, _)| s == size)
                        .map_or(0.0, |&(_, have)| have);
                    if have < *need {
                        rejections.reject_with(host, template, &[have]);
                    }
                }
                None => {
                    let smallest = free
                        .iter()
                        .map(|&(size, _)| size)
                        .min()
                        .unwrap_or(SMALL_PAGE_KIB);
                    let fits = free.iter().any(|&(size, have)| {
                        size > smallest && have >= pages_for(vm.memory_mib, size)
                    });
                    if !fits {
                        rejections.reject_for(host, no_size);
                    }
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(HugePages: filter);
