//! `HeadroomAffinityRust`: the example unit every supported language
//! implements identically (see `policies/examples/README.md`), written with
//! the Rust SDK.
//!
//! * filter: rejects a host that lacks a CPU flag the VM requires, or has
//!   fewer NUMA cells than the VM asks for, or whose free memory minus the
//!   VM's memory is below `HeadroomMib` (and, with its own reason, a host
//!   that cannot hold the VM at all);
//! * score: prefers hosts whose capability `LabelKey` equals the VM's extra
//!   spec of the same key (1 for a match, else 0; higher is better).

use sandpiper_guest::prelude::*;

/// Parameter: memory (MiB) that must stay free on a host after placing the VM.
pub const HEADROOM_MIB: &str = "HeadroomMib";
/// Parameter: the host capability compared with the VM's extra spec.
pub const LABEL_KEY: &str = "LabelKey";

/// The example unit.
pub struct HeadroomAffinity;

impl Unit for HeadroomAffinity {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "HeadroomAffinityRust",
            "Keeps HeadroomMib of memory free on the chosen host and prefers hosts whose \
             capability LabelKey matches the VM's extra spec LabelKey.",
        )
        .with_param(ParamSpec::new(
            HEADROOM_MIB,
            "Memory (MiB) that must stay free on a host after placing the VM.",
            "512",
            // Nine digits at most: every language reads it exactly.
            "^[0-9]{1,9}$",
        ))
        .with_param(ParamSpec::new(
            LABEL_KEY,
            "Host capability compared with the VM's extra spec of the same key.",
            "rack",
            "^[A-Za-z0-9_.:/-]{1,64}$",
        ))
        .with_score_order(ScoreOrder::HigherIsBetter)
        // A host's verdict and score read only that host.
        .per_host()
    }
}

impl Filter for HeadroomAffinity {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let headroom = match cx.params().u32(HEADROOM_MIB) {
            Ok(headroom) => headroom,
            Err(error) => {
                // A misconfigured unit fails closed, and says why.
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let vm = cx.vm();
        let needed = vm.memory_mib;
        let cells_wanted = vm.hardware.numa_cells.len();
        let too_tight = format!("would leave less than {headroom} MiB free");
        for host in cx.hosts().candidates(candidates) {
            let free = host.memory_free_mib();
            let missing_flag = vm.hardware.required_cpu_flags.iter().find(|wanted| {
                !host
                    .keys(HostLabels::CpuFlags)
                    .any(|flag| flag == wanted.as_str())
            });
            let cells = match cells_wanted {
                0 => 0,
                _ => cx
                    .inventory()
                    .numa_topology()
                    .host_cells(host.index() as usize)
                    .len(),
            };
            if let Some(flag) = missing_flag {
                rejections.reject(host.index(), format!("lacks CPU flag {flag}"));
            } else if cells < cells_wanted {
                rejections.reject_with(
                    host.index(),
                    "has {} NUMA cells, the VM needs {}",
                    &[cells as f64, cells_wanted as f64],
                );
            } else if free < needed {
                rejections.reject_with(host.index(), "needs {} MiB, {} MiB free", &[needed, free]);
            } else if free - needed < f64::from(headroom) {
                rejections.reject(host.index(), &too_tight);
            }
        }
        rejections.into_vec()
    }
}

impl Score for HeadroomAffinity {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let key = cx.params().str(LABEL_KEY).unwrap_or_default();
        let wanted = cx
            .vm()
            .extra_specs
            .iter()
            .find(|spec| spec.key == key)
            .map(|spec| spec.value.as_str());
        let values = cx
            .hosts()
            .candidates(candidates)
            .map(|host| match wanted {
                Some(wanted) if host.capability(key) == Some(wanted) => 1.0,
                _ => 0.0,
            })
            .collect();
        Scores::new(values)
    }
}

sandpiper_guest::export_unit!(HeadroomAffinity: filter, score);
