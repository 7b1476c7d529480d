//! `OptimalForHaReservation`: spreads highly available VMs across hosts, so
//! that losing one host loses few of them.
//!
//! Behaviour from oVirt's `HaReservationWeightPolicyUnit` (reference notes
//! §2.2). Only for a highly available VM in a cluster with HA reservation;
//! otherwise every host weighs 0. Each candidate's highly available VMs
//! are counted, scaled to 0..100 of the largest count (rounded, `float`),
//! then divided by `ScaleDown` and rounded up:
//!
//! ```text
//! ceil(round(count / max_count × 100) / ScaleDown)
//! ```
//!
//! Fewer is better. When no candidate runs an HA VM, every count stays 0.
//!
//! Data: the running VMs' host and `highly-available` flag (pending
//! placements included: they will run there); the VM's `highly-available`
//! flag.
//!
//! Where we differ from oVirt: oVirt reads "HA reservation" from the
//! cluster (`ha_reservation`); here it is the `HaReservation` parameter,
//! default `false` as a new oVirt cluster's. oVirt counts the VMs its
//! database places on a host, which may miss placements not yet started.

use sandpiper_guest::prelude::*;
use sandpiper_ovirt::params::{self, HA_RESERVATION, SCALE_DOWN};

/// oVirt's `RATIO_FACTOR`: counts are scaled onto 0..this.
pub const RATIO_FACTOR: f32 = 100.0;
/// oVirt's `DEFAULT_SCORE`: every host's weight when the unit does not apply.
pub const DEFAULT_WEIGHT: f64 = 0.0;

/// The `OptimalForHaReservation` score.
pub struct HaReservation;

impl Unit for HaReservation {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "OptimalForHaReservation",
            "For a highly available VM in a cluster with HA reservation, gives hosts running \
             fewer highly available VMs a lower weight.",
        )
        .with_param(params::scale_down())
        .with_param(params::ha_reservation())
        .with_score_order(ScoreOrder::LowerIsBetter)
        .applies_to([RequestProperty::HighlyAvailable])
    }
}

impl Score for HaReservation {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let neutral = || Scores::new(vec![DEFAULT_WEIGHT; candidates.len()]);
        let params = cx.params();
        let (Ok(scale_down), Ok(enabled)) = (params.f64(SCALE_DOWN), params.bool(HA_RESERVATION))
        else {
            return neutral();
        };
        if !enabled || !cx.vm().highly_available || scale_down <= 0.0 {
            return neutral();
        }
        let vms = cx.vms();
        let mut per_host = vec![0u32; cx.hosts().len()];
        for (&host, &ha) in vms.hosts().iter().zip(vms.flags(VmFlag::HighlyAvailable)) {
            if ha && let Some(count) = per_host.get_mut(host as usize) {
                *count += 1;
            }
        }
        let counts: Vec<u32> = candidates
            .iter()
            .map(|&h| per_host.get(h as usize).copied().unwrap_or(0))
            .collect();
        let max = counts.iter().copied().max().unwrap_or(0);
        let scale_down = scale_down as f32;
        Scores::new(
            counts
                .into_iter()
                .map(|count| {
                    let fitted = if max > 0 {
                        // Java's `Math.round(float)`.
                        (count as f32 / max as f32 * RATIO_FACTOR + 0.5).floor()
                    } else {
                        0.0
                    };
                    f64::from((fitted / scale_down).ceil())
                })
                .collect(),
        )
    }
}

sandpiper_guest::export_unit!(HaReservation: score);
