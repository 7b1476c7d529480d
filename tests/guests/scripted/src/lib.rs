//! `Scripted`: a deterministic unit for pipeline tests, scripted through the
//! hosts' named metrics; lower scores are better. Not shipped. See
//! [`scripted`] for what it does.

pub mod scripted;

use sandpiper_guest::model::ScoreOrder;

pub use scripted::{METRIC, REJECT_METRIC, REJECTION_REASON, Scripted};

/// The lower-is-better flavour.
pub struct LowerIsBetter;

impl scripted::Flavour for LowerIsBetter {
    const NAME: &'static str = "Scripted";
    const ORDER: ScoreOrder = ScoreOrder::LowerIsBetter;
}

/// The unit this crate exports.
pub type ScriptedUnit = Scripted<LowerIsBetter>;

sandpiper_guest::export_unit!(ScriptedUnit: filter, score);
