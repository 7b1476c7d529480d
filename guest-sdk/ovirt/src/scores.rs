//! How oVirt's weights turn raw figures into weights: Java's rounding,
//! `PolicyUnitImpl.stretchScores` and `ListUtils.rankSorted`.

use sandpiper_guest::float;
use std::cmp::Ordering;

use crate::MAX_SCHEDULER_WEIGHT;

/// Java's `Math.round`: halves round up (towards +∞), so `-2.5` is `-2`
/// where Rust's `f64::round` gives `-3`. oVirt's power-saving weight
/// rounds negative figures, so the difference is visible there.
#[inline]
pub fn java_round(value: f64) -> f64 {
    (value + 0.5).floor()
}

/// oVirt's `stretchScores`: maps the known raw weights linearly onto
/// `1..=MAX_SCHEDULER_WEIGHT` (all equal: all 1); an unknown one (`None`,
/// a host oVirt could not judge) gets `MAX_SCHEDULER_WEIGHT`, unstretched.
pub fn stretch(values: &[Option<f64>]) -> Vec<f64> {
    let known = values.iter().flatten().copied();
    let min = known.clone().fold(f64::INFINITY, float::min);
    let max = known.fold(f64::NEG_INFINITY, float::max);
    values
        .iter()
        .map(|value| match *value {
            None => MAX_SCHEDULER_WEIGHT,
            Some(_) if max <= min => 1.0,
            Some(value) => {
                let coefficient = (value - min) / (max - min);
                java_round(1.0 + coefficient * (MAX_SCHEDULER_WEIGHT - 1.0))
            }
        })
        .collect()
}

/// Competition ranks ("1224" ranking, 0-based) of `items` under `compare`,
/// as oVirt's `ListUtils.rankSorted` over the sorted list: an item's rank is
/// the number of items strictly better than it. Returned in `items`' order.
pub fn competition_ranks<T>(items: &[T], compare: impl Fn(&T, &T) -> Ordering) -> Vec<u32> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| compare(&items[a], &items[b]));
    let mut ranks = vec![0; items.len()];
    let mut rank = 0;
    for (position, &item) in order.iter().enumerate() {
        if position > 0 && compare(&items[item], &items[order[position - 1]]) == Ordering::Greater {
            rank = position as u32;
        }
        ranks[item] = rank;
    }
    ranks
}

/// Java's `ListUtils.lexicographicListComparator` over natural order:
/// element by element, then the shorter list first.
pub fn lexicographic(a: &[f64], b: &[f64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.total_cmp(y) {
            Ordering::Equal => {}
            unequal => return unequal,
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_rounds_halves_up() {
        assert_eq!(java_round(2.5), 3.0);
        assert_eq!(java_round(-2.5), -2.0);
        assert_eq!(java_round(-2.6), -3.0);
    }

    #[test]
    fn stretch_maps_known_values_onto_one_to_a_thousand() {
        assert_eq!(
            stretch(&[Some(10.0), Some(60.0), None, Some(110.0)]),
            [1.0, 501.0, MAX_SCHEDULER_WEIGHT, MAX_SCHEDULER_WEIGHT]
        );
        assert_eq!(stretch(&[Some(5.0), Some(5.0)]), [1.0, 1.0]);
        assert!(stretch(&[]).is_empty());
    }

    #[test]
    fn ranks_share_the_best_position_of_their_ties() {
        let ranks = competition_ranks(&[5, 1, 1, 3], |a, b| a.cmp(b));
        assert_eq!(ranks, [3, 0, 0, 2]);
    }

    #[test]
    fn lexicographic_prefers_fewer_and_lower_priorities() {
        assert_eq!(lexicographic(&[1.0, 1.0, 1.0], &[2.0]), Ordering::Less);
        assert_eq!(lexicographic(&[], &[1.0]), Ordering::Less);
        assert_eq!(lexicographic(&[2.0], &[2.0, 1.0]), Ordering::Less);
        assert_eq!(lexicographic(&[2.0], &[2.0]), Ordering::Equal);
    }
}
