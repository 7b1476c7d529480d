//! `MDevice`: rejects hosts without free mediated devices (vGPUs) of the
//! types the VM needs.
//!
//! Behaviour from oVirt's `MDevicePolicyUnit` (reference notes §2.1), one
//! of oVirt's mandatory filters: a VM needing no mediated device passes
//! every host; otherwise a host offering none of a needed type is rejected
//! ("missing"), and one whose devices of that type have no instance left
//! is rejected ("unavailable"), naming the types.
//!
//! Differs: oVirt asks only for one free instance per type however many
//! the VM needs; here a type listed `n` times (the WIT repeats a type once
//! per instance) needs `n` free instances over the host's devices of that
//! type, so two vGPUs of one profile are not placed where one is left.
//!
//! Data: `mdev-types` (offers with free instances); VM hardware
//! `mdev_types`.

use std::collections::BTreeMap;

use sandpiper_guest::prelude::*;

/// The `MDevice` filter.
pub struct MDevice;

impl Unit for MDevice {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "MDevice",
            "Rejects hosts that offer no mediated device (vGPU) of a type the VM needs, or \
             too few free instances of it.",
        )
        .applies_to([RequestProperty::MdevTypes])
        .per_host()
    }
}

impl Filter for MDevice {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        // Type → instances needed, in name order.
        let mut needed: BTreeMap<&str, u32> = BTreeMap::new();
        for name in &cx.vm().hardware.mdev_types {
            *needed.entry(name.trim()).or_insert(0) += 1;
        }
        if needed.is_empty() {
            return rejections.into_vec();
        }
        let needed: Vec<(&str, u32)> = needed.into_iter().collect();
        let offers = cx.inventory().mdev_offers();
        // Per string id of the offers: the needed type it names, if any
        // (an id outside the table names "").
        let names_needed = |name: &str| needed.iter().position(|&(n, _)| n == name);
        let by_id: Vec<Option<usize>> = offers.strings.iter().map(|s| names_needed(s)).collect();
        let unnamed = names_needed("");
        // Sentences per set of missing types, templates per set of short
        // ones (their free instances are the figures).
        let mut missing_sentences: Sentences<Vec<usize>> = Sentences::new();
        let mut short_templates: Sentences<Vec<usize>> = Sentences::new();
        // Per needed type: the free instances the host offers, if any.
        let mut offered: Vec<Option<u32>> = Vec::new();
        let (mut missing, mut short, mut figures) = (Vec::new(), Vec::new(), Vec::new());
        for &host in candidates {
            offered.clear();
            offered.resize(needed.len(), None);
            for entry in offers.host_offers(host as usize) {
                let at = offers
                    .names
                    .get(entry)
                    .and_then(|&id| by_id.get(id as usize))
                    .map_or(unnamed, |&at| at);
                if let Some(total) = at.and_then(|at| offered.get_mut(at)) {
                    let free = offers.free.get(entry).copied().unwrap_or(0);
                    *total = Some(total.unwrap_or(0).saturating_add(free));
                }
            }
            missing.clear();
            missing.extend((0..needed.len()).filter(|&i| offered[i].is_none()));
            if !missing.is_empty() {
                let reason = missing_sentences.get(&missing[..], || {
                    let names: Vec<&str> = missing.iter().map(|&i| needed[i].0).collect();
                    format!("has no mediated device of type {}", names.join(", "))
                });
                rejections.reject(host, reason);
                continue;
            }
            short.clear();
            figures.clear();
            for (i, &(_, want)) in needed.iter().enumerate() {
                let free = offered[i].unwrap_or(0);
                if free < want {
                    short.push(i);
                    figures.push(f64::from(free));
                }
            }
            if !short.is_empty() {
                let template = short_templates.get(&short[..], || {
                    let parts: Vec<String> = short
                        .iter()
                        .map(|&i| {
                            let (name, want) = needed[i];
                            let name = name.replace('{', "{{").replace('}', "}}");
                            format!("{name} (needs {want}, {{}} free)")
                        })
                        .collect();
                    format!(
                        "too few free mediated device instances: {}",
                        parts.join(", ")
                    )
                });
                rejections.reject_with(host, template, &figures);
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(MDevice: filter);
