//! `ScriptedHigher`: the scripted test unit with higher-is-better scores.
//! Not shipped. The logic is `sandpiper-test-scripted`'s own file, included
//! here, so the two cannot drift apart.

#[path = "../../scripted/src/scripted.rs"]
pub mod scripted;

use sandpiper_guest::model::ScoreOrder;

pub use scripted::{METRIC, REJECT_METRIC, REJECTION_REASON, Scripted};

/// The higher-is-better flavour.
pub struct HigherIsBetter;

impl scripted::Flavour for HigherIsBetter {
    const NAME: &'static str = "ScriptedHigher";
    const ORDER: ScoreOrder = ScoreOrder::HigherIsBetter;
}

/// The unit this crate exports.
pub type ScriptedUnit = Scripted<HigherIsBetter>;

sandpiper_guest::export_unit!(ScriptedUnit: filter, score);
