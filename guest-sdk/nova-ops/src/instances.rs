//! `SameHostFilter` and `DifferentHostFilter`, written once: which hosts
//! run any of the instances a hint lists.
//!
//! Nova's `utils.instance_uuids_overlap` intersects a host's instance ids
//! with the hint's list. Here the running VMs' `id` column (interned) and
//! host column answer it in one pass over the VMs: each distinct id is
//! looked up once, then each VM marks its host.

use sandpiper_guest::collections::HashSet;

use sandpiper_guest::prelude::*;

use crate::hints::Hint;

/// What the listed instances mean for a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// The host must run at least one (`same_host`).
    AnyOf,
    /// The host must run none (`different_host`).
    NoneOf,
}

/// Which hosts run at least one of `ids`, one flag per host.
pub fn hosts_running(cx: &Context<'_>, ids: &HashSet<&str>) -> Vec<bool> {
    let vms = cx.vms();
    let texts = vms.texts(VmText::Id);
    let listed: Vec<bool> = texts.values().map(|id| ids.contains(id)).collect();
    let mut running = vec![false; cx.hosts().len()];
    for (&index, &host) in texts.indices.iter().zip(vms.hosts()) {
        if listed.get(index as usize).copied().unwrap_or(false)
            && let Some(flag) = running.get_mut(host as usize)
        {
            *flag = true;
        }
    }
    running
}

/// Runs the filter for the hint `key` over `candidates`.
pub fn filter(cx: &Context<'_>, candidates: &[u32], key: &str, wanted: Wanted) -> Vec<Rejection> {
    let mut rejections = Rejections::new();
    let hint = Hint::of(&cx.request().hints, key);
    // Nova's `if affinity_uuids:`.
    if !hint.is_set() {
        return rejections.into_vec();
    }
    let ids: HashSet<&str> = hint.values().into_iter().collect();
    let running = hosts_running(cx, &ids);
    let reason = match wanted {
        Wanted::AnyOf => format!("runs none of the instances in `{key}`"),
        Wanted::NoneOf => format!("runs an instance listed in `{key}`"),
    };
    for &host in candidates {
        let runs = running.get(host as usize).copied().unwrap_or(false);
        if runs != (wanted == Wanted::AnyOf) {
            rejections.reject(host, &reason);
        }
    }
    rejections.into_vec()
}
