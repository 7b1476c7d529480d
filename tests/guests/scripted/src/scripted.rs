//! The scripted unit's logic, shared by `sandpiper-test-scripted` and
//! `sandpiper-test-scripted-higher` (which includes this file), which differ
//! only in their name and score order.
//!
//! Tests script it through the hosts' named metrics: every host whose
//! metric `reject` is above 0 is rejected with [`REJECTION_REASON`], and
//! each candidate scores its metric named by the parameter `metric`
//! (default `score`); a host without that metric scores 0.

use std::marker::PhantomData;

use sandpiper_guest::prelude::*;

/// Parameter: the named metric to score with.
pub const METRIC: &str = "metric";
/// The named metric that, above 0, makes the filter reject a host.
pub const REJECT_METRIC: &str = "reject";
/// The reason every scripted rejection gives.
pub const REJECTION_REASON: &str = "scripted rejection";

/// What distinguishes the two scripted units.
pub trait Flavour {
    const NAME: &'static str;
    const ORDER: ScoreOrder;
}

/// The scripted unit, in `F`'s flavour.
pub struct Scripted<F>(PhantomData<F>);

impl<F: Flavour> Unit for Scripted<F> {
    fn info() -> UnitInfo {
        UnitInfo::new(
            F::NAME,
            "Test unit scripted through named metrics: rejects hosts whose `reject` \
             metric is above 0 and scores each host with the metric named by `metric`.",
        )
        .with_param(ParamSpec::new(
            METRIC,
            "The named metric each host scores.",
            "score",
            "^[A-Za-z0-9_.:-]+$",
        ))
        .with_score_order(F::ORDER)
    }
}

impl<F: Flavour> Filter for Scripted<F> {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let reject = cx.hosts().named_metric(REJECT_METRIC);
        let mut rejections = Rejections::new();
        for &host in candidates {
            if reject.get(host as usize).is_some_and(|&value| value > 0.0) {
                rejections.reject(host, REJECTION_REASON);
            }
        }
        rejections.into_vec()
    }
}

impl<F: Flavour> Score for Scripted<F> {
    fn score(cx: &Context<'_>, candidates: &[u32]) -> Scores {
        let metric = cx.params().str(METRIC).unwrap_or("score");
        let column = cx.hosts().named_metric(metric);
        let values = candidates
            .iter()
            .map(|&host| {
                column
                    .get(host as usize)
                    .copied()
                    .filter(|value| value.is_finite())
                    .unwrap_or(0.0)
            })
            .collect();
        Scores::new(values)
    }
}
