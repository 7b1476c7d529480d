//! `Migration`: when a running VM moves, rejects destinations that are the
//! source machine under another name.
//!
//! Behaviour from oVirt's `MigrationPolicyUnit` (reference notes §2.1). For
//! a VM that is running (a migration or a balancing move):
//! * the host it runs on is **kept** ("not filtered out for balancing
//!   purposes": the engine lets "stay" win a balancing round);
//! * any other host whose address is a loopback address, or equals the
//!   source's address, is rejected: migrating there would migrate to
//!   itself.
//!
//! A VM that is not running (a start) is not constrained.
//!
//! Data: the `address` column and the VM's `current-host`.
//!
//! Where we differ from oVirt: oVirt resolves both host names through DNS
//! and compares the resolved addresses; a unit has no network, so we
//! compare the addresses as reported, ignoring ASCII case (host names are
//! case-insensitive), and recognise loopback by its literal forms
//! (`localhost`, `127.0.0.0/8`, `::1`). A host with no address is kept, as
//! oVirt keeps one whose name does not resolve ("no clues, better to not
//! guess").

use sandpiper_guest::prelude::*;

/// The `Migration` filter.
pub struct MigrationFilter;

impl Unit for MigrationFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "Migration",
            "For a running VM, keeps its current host and rejects other hosts with the same or \
             a loopback address.",
        )
        .applies_to([RequestProperty::CurrentHost])
    }
}

impl Filter for MigrationFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let Some(source) = cx.vm().current_host else {
            return rejections.into_vec();
        };
        let addresses = cx.hosts().texts(HostText::Address);
        let source_address = addresses.get(source as usize).trim();
        // Compare interned strings once each, not once per host.
        let verdicts: Vec<Verdict> = addresses
            .values()
            .map(|address| Verdict::of(address.trim(), source_address))
            .collect();
        for host in cx.hosts().candidates(candidates) {
            if host.index() == source {
                continue;
            }
            let verdict = addresses
                .indices
                .get(host.index() as usize)
                .and_then(|&i| verdicts.get(i as usize))
                .copied()
                .unwrap_or(Verdict::Keep);
            match verdict {
                Verdict::Keep => {}
                Verdict::Loopback => {
                    rejections.reject(host.index(), "address is a loopback address");
                }
                Verdict::SameAsSource => {
                    rejections.reject(host.index(), "same address as the source host");
                }
            }
        }
        rejections.into_vec()
    }
}

/// What an address means for a migration from `source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Keep,
    Loopback,
    SameAsSource,
}

impl Verdict {
    fn of(address: &str, source: &str) -> Verdict {
        if address.is_empty() {
            Verdict::Keep
        } else if is_loopback(address) {
            Verdict::Loopback
        } else if address.eq_ignore_ascii_case(source) {
            Verdict::SameAsSource
        } else {
            Verdict::Keep
        }
    }
}

/// True for the literal loopback forms: `localhost`, `127.x.y.z`, `::1`.
fn is_loopback(address: &str) -> bool {
    if address.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match address.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => false,
    }
}

sandpiper_guest::export_unit!(MigrationFilter: filter);
