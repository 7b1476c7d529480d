//! `LegacyFreeMemory`, a unit built against `sandpiper:policy@0.1.0`
//! (`wit/0.1.0/policy.wit`) with wit-bindgen directly: the SDK follows the
//! current WIT, and this unit must stay what a 0.1.0 unit uploaded before
//! 0.2.0 existed is, whatever the SDK becomes. It reads a numeric column,
//! an interned string column (0.1.0 sends those as `list<string>`), the
//! VM and its parameters, and both filters and scores:
//!
//! * filter: rejects hosts whose free memory, less `ReserveMib`, cannot
//!   hold the VM, and hosts whose name starts with `draining-`;
//! * score: the free memory left after placing the VM, higher is better.
//!
//! The logic is plain functions over slices, run by the component's
//! exports and, natively, by `native_unit()`: the answers the unit gives
//! are the same both ways, so a test can compare them.

/// The unit's name.
pub const NAME: &str = "LegacyFreeMemory";
/// The parameter: memory kept free on every host, MiB.
pub const RESERVE_MIB: &str = "ReserveMib";
/// Hosts whose name starts with this are rejected.
pub const DRAINING_PREFIX: &str = "draining-";

/// The reserve from the call's parameters: the declared default when
/// absent, 0 when unreadable (the host checked it against the pattern).
fn reserve<'a>(mut params: impl Iterator<Item = (&'a str, &'a str)>) -> f64 {
    params
        .find(|(key, _)| *key == RESERVE_MIB)
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0.0)
}

/// The rejected candidates grouped by reason, in first-seen order.
fn reject(
    free: &[f64],
    name: impl Fn(usize) -> String,
    need: f64,
    reserve: f64,
    candidates: &[u32],
) -> Vec<(String, Vec<u32>)> {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for &host in candidates {
        let h = host as usize;
        let reason = if name(h).starts_with(DRAINING_PREFIX) {
            "draining".to_owned()
        } else if free.get(h).copied().unwrap_or(0.0) - reserve < need {
            format!("needs {need} MiB above a {reserve} MiB reserve")
        } else {
            continue;
        };
        match groups.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, hosts)) => hosts.push(host),
            None => groups.push((reason, vec![host])),
        }
    }
    groups
}

/// Free memory left after placing the VM, per candidate.
fn score(free: &[f64], need: f64, candidates: &[u32]) -> Vec<f64> {
    candidates
        .iter()
        .map(|&h| free.get(h as usize).copied().unwrap_or(0.0) - need)
        .collect()
}

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../../wit/0.1.0",
        world: "filter-score-unit",
    });

    use exports::sandpiper::policy::{filter, metadata, score};
    use sandpiper::policy::{inventory, types};

    struct Legacy;

    fn reserve(request: &types::Request) -> f64 {
        super::reserve(
            request
                .params
                .iter()
                .map(|kv| (kv.key.as_str(), kv.value.as_str())),
        )
    }

    impl metadata::Guest for Legacy {
        fn info() -> types::UnitInfo {
            types::UnitInfo {
                name: super::NAME.to_owned(),
                description: "A 0.1.0 test unit: free memory above a reserve.".to_owned(),
                params: vec![types::ParamSpec {
                    name: super::RESERVE_MIB.to_owned(),
                    description: "Memory kept free on every host, MiB.".to_owned(),
                    default_value: "0".to_owned(),
                    pattern: r"\d+".to_owned(),
                }],
                score_order: types::ScoreOrder::HigherIsBetter,
            }
        }
    }

    impl filter::Guest for Legacy {
        fn filter(request: types::Request, candidates: Vec<u32>) -> Vec<types::Rejection> {
            let free = inventory::host_metrics(types::HostMetric::MemoryFreeMib);
            let names = inventory::host_texts(types::HostText::Name);
            let name = |h: usize| {
                names
                    .indices
                    .get(h)
                    .and_then(|&i| names.values.get(i as usize))
                    .cloned()
                    .unwrap_or_default()
            };
            super::reject(
                &free,
                name,
                request.vm.memory_mib,
                reserve(&request),
                &candidates,
            )
            .into_iter()
            .map(|(reason, hosts)| types::Rejection { reason, hosts })
            .collect()
        }
    }

    impl score::Guest for Legacy {
        fn score(request: types::Request, candidates: Vec<u32>) -> types::Scores {
            let free = inventory::host_metrics(types::HostMetric::MemoryFreeMib);
            types::Scores {
                values: super::score(&free, request.vm.memory_mib, &candidates),
                floor: None,
                ceiling: None,
            }
        }
    }

    export!(Legacy);
}

/// This unit run natively, with the same logic and info.
#[cfg(not(target_arch = "wasm32"))]
pub fn native_unit() -> sandpiper_guest::native::NativeUnit {
    use sandpiper_guest::Inventory;
    use sandpiper_model::{
        HostMetric, HostText, ParamSpec, Rejection, Request, ScoreOrder, Scores, UnitInfo,
    };

    fn params(request: &Request) -> impl Iterator<Item = (&str, &str)> {
        request
            .params
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.as_str()))
    }

    fn filter(inventory: &Inventory, request: &Request, candidates: &[u32]) -> Vec<Rejection> {
        let names = inventory.host_text(HostText::Name);
        reject(
            inventory.host_metric(HostMetric::MemoryFreeMib),
            |h| names.get(h).to_owned(),
            request.vm.memory_mib,
            reserve(params(request)),
            candidates,
        )
        .into_iter()
        .map(|(reason, hosts)| Rejection::new(reason, hosts))
        .collect()
    }

    fn scores(inventory: &Inventory, request: &Request, candidates: &[u32]) -> Scores {
        Scores::new(score(
            inventory.host_metric(HostMetric::MemoryFreeMib),
            request.vm.memory_mib,
            candidates,
        ))
    }

    sandpiper_guest::native::NativeUnit {
        info: UnitInfo::new(NAME, "A 0.1.0 test unit: free memory above a reserve.")
            .with_param(ParamSpec::new(
                RESERVE_MIB,
                "Memory kept free on every host, MiB.",
                "0",
                r"\d+",
            ))
            .with_score_order(ScoreOrder::HigherIsBetter),
        filter: Some(filter),
        score: Some(scores),
        balance: None,
    }
}
