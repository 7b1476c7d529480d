//! How Nova's weighers become our score units.
//!
//! Nova sums, per host, `multiplier × normalised raw weight`, where the
//! raw weights of one weigher are first clamped to its `minval`/`maxval`
//! and then mapped onto [0, 1] with `minval` (else the smallest) at 0 and
//! `maxval` (else the largest) at 1 (`nova/weights.py`, reference notes
//! §1.3). Our pipeline's normalised mode does the same with a unit's
//! `floor` and `ceiling`, then multiplies by the policy's factor. So:
//!
//! * the unit returns Nova's **raw** weights, and `minval` as `floor`;
//! * the multiplier's **magnitude** is the policy factor (factors are
//!   whole numbers, so scale a policy's multipliers together when they are
//!   fractional);
//! * the multiplier's **sign** is the unit's score order: a weigher Nova
//!   uses with a positive multiplier (RAM, CPU, disk) is higher-is-better,
//!   one it uses with a negative multiplier (I/O ops, build failures) is
//!   lower-is-better. The `reverse` parameter flips a unit to the other
//!   sign (Nova's stacking with a negative `ram_weight_multiplier`): it
//!   negates the weights, so `minval` becomes the ceiling. Mapped onto
//!   [0, 1] that differs from Nova's term only by a constant, which changes
//!   no ranking.
//!
//! Not carried over: Nova lets aggregate metadata override a weigher's
//! multiplier per host; our factor is one number per policy (see
//! docs/units.md).

use sandpiper_guest::model::GroupScope;
use sandpiper_guest::prelude::*;

use crate::params::REVERSE;

/// Turns raw weights into a unit's answer: `minval` as the floor, or, when
/// `reverse`, the negated weights with `-minval` as the ceiling. A weight
/// that is not a number (a missing figure) counts as `minval`, else 0;
/// infinities are clamped to the largest finite values, since the
/// pipeline refuses non-finite scores.
pub fn scores(mut raw: Vec<f64>, minval: Option<f64>, reverse: bool) -> Scores {
    // Weights are almost always finite, so one pass asks, without a
    // branch, and only a list holding a NaN or an infinity is rewritten.
    // Rewriting every weight cost the sandbox two float compares a
    // weight, each with NaN's unordered branches, and a store.
    if !raw.iter().fold(true, |all, &v| all & is_finite(v)) {
        let bottom = minval.unwrap_or(0.0);
        for v in &mut raw {
            *v = if v.is_nan() {
                bottom
            } else {
                v.clamp(f64::MIN, f64::MAX)
            };
        }
    }
    if reverse {
        for v in &mut raw {
            *v = -*v;
        }
        Scores {
            values: raw,
            floor: None,
            ceiling: minval.map(|m| -m),
        }
    } else {
        Scores {
            values: raw,
            floor: minval,
            ceiling: None,
        }
    }
}

/// Whether `v` is a finite number, read from its bits: an integer compare,
/// where `f64::is_finite` is a float one.
#[inline]
fn is_finite(v: f64) -> bool {
    v.to_bits() & !(1 << 63) < f64::INFINITY.to_bits()
}

/// The `reverse` parameter; a broken value counts as `false` (the unit
/// then scores as Nova's default sign does).
pub fn reverse(cx: &Context<'_>) -> bool {
    cx.params().bool(REVERSE.name).unwrap_or(false)
}

/// Scores `candidates` by one raw weight per host.
pub fn by_host(
    cx: &Context<'_>,
    candidates: &[u32],
    minval: Option<f64>,
    raw: impl Fn(usize) -> f64,
) -> Scores {
    let values = candidates.iter().map(|&host| raw(host as usize)).collect();
    scores(values, minval, reverse(cx))
}

/// Per candidate, the members of the VM's soft (non-enforcing) server
/// groups of one kind (`affinity`: positive groups, else anti-affinity
/// ones) running on it, each group's member counting its `priority` (1
/// when not a finite number, Nova's count): the raw weight of Nova's two
/// soft server-group weighers, before the anti-affinity one negates it.
pub fn soft_group_members(cx: &Context<'_>, candidates: &[u32], affinity: bool) -> Vec<f64> {
    let mut members = vec![0.0_f64; cx.hosts().len()];
    for group in &cx.vm().groups {
        if group.scope != GroupScope::Vms || group.positive != affinity || group.enforcing {
            continue;
        }
        let priority = if group.priority.is_finite() {
            group.priority
        } else {
            1.0
        };
        for &host in &group.hosts {
            if let Some(count) = members.get_mut(host as usize) {
                *count += priority;
            }
        }
    }
    candidates
        .iter()
        .map(|&host| members.get(host as usize).copied().unwrap_or(0.0))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_negates_and_moves_minval_to_the_ceiling() {
        let plain = scores(vec![512.0, -512.0, f64::NAN], Some(0.0), false);
        assert_eq!(plain.values, [512.0, -512.0, 0.0]);
        assert_eq!((plain.floor, plain.ceiling), (Some(0.0), None));
        let reversed = scores(vec![512.0, f64::INFINITY], Some(0.0), true);
        assert_eq!(reversed.values, [-512.0, f64::MIN]);
        assert_eq!((reversed.floor, reversed.ceiling), (None, Some(-0.0)));
    }

    #[test]
    fn finite_weights_are_kept_and_the_rest_rewritten() {
        assert_eq!(
            scores(vec![1.5, -0.0, 7.0], None, false).values,
            [1.5, -0.0, 7.0]
        );
        let mixed = scores(vec![1.5, f64::NEG_INFINITY, -f64::NAN, 2.0], None, false);
        assert_eq!(mixed.values, [1.5, f64::MIN, 0.0, 2.0]);
        for v in [f64::MAX, f64::MIN, f64::MIN_POSITIVE, 5e-324, -5e-324] {
            assert!(is_finite(v), "{v}");
        }
        for v in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -f64::NAN] {
            assert!(!is_finite(v), "{v}");
        }
    }
}
