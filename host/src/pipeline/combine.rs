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
//! passes the output slices and one reusable ordering buffer, and each
//! unit's scores are sorted, or only counted, once.

use std::cell::Cell;
use std::cmp::Ordering;

use sandpiper_model::{ScoreOrder, Scores};

/// Most candidates whose sort buffers a thread keeps from one decision to
/// the next: 65,536 candidates are up to 2 MiB of buffers (three of 8
/// bytes per candidate and up to two 4-byte counters; keys too wide to
/// pack add two of 16). Larger decisions allocate their own and free them.
pub const RETAINED_SORT_CANDIDATES: usize = 1 << 16;

thread_local! {
    /// The sort buffers of this thread's last decision. Fresh buffers for
    /// 10,000 candidates are hundreds of KiB of newly mapped pages, and
    /// faulting those in cost more than the sorting itself.
    static RETAINED: Cell<Option<SortBuffers>> = const { Cell::new(None) };
}

/// Reusable buffers for sorting candidates by key, so that a decision
/// allocates them once however many units it combines.
///
/// Keys are pushed in candidate order; [`SortBuffers::sort`] orders the
/// candidates' positions by key, equal keys in the order they were pushed
/// (a stable LSD radix sort over only the bits in which the keys differ,
/// with digits of up to 11 bits).
/// Scores and rank totals differ in a few bits only (oVirt's scores are
/// 1 to 1,000), so the sort usually packs each key's differing bits and
/// its position into one word, half the bytes a pass moves of (key,
/// position) pairs, and a ranking often needs no sort at all
/// ([`SortBuffers::for_each_rank`]).
#[derive(Default)]
pub(crate) struct SortBuffers {
    keys: Vec<u64>,
    /// Packed words, `(differing key bits << position bits) | position`.
    packed: Vec<u64>,
    spare: Vec<u64>,
    /// (key, position) pairs, for keys whose differing bits do not fit
    /// beside a position in one word.
    pairs: Vec<(u64, u32)>,
    spare_pairs: Vec<(u64, u32)>,
    /// One counter per value of a radix digit.
    counts: Vec<u32>,
    sorted: Sorted,
}

/// Where [`SortBuffers::sort`] left the order.
#[derive(Clone, Copy, Default)]
enum Sorted {
    /// Every key is the same: push order is the order.
    #[default]
    InPushOrder,
    /// In `packed`; a word's low bits under the mask are its position.
    Packed { position_mask: u64 },
    /// In `pairs`.
    Pairs,
}

impl SortBuffers {
    /// Empty buffers: the ones this thread kept from its last decision, if
    /// any.
    pub(crate) fn take() -> Self {
        let mut buffers = RETAINED.take().unwrap_or_default();
        buffers.clear();
        buffers
    }

    /// Keeps the buffers for this thread's next decision, unless they grew
    /// past [`RETAINED_SORT_CANDIDATES`].
    pub(crate) fn give_back(self) {
        let most = [
            self.keys.capacity(),
            self.packed.capacity(),
            self.spare.capacity(),
            self.pairs.capacity(),
            self.spare_pairs.capacity(),
        ];
        if most.into_iter().max().unwrap_or(0) <= RETAINED_SORT_CANDIDATES {
            RETAINED.set(Some(self));
        }
    }

    /// Forgets the keys pushed so far.
    pub(crate) fn clear(&mut self) {
        self.keys.clear();
        self.sorted = Sorted::InPushOrder;
    }

    /// Adds the next candidate's key; its position is the number of keys
    /// pushed before it.
    pub(crate) fn extend(&mut self, keys: impl IntoIterator<Item = u64>) {
        self.keys.extend(keys);
    }

    /// The bits in which the keys differ, as (lowest bit, width); `None`
    /// when every key is the same. Two bit operations per key: counting
    /// per digit instead would add to one counter per key, a chain of
    /// dependent increments that costs more than a pass.
    fn differing_bits(&self) -> Option<(u32, u32)> {
        let (mut any, mut all) = (0u64, u64::MAX);
        for &key in &self.keys {
            any |= key;
            all &= key;
        }
        let differing = any ^ all;
        (differing != 0).then(|| {
            let low = differing.trailing_zeros();
            (low, 64 - differing.leading_zeros() - low)
        })
    }

    /// Orders the positions by key, equal keys in push order.
    pub(crate) fn sort(&mut self) {
        let bits = self.differing_bits();
        self.sort_differing(bits);
    }

    /// [`SortBuffers::sort`], given the keys' [`SortBuffers::differing_bits`].
    fn sort_differing(&mut self, bits: Option<(u32, u32)>) {
        let n = self.keys.len();
        let Some((low, width)) = bits else {
            self.sorted = Sorted::InPushOrder;
            return;
        };
        let digit = digit_bits(n);
        // Whole bytes for the position, so that no pass sorts by bits
        // holding both position and key.
        let position_bits = match n {
            0..=0x100 => 8,
            0x101..=0x1_0000 => 16,
            0x1_0001..=0x100_0000 => 24,
            _ => 32,
        };
        if width + position_bits <= 64 {
            let key_mask = u64::MAX >> (64 - width);
            self.packed.clear();
            self.packed.extend(
                self.keys
                    .iter()
                    .enumerate()
                    .map(|(i, &key)| (((key >> low) & key_mask) << position_bits) | i as u64),
            );
            let bits = position_bits..position_bits + width;
            radix_sort(
                &mut self.packed,
                &mut self.spare,
                &mut self.counts,
                bits,
                digit,
                |&w| w,
            );
            self.sorted = Sorted::Packed {
                position_mask: (1 << position_bits) - 1,
            };
        } else {
            self.pairs.clear();
            self.pairs.extend(
                self.keys
                    .iter()
                    .enumerate()
                    .map(|(i, &key)| (key, i as u32)),
            );
            let bits = low..low + width;
            radix_sort(
                &mut self.pairs,
                &mut self.spare_pairs,
                &mut self.counts,
                bits,
                digit,
                |p| p.0,
            );
            self.sorted = Sorted::Pairs;
        }
    }

    /// Calls `f` with each position in sorted order (after
    /// [`SortBuffers::sort`]).
    pub(crate) fn for_each_sorted(&self, mut f: impl FnMut(u32)) {
        match self.sorted {
            Sorted::InPushOrder => (0..self.keys.len() as u32).for_each(f),
            Sorted::Packed { position_mask } => {
                for &word in &self.packed {
                    f((word & position_mask) as u32);
                }
            }
            Sorted::Pairs => {
                for &(_, position) in &self.pairs {
                    f(position);
                }
            }
        }
    }

    /// Calls `f(position, rank)` for every pushed key, in push order, with
    /// its competition rank: how many keys are smaller. Keys that differ
    /// in few enough bits (see [`counting_pays`]; scores on a short scale,
    /// keyed by [`rank`]) are ranked by counting alone, without moving
    /// anything; others are sorted.
    pub(crate) fn for_each_rank(&mut self, mut f: impl FnMut(u32, u32)) {
        let n = self.keys.len();
        let bits = self.differing_bits();
        match bits {
            None => (0..n as u32).for_each(|position| f(position, 0)),
            Some((low, width)) if counting_pays(width, n) => {
                let mask = u64::MAX >> (64 - width);
                let digit = |key: u64| ((key >> low) & mask) as usize;
                self.counts.clear();
                self.counts.resize(1 << width, 0);
                for &key in &self.keys {
                    self.counts[digit(key)] += 1;
                }
                exclusive_sums(&mut self.counts);
                for (position, &key) in self.keys.iter().enumerate() {
                    f(position as u32, self.counts[digit(key)]);
                }
            }
            Some(_) => {
                self.sort_differing(bits);
                let (mut at, mut group_rank, mut group_key) = (0u32, 0u32, None);
                self.for_each_sorted(|position| {
                    let key = self.keys[position as usize];
                    if group_key != Some(key) {
                        group_rank = at;
                        group_key = Some(key);
                    }
                    f(position, group_rank);
                    at += 1;
                });
            }
        }
    }
}

/// Bits per radix digit for `n` keys: up to 2,048 buckets (8 KiB of
/// counters, which stay in the first-level cache while a pass scatters;
/// 16,384 buckets measured half as fast), but no more than about one
/// per key.
fn digit_bits(n: usize) -> u32 {
    (usize::BITS - n.leading_zeros()).clamp(8, 11)
}

/// Whether ranking `n` keys that differ in `width` bits by counting (one
/// counter per possible key) costs less than sorting them: while there
/// are at most about two counters per key.
fn counting_pays(width: u32, n: usize) -> bool {
    width < usize::BITS - 1 && 1usize << width <= 2 * n.max(128)
}

/// Turns counts into the number of items counted before each.
fn exclusive_sums(counts: &mut [u32]) {
    let mut sum = 0;
    for count in counts {
        let c = *count;
        *count = sum;
        sum += c;
    }
}

/// Sorts `items` stably by the bits `bits` of `key(item)`, `digit` bits a
/// pass from the lowest, skipping a pass whose digit every item shares;
/// `spare` and `counts` are scratch space.
fn radix_sort<T: Copy + Default>(
    items: &mut Vec<T>,
    spare: &mut Vec<T>,
    counts: &mut Vec<u32>,
    bits: std::ops::Range<u32>,
    digit: u32,
    key: impl Fn(&T) -> u64,
) {
    spare.clear();
    spare.resize(items.len(), T::default());
    let mut shift = bits.start;
    while shift < bits.end {
        let (at, width) = (shift, digit.min(bits.end - shift));
        shift += width;
        let mask = (1u64 << width) - 1;
        let digit_of = |item: &T| ((key(item) >> at) & mask) as usize;
        counts.clear();
        counts.resize(1 << width, 0);
        for item in items.iter() {
            counts[digit_of(item)] += 1;
        }
        if counts.iter().any(|&c| c as usize == items.len()) {
            continue;
        }
        exclusive_sums(counts);
        for item in items.iter() {
            let next = &mut counts[digit_of(item)];
            spare[*next as usize] = *item;
            *next += 1;
        }
        std::mem::swap(items, spare);
    }
}

/// Scores that are whole numbers less than this far apart are keyed by
/// their distance from the best one.
const SCALE: f64 = 16_384.0;

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
    buffers.clear();
    // Whole numbers on a short scale (oVirt's scores are 1 to 1,000) keyed
    // by their distance from the best end: a few bits wide, ranked by
    // counting. Their float bits would differ in twenty (the exponent
    // changes at every power of two).
    // (`fract` would call libm per value on x86-64's baseline; a round
    // trip through i64 is two instructions, and refuses huge values.) The
    // check stops at the first fraction, so other scores pay little for it.
    let whole = values.iter().all(|&v| v == (v as i64) as f64);
    let scale = whole
        .then(|| {
            values
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
                    (l.min(v), h.max(v))
                })
        })
        .filter(|(low, high)| high - low < SCALE);
    if let Some((low, high)) = scale {
        // Exact: whole numbers less than `SCALE` apart subtract exactly.
        buffers.extend(values.iter().map(|&v| match score_order {
            ScoreOrder::LowerIsBetter => (v - low) as u64,
            ScoreOrder::HigherIsBetter => (high - v) as u64,
        }));
    } else {
        buffers.extend(values.iter().map(|&v| {
            let key = ascending_key(v);
            match score_order {
                ScoreOrder::LowerIsBetter => key,
                ScoreOrder::HigherIsBetter => !key,
            }
        }));
    }
    let factor = f64::from(factor);
    buffers.for_each_rank(|candidate, rank| {
        let c = candidate as usize;
        ranks[c] = rank;
        totals[c] += rank_points(n, rank, factor);
    });
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
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Keys of every kind the sort treats apart: few distinct keys
        // spread over several digits (packed, shared digits skipped), keys
        // differing in their top and bottom bits (too wide to pack), one
        // key for all, scores as floats, and a scale of 1 to 1,000 (ranked
        // by counting from 1,000 keys on). Sizes either side of where a
        // position needs a second byte.
        let kinds: [(&str, &mut dyn FnMut(u64) -> u64); 5] = [
            ("few", &mut |r| (r % 7) << 40 | (r % 3)),
            ("wide", &mut |r| (r % 5) << 62 | (r % 3)),
            ("one", &mut |_| 42),
            ("floats", &mut |r| ascending_key((r % 1000) as f64 / 7.0)),
            ("a scale", &mut |r| ascending_key((1 + r % 1000) as f64)),
        ];
        let mut buffers = SortBuffers::default();
        for (kind, make) in kinds {
            for n in [0, 1, 2, 255, 256, 257, 1000, 70_000] {
                let keys: Vec<u64> = (0..n).map(|_| make(next())).collect();
                buffers.clear();
                buffers.extend(keys.iter().copied());
                buffers.sort();
                let mut sorted = Vec::new();
                buffers.for_each_sorted(|p| sorted.push(p));
                let mut expected: Vec<u32> = (0..n as u32).collect();
                expected.sort_by_key(|&p| keys[p as usize]);
                assert_eq!(sorted, expected, "{kind}, n = {n}");
                // Competition ranks, by counting or by sorting.
                let mut ranks = vec![u32::MAX; n];
                buffers.for_each_rank(|p, rank| ranks[p as usize] = rank);
                let smaller = |key: u64| expected.partition_point(|&p| keys[p as usize] < key);
                let expected: Vec<u32> = keys.iter().map(|&k| smaller(k) as u32).collect();
                assert_eq!(ranks, expected, "{kind}, n = {n}");
            }
        }
    }

    #[test]
    fn scores_on_a_scale_rank_as_any_scores_do() {
        // Whole numbers a short way apart are ranked by counting; the same
        // order moved half a point off whole numbers is ranked by sorting.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for (n, spread, base) in [(7_300, 1000, 1.0), (50, 20_000, -9.0), (3_000, 5, 0.0)] {
            let whole: Vec<f64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    base + (x % spread) as f64
                })
                .collect();
            let halves: Vec<f64> = whole.iter().map(|v| v + 0.5).collect();
            for order in [ScoreOrder::LowerIsBetter, ScoreOrder::HigherIsBetter] {
                let counted = ranked(&whole, order, 3);
                let sorted = ranked(&halves, order, 3);
                assert_eq!(counted, sorted, "n = {n}, spread {spread}");
            }
        }
        let (ranks, _) = ranked(&[-0.0, 0.0, -1.0, 2.0], ScoreOrder::HigherIsBetter, 1);
        assert_eq!(ranks, [1, 1, 3, 0]);
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
