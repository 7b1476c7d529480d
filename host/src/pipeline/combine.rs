//! Turning each score unit's answer into points per candidate, the two ways
//! the pipeline knows.
//!
//! * **Rank** (oVirt's `RankSelectorPolicyUnit`): sort the candidates by the
//!   unit's score, best first; competition ranks, 0-based, give tied
//!   candidates the best rank of their group (`[1, 1, 5]` → `[0, 0, 2]` for
//!   lower-is-better); a candidate gets `(n − 1 − rank) × factor` points.
//!   Only the order a unit produces matters, never its magnitudes.
//! * **Normalised** (Nova's `BaseWeightHandler`): clamp to the unit's floor
//!   and ceiling when it gives them, map onto [0, 1] with the floor (else the
//!   smallest value) at one end and the ceiling (else the largest) at the
//!   other, so that 1 is always the best end whichever way the unit counts;
//!   all 0 when the range is empty; times the factor. As in Nova, a floor or
//!   ceiling is also the end of the range, not just a clamp: free RAM
//!   `[1000, 2000]` with floor 0 maps to `[0.5, 1]`.
//!
//! These functions run once per score unit per decision over every
//! surviving candidate, so they allocate nothing per candidate: the caller
//! passes the output slices and one reusable ordering buffer, and each unit
//! is sorted exactly once.

use std::cell::Cell;
use std::cmp::Ordering;

use sandpiper_model::{ScoreOrder, Scores};

/// Most candidates whose sort buffers a thread keeps from one decision to
/// the next: 65,536 candidates are 2 MiB of buffers (two of 16 bytes per
/// candidate). Larger decisions allocate their own and free them.
pub const RETAINED_SORT_CANDIDATES: usize = 1 << 16;

thread_local! {
    /// The sort buffers of this thread's last decision. Fresh buffers for
    /// 10,000 candidates are 320 KiB of newly mapped pages, and faulting
    /// those in cost more than the sorting itself.
    static RETAINED: Cell<Option<SortBuffers>> = const { Cell::new(None) };
}

/// Reusable buffers for sorting candidates by key, so that a decision
/// allocates them once however many units it combines.
#[derive(Default)]
pub(crate) struct SortBuffers {
    /// (key, candidate position) pairs; sorted by [`SortBuffers::sort`].
    pub(crate) pairs: Vec<(u64, u32)>,
    spare: Vec<(u64, u32)>,
}

impl SortBuffers {
    /// Empty buffers: the ones this thread kept from its last decision, if
    /// any.
    pub(crate) fn take() -> Self {
        let mut buffers = RETAINED.take().unwrap_or_default();
        buffers.pairs.clear();
        buffers
    }

    /// Keeps the buffers for this thread's next decision, unless they grew
    /// past [`RETAINED_SORT_CANDIDATES`].
    pub(crate) fn give_back(self) {
        if self.pairs.capacity().max(self.spare.capacity()) <= RETAINED_SORT_CANDIDATES {
            RETAINED.set(Some(self));
        }
    }

    /// Sorts `pairs` by key, keeping pairs with equal keys in the order
    /// they were pushed (a stable LSD radix sort, one pass per key byte,
    /// skipping bytes every key shares). On 10,000 candidates this is about
    /// three times faster than a comparison sort of the pairs, and
    /// stability is what the tie-break rule needs.
    pub(crate) fn sort(&mut self) {
        const BYTES: usize = 8;
        let n = self.pairs.len();
        // The bytes every key shares (most of a whole number's, as scores
        // and rank totals are) are found by two bit operations per key:
        // counting them would add to one counter per key, a chain of
        // dependent increments that cost more than the passes.
        let (mut any, mut all) = (0u64, u64::MAX);
        for &(key, _) in &self.pairs {
            any |= key;
            all &= key;
        }
        let varying = any ^ all;
        let mut bytes = [0usize; BYTES];
        let mut used = 0;
        for byte in 0..BYTES {
            if (varying >> (8 * byte)) & 0xff != 0 {
                bytes[used] = byte;
                used += 1;
            }
        }
        let bytes = &bytes[..used];
        let mut counts = [[0u32; 256]; BYTES];
        for &(key, _) in &self.pairs {
            for (count, &byte) in counts.iter_mut().zip(bytes) {
                count[(key >> (8 * byte)) as usize & 0xff] += 1;
            }
        }
        self.spare.clear();
        self.spare.resize(n, (0, 0));
        for (count, &byte) in counts.iter().zip(bytes) {
            let mut next = [0u32; 256];
            let mut sum = 0;
            for (slot, &c) in next.iter_mut().zip(count) {
                *slot = sum;
                sum += c;
            }
            for &(key, position) in &self.pairs {
                let digit = (key >> (8 * byte)) as usize & 0xff;
                self.spare[next[digit] as usize] = (key, position);
                next[digit] += 1;
            }
            std::mem::swap(&mut self.pairs, &mut self.spare);
        }
    }
}

/// Ranks `values` (one per candidate) and adds `(n − 1 − rank) × factor` to
/// each candidate's total, writing each candidate's rank to `ranks`.
/// Values must be finite (the pipeline checks before calling).
pub(crate) fn rank(
    values: &[f64],
    score_order: ScoreOrder,
    factor: u32,
    buffers: &mut SortBuffers,
    ranks: &mut [u32],
    totals: &mut [f64],
) {
    let n = values.len();
    debug_assert!(ranks.len() == n && totals.len() == n);
    // One score for every candidate (a skipped unit's promised answer, or
    // a unit with nothing to tell them apart by): every rank is 0, and
    // sorting would only find that out slowly.
    if let Some(&first) = values.first() {
        let key = ascending_key(first);
        if values.iter().all(|&v| ascending_key(v) == key) {
            rank_all_first(factor, ranks, totals);
            return;
        }
    }
    let keys = &mut buffers.pairs;
    keys.clear();
    keys.extend(values.iter().enumerate().map(|(i, &v)| {
        let key = ascending_key(v);
        let best_first = match score_order {
            ScoreOrder::LowerIsBetter => key,
            ScoreOrder::HigherIsBetter => !key,
        };
        (best_first, i as u32)
    }));
    buffers.sort();
    let factor = f64::from(factor);
    let mut group_rank = 0u32;
    let mut group_key = None;
    for (position, &(key, candidate)) in buffers.pairs.iter().enumerate() {
        if group_key != Some(key) {
            group_rank = position as u32;
            group_key = Some(key);
        }
        let c = candidate as usize;
        ranks[c] = group_rank;
        totals[c] += rank_points(n, group_rank, factor);
    }
}

/// Ranks every candidate first, as one score for all ranks them: each
/// rank 0, each total plus the first rank's points.
pub(crate) fn rank_all_first(factor: u32, ranks: &mut [u32], totals: &mut [f64]) {
    ranks.fill(0);
    let points = rank_points(totals.len(), 0, f64::from(factor));
    totals.iter_mut().for_each(|t| *t += points);
}

/// What competition rank `rank` among `n` candidates is worth.
pub(crate) fn rank_points(n: usize, rank: u32, factor: f64) -> f64 {
    (n as f64 - 1.0 - f64::from(rank)) * factor
}

/// An integer that orders like `value` does (IEEE 754 total order), with
/// -0.0 and 0.0 the same: sorting integers is several times faster than
/// sorting through a float comparison.
pub(crate) fn ascending_key(value: f64) -> u64 {
    let bits = (value + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Maps `values` onto [0, 1] (1 = best) after clamping to the floor and
/// ceiling, and adds `normalised × factor` to each candidate's total,
/// writing each candidate's normalised value. Values, floor and ceiling
/// must be finite and `floor ≤ ceiling` (the pipeline checks).
pub(crate) fn normalise(
    scores: &Scores,
    score_order: ScoreOrder,
    factor: u32,
    normalised: &mut [f64],
    totals: &mut [f64],
) {
    let Scores {
        values,
        floor,
        ceiling,
    } = scores;
    let (floor, ceiling) = (*floor, *ceiling);
    let n = values.len();
    debug_assert!(normalised.len() == n && totals.len() == n);
    let clamp = |v: f64| {
        let v = floor.map_or(v, |f| v.max(f));
        ceiling.map_or(v, |c| v.min(c))
    };
    let (mut min, mut max) = (f64::INFINITY, f64::NEG_INFINITY);
    for &v in values {
        let v = clamp(v);
        min = min.min(v);
        max = max.max(v);
    }
    let low = floor.unwrap_or(min);
    let high = ceiling.unwrap_or(max);
    let range = high - low;
    let factor = f64::from(factor);
    for (i, &v) in values.iter().enumerate() {
        let share = if range > 0.0 {
            match score_order {
                ScoreOrder::HigherIsBetter => (clamp(v) - low) / range,
                ScoreOrder::LowerIsBetter => (high - clamp(v)) / range,
            }
        } else {
            0.0
        };
        normalised[i] = share;
        totals[i] += share * factor;
    }
}

/// Why a score unit's answer cannot be combined.
pub(crate) fn check_scores(scores: &Scores, candidates: usize) -> Result<(), String> {
    let Scores {
        values,
        floor,
        ceiling,
    } = scores;
    let (floor, ceiling) = (*floor, *ceiling);
    if values.len() != candidates {
        return Err(format!(
            "{} scores for {} candidates",
            values.len(),
            candidates
        ));
    }
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(format!("score {} (candidate {i}) is not finite", values[i]));
    }
    for (name, bound) in [("floor", floor), ("ceiling", ceiling)] {
        if let Some(b) = bound.filter(|b| !b.is_finite()) {
            return Err(format!("{name} {b} is not finite"));
        }
    }
    if let (Some(f), Some(c)) = (floor, ceiling)
        && f.partial_cmp(&c) == Some(Ordering::Greater)
    {
        return Err(format!("floor {f} is above ceiling {c}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(values: &[f64], order: ScoreOrder, factor: u32) -> (Vec<u32>, Vec<f64>) {
        let n = values.len();
        let (mut ranks, mut totals) = (vec![0; n], vec![0.0; n]);
        rank(
            values,
            order,
            factor,
            &mut SortBuffers::default(),
            &mut ranks,
            &mut totals,
        );
        (ranks, totals)
    }

    #[test]
    fn competition_ranks_share_the_best_rank_of_a_tie() {
        let (ranks, points) = ranked(&[1.0, 1.0, 5.0], ScoreOrder::LowerIsBetter, 1);
        assert_eq!(ranks, [0, 0, 2]);
        assert_eq!(points, [2.0, 2.0, 0.0]);
        let (ranks, _) = ranked(&[5.0, 1.0, 1.0, 0.0], ScoreOrder::HigherIsBetter, 1);
        assert_eq!(ranks, [0, 1, 1, 3]);
    }

    #[test]
    fn one_score_for_all_ranks_every_candidate_first() {
        for (values, factor) in [(vec![3.0; 5], 2), (vec![0.0, -0.0, 0.0], 1), (vec![7.5], 3)] {
            let n = values.len();
            // Ranks and totals as an earlier unit left them.
            let mut ranks = vec![9; n];
            let mut totals = vec![1.0; n];
            for order in [ScoreOrder::LowerIsBetter, ScoreOrder::HigherIsBetter] {
                ranks.fill(9);
                totals.fill(1.0);
                rank(
                    &values,
                    order,
                    factor,
                    &mut SortBuffers::default(),
                    &mut ranks,
                    &mut totals,
                );
                assert_eq!(ranks, vec![0; n], "{values:?}");
                let each = 1.0 + (n as f64 - 1.0) * f64::from(factor);
                assert_eq!(totals, vec![each; n], "{values:?}");
            }
        }
    }

    #[test]
    fn the_radix_sort_is_a_stable_sort() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut buffers = SortBuffers::default();
        for n in [0, 1, 2, 255, 1000] {
            buffers.pairs.clear();
            for i in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few distinct keys, spread over several bytes, so that
                // stability and byte skipping are both exercised.
                let key = (x % 7) << 40 | (x % 3);
                buffers.pairs.push((key, i));
            }
            let mut expected = buffers.pairs.clone();
            expected.sort_by_key(|&(key, _)| key);
            buffers.sort();
            assert_eq!(buffers.pairs, expected, "n = {n}");
        }
    }

    #[test]
    fn integer_keys_order_like_floats() {
        let values = [f64::MIN, -1.5, -0.0, 0.0, 1e-300, 2.0, f64::MAX];
        for pair in values.windows(2) {
            assert!(ascending_key(pair[0]) <= ascending_key(pair[1]), "{pair:?}");
        }
        assert_eq!(ascending_key(-0.0), ascending_key(0.0));
        assert!(ascending_key(-1.5) < ascending_key(-1.0));
    }

    #[test]
    fn signed_zeros_are_one_score() {
        let (ranks, _) = ranked(&[0.0, -0.0, 1.0], ScoreOrder::LowerIsBetter, 1);
        assert_eq!(ranks, [0, 0, 2]);
    }

    fn clamped(values: &[f64], floor: Option<f64>, ceiling: Option<f64>) -> Scores {
        Scores {
            values: values.to_vec(),
            floor,
            ceiling,
        }
    }

    #[test]
    fn normalised_maps_the_best_end_to_one() {
        let n = 3;
        let (mut norm, mut totals) = (vec![0.0; n], vec![0.0; n]);
        let v = [10.0, 20.0, 30.0];
        normalise(
            &Scores::new(v.to_vec()),
            ScoreOrder::LowerIsBetter,
            2,
            &mut norm,
            &mut totals,
        );
        assert_eq!(norm, [1.0, 0.5, 0.0]);
        assert_eq!(totals, [2.0, 1.0, 0.0]);
        normalise(
            &Scores::new(v.to_vec()),
            ScoreOrder::HigherIsBetter,
            1,
            &mut norm,
            &mut totals,
        );
        assert_eq!(norm, [0.0, 0.5, 1.0]);
        assert_eq!(totals, [2.0, 1.5, 1.0]);
    }

    #[test]
    fn normalised_uses_floor_and_ceiling_as_the_range_like_nova() {
        let n = 2;
        let (mut norm, mut totals) = (vec![0.0; n], vec![0.0; n]);
        // Nova's RAMWeigher: minval 0, so norm = free / max(free).
        normalise(
            &clamped(&[1000.0, 2000.0], Some(0.0), None),
            ScoreOrder::HigherIsBetter,
            1,
            &mut norm,
            &mut totals,
        );
        assert_eq!(norm, [0.5, 1.0]);
        // Negative values clamp to the floor.
        normalise(
            &clamped(&[-500.0, 2000.0], Some(0.0), None),
            ScoreOrder::HigherIsBetter,
            1,
            &mut norm,
            &mut totals,
        );
        assert_eq!(norm, [0.0, 1.0]);
        // A ceiling clamps from above.
        normalise(
            &clamped(&[50.0, 500.0], Some(0.0), Some(100.0)),
            ScoreOrder::HigherIsBetter,
            1,
            &mut norm,
            &mut totals,
        );
        assert_eq!(norm, [0.5, 1.0]);
    }

    #[test]
    fn an_empty_range_gives_no_points() {
        let n = 3;
        let (mut norm, mut totals) = (vec![9.0; n], vec![0.0; n]);
        normalise(
            &Scores::new(vec![7.0; 3]),
            ScoreOrder::HigherIsBetter,
            5,
            &mut norm,
            &mut totals,
        );
        assert_eq!(norm, [0.0; 3]);
        assert_eq!(totals, [0.0; 3]);
    }

    #[test]
    fn scores_must_be_one_finite_value_per_candidate() {
        let check = |v: &[f64], floor, ceiling| check_scores(&clamped(v, floor, ceiling), 2);
        assert!(check(&[1.0], None, None).is_err());
        assert!(check(&[1.0, f64::NAN], None, None).is_err());
        assert!(check(&[1.0, f64::INFINITY], None, None).is_err());
        assert!(check(&[1.0, 2.0], Some(3.0), Some(1.0)).is_err());
        assert!(check(&[1.0, 2.0], Some(f64::NAN), None).is_err());
        assert!(check(&[1.0, 2.0], Some(0.0), Some(1.0)).is_ok());
    }
}
