//! `HeadroomAffinityRust`: the example unit every supported language
//! implements identically (see `policies/examples/README.md`), written with
//! the Rust SDK.
//!
//! * filter: rejects a host whose free memory minus the VM's memory is below
//!   `HeadroomMib` (and, with its own reason, a host that cannot hold the VM
//!   at all);
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
        let needed = cx.vm().memory_mib;
        let too_tight = format!("would leave less than {headroom} MiB free");
        for host in cx.hosts().candidates(candidates) {
            let free = host.memory_free_mib();
            if free < needed {
                rejections.reject(host.index(), "not enough free memory for the VM");
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
