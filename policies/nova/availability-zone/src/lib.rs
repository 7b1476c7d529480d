//! `AvailabilityZoneFilter`: rejects hosts outside the requested
//! availability zone.
//!
//! Behaviour from Nova's `AvailabilityZoneFilter` (removed in 2023 when a
//! Placement prefilter replaced it; `git show
//! 5edd805fe2^:nova/scheduler/filters/availability_zone_filter.py`,
//! reference notes §1.1): with no zone requested every host passes;
//! otherwise a host's zones are the comma-split values of the
//! `availability_zone` metadata of its aggregates, or, when no aggregate
//! sets one, the default zone, and the requested zone must be one of them.
//!
//! Data: the requested zone is the hint `availability_zone` (Nova's
//! `RequestSpec.availability_zone`). A host outside every zoned aggregate is
//! in its own `zone` column when the engine reports one, else in the
//! `default_availability_zone` parameter (Nova's option, default `nova`);
//! Nova has no per-host zone besides aggregates, so the column only refines
//! the default.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::aggregates;
use sandpiper_nova_ops::hints::Hint;

/// Hint: the requested availability zone.
pub const AVAILABILITY_ZONE_HINT: &str = "availability_zone";
/// Aggregate metadata key naming an aggregate's zone.
pub const AVAILABILITY_ZONE_KEY: &str = "availability_zone";
/// Parameter: the zone of hosts no zoned aggregate claims.
pub const DEFAULT_AVAILABILITY_ZONE: &str = "default_availability_zone";

/// The `AvailabilityZoneFilter` filter.
pub struct AvailabilityZoneFilter;

impl Unit for AvailabilityZoneFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AvailabilityZoneFilter",
            "Rejects hosts outside the availability zone in the `availability_zone` hint: a \
             host's zones come from its aggregates' availability_zone metadata, else its own \
             zone, else default_availability_zone (Nova's AvailabilityZoneFilter).",
        )
        .with_param(ParamSpec::new(
            DEFAULT_AVAILABILITY_ZONE,
            "Zone of hosts that no aggregate puts in a zone and that report none (Nova's \
             default_availability_zone).",
            "nova",
            "^[^\\n]*$",
        ))
        .applies_to([RequestProperty::Hint(AVAILABILITY_ZONE_HINT.to_owned())])
        .per_host()
    }
}

impl Filter for AvailabilityZoneFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let requested = match Hint::of(&cx.request().hints, AVAILABILITY_ZONE_HINT) {
            Hint::Absent => return rejections.into_vec(),
            Hint::One(zone) => zone,
            Hint::Many(_) => {
                rejections.reject_all(candidates, "more than one `availability_zone` hint");
                return rejections.into_vec();
            }
        };
        // `if not availability_zone: return True`.
        if requested.is_empty() {
            return rejections.into_vec();
        }
        let default_zone = match cx.params().str(DEFAULT_AVAILABILITY_ZONE) {
            Ok(zone) => zone,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let hosts = cx.hosts();
        let metadata = hosts.labels(HostLabels::AggregateMetadata);
        let key = metadata.id(AVAILABILITY_ZONE_KEY);
        // Whether each metadata text lists the requested zone.
        let mut lists: Vec<Option<bool>> = vec![None; metadata.strings.len()];
        let zones = hosts.texts(HostText::Zone);
        let reason = rejections.reason(format!("not in availability zone {requested:?}"));
        for &host in candidates {
            let mut zoned = false;
            let mut inside = false;
            if let Some(key) = key {
                for value in metadata.values_of(host as usize, key) {
                    zoned = true;
                    let Some(slot) = lists.get_mut(value as usize) else {
                        continue;
                    };
                    inside |= *slot.get_or_insert_with(|| {
                        aggregates::split(metadata.string(value)).any(|z| z == requested)
                    });
                }
            }
            if !zoned {
                let own = zones.get(host as usize);
                inside = requested == if own.is_empty() { default_zone } else { own };
            }
            if !inside {
                rejections.reject_for(host, reason);
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(AvailabilityZoneFilter: filter);
