//! Explain records: what every unit of a decision did and why the winner
//! won, for operators, for the API and for golden tests.
//!
//! The record is kept as the pipeline produced it (host indices, one vector
//! per score unit) so that building it costs no per-host allocation on the
//! decision path; host ids are looked up only when it is serialised. The
//! serialised field order is the declaration order below and is part of the
//! golden files, so change it deliberately. A host whose id is empty in the
//! snapshot is written as `#<index>`.

use std::sync::Arc;

use sandpiper_model::Inventory;
use sandpiper_model::{HostText, Migration, Rejection, ScoreOrder, VmText};
use serde::{Serialize, Serializer};

use super::policy::{Combination, OnFailure, Position};
use crate::unit::{Failed, Usage};

/// How ties between equal totals are broken, as written in every record:
/// the candidate that came first in the request's candidate order wins.
pub const TIE_BREAK_RULE: &str = "candidate_order";

/// A unit call that failed and was skipped (a fail-open filter or any score
/// unit).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailureRecord {
    /// `UnitError::code`, stable for machines.
    pub code: &'static str,
    /// The error as a sentence, for people.
    pub message: String,
}

impl From<&Failed> for FailureRecord {
    fn from(failed: &Failed) -> Self {
        FailureRecord {
            code: failed.error.code(),
            message: failed.error.to_string(),
        }
    }
}

/// What one filter did.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterRecord {
    pub unit: String,
    pub position: Position,
    pub on_failure: OnFailure,
    /// Candidates the filter was given.
    pub input: usize,
    /// Rejected candidates (host indices) grouped by reason, as the unit
    /// returned them (groups with no hosts dropped): a reason with figures
    /// is a template, written out by [`FilterRecord::sentences`] only when
    /// a reader shows it.
    pub rejected: Vec<Rejection>,
    /// Candidates left after the filter.
    pub survivors: usize,
    pub usage: Usage,
    /// Set when the filter failed and, being fail-open, was skipped.
    pub failure: Option<FailureRecord>,
    /// Set when the filter was not called because it declared it has
    /// nothing to say about the request (`applies-to`): why.
    pub skipped: Option<String>,
    /// Candidates whose verdict was reused from an earlier decision (a
    /// `per-host` unit, the host and the request unchanged), not asked for.
    pub reused: usize,
}

impl FilterRecord {
    /// The rejected candidates grouped by sentence, templates written out.
    pub fn sentences(&self) -> Vec<Rejection> {
        sandpiper_model::reason::into_sentences(self.rejected.clone())
    }
}

/// Where a score unit stands each candidate, by combination mode.
#[derive(Clone, Debug, PartialEq)]
pub enum Standing {
    /// The unit was not combined (factor 0 or failed).
    None,
    /// Competition rank, 0-based, per candidate (rank mode).
    Ranks(Vec<u32>),
    /// Value in [0, 1], 1 best, per candidate (normalised mode).
    Normalised(Vec<f64>),
}

impl Standing {
    /// Candidates it stands, 0 for `None`.
    pub fn len(&self) -> usize {
        match self {
            Standing::None => 0,
            Standing::Ranks(ranks) => ranks.len(),
            Standing::Normalised(shares) => shares.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one score unit did. The per-candidate vectors follow
/// `Explain::scored`.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreRecord {
    pub unit: String,
    pub factor: u32,
    pub score_order: ScoreOrder,
    /// False when the factor is 0 (the unit cannot change the outcome) or
    /// the unit was skipped (`skipped`): it was not run.
    pub called: bool,
    pub usage: Option<Usage>,
    /// Set when the unit failed (trap, limit, invalid output) and was skipped.
    pub failure: Option<FailureRecord>,
    pub floor: Option<f64>,
    pub ceiling: Option<f64>,
    /// The unit's raw scores; empty when it was not called.
    pub raw: Vec<f64>,
    pub standing: Standing,
    /// Set when the unit was not called because it declared it has nothing
    /// to say about the request (`applies-to`): why. Its standing is the
    /// answer it promised, the same value for every candidate.
    pub skipped: Option<String>,
    /// Candidates whose score was reused from an earlier decision (a
    /// `per-host` unit, the host and the request unchanged), not asked for.
    pub reused: usize,
}

impl ScoreRecord {
    /// What the unit added to the total of candidate `i` (the `i`th of
    /// `Explain::scored`). Derived rather than stored, to keep one vector
    /// per unit off the decision path.
    pub fn points(&self, i: usize) -> f64 {
        let factor = f64::from(self.factor);
        match &self.standing {
            Standing::None => 0.0,
            Standing::Ranks(ranks) => ranks.get(i).map_or(0.0, |&r| {
                super::combine::rank_points(ranks.len(), r, factor)
            }),
            Standing::Normalised(shares) => shares.get(i).map_or(0.0, |&s| s * factor),
        }
    }
}

/// How a decision ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every candidate was rejected; the filter records say why.
    NoHost,
    /// One candidate survived the filters and was taken without scoring
    /// (oVirt does the same).
    SingleSurvivor { host: u32 },
    /// Two or more survived and were scored; `tied_with` lists the other
    /// candidates whose total equals the winner's, which lost only on the
    /// tie-break.
    Weighed { winner: u32, tied_with: Vec<u32> },
}

impl Outcome {
    pub fn winner(&self) -> Option<u32> {
        match self {
            Outcome::NoHost => None,
            Outcome::SingleSurvivor { host } => Some(*host),
            Outcome::Weighed { winner, .. } => Some(*winner),
        }
    }
}

/// Everything a decision did. Serialises with host ids; see the module doc.
#[derive(Clone, Debug)]
pub struct Explain {
    pub combination: Combination,
    /// Candidates the request offered.
    pub candidates: usize,
    /// The filters that ran, in order (a filter after the one that left no
    /// candidate does not run).
    pub filters: Vec<FilterRecord>,
    /// The candidates that were scored, in candidate order; empty unless two
    /// or more survived.
    pub scored: Vec<u32>,
    pub scores: Vec<ScoreRecord>,
    /// Each scored candidate's total, following `scored`.
    pub totals: Vec<f64>,
    pub outcome: Outcome,
    /// Which of the cluster's hosts the decision considered, when it was
    /// not all of them by default: "considered 500 of 10000 hosts (sampled
    /// window ...)". Set by the caller that chose the hosts (a decision over
    /// a held inventory); `None` for a decision over the hosts it was given.
    pub considered: Option<String>,
    /// The specific cells, CPUs, pages and devices the placement took on
    /// the winner, for a VM with hardware needs (set by the placement
    /// service's claim-time fit, `placement::place::fit`).
    pub hardware: Option<Arc<crate::hardware::claim::HardwareClaim>>,
    /// The snapshot, to name hosts when serialising.
    pub(crate) inventory: SnapshotRef,
}

/// The snapshot a record refers to. Its `Debug` does not print the
/// snapshot, which can hold tens of thousands of hosts.
#[derive(Clone)]
pub(crate) struct SnapshotRef(pub(crate) Arc<Inventory>);

impl std::fmt::Debug for SnapshotRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<snapshot of {} hosts>", self.0.host_count())
    }
}

impl Explain {
    /// Every rejection of the decision as (unit, sentence, host indices),
    /// in filter order: the "why no host" answer. Writes every sentence.
    pub fn rejections(&self) -> Vec<(&str, String, Vec<u32>)> {
        self.filters
            .iter()
            .flat_map(|f| {
                f.sentences()
                    .into_iter()
                    .map(move |r| (f.unit.as_str(), r.reason, r.hosts))
            })
            .collect()
    }

    /// The id of host `index` as the record writes it.
    pub fn host_id(&self, index: u32) -> String {
        HostId::new(&self.inventory.0, index).to_string()
    }
}

/// What a balance run did.
#[derive(Clone, Debug)]
pub struct BalanceExplain {
    pub unit: String,
    pub usage: Usage,
    /// The unit's proposal, as returned (after validation).
    pub proposal: Option<Migration>,
    /// Host the proposed VM runs on.
    pub source: Option<u32>,
    /// The decision over the destinations plus the source host.
    pub schedule: Option<Explain>,
    pub(crate) inventory: SnapshotRef,
}

// ---- serialisation: borrowed views that name hosts by id ----

/// A host written as its id.
struct HostId<'a> {
    ids: &'a sandpiper_model::Interned,
    index: u32,
}

impl<'a> HostId<'a> {
    fn new(inventory: &'a Inventory, index: u32) -> Self {
        HostId {
            ids: inventory.host_text(HostText::Id),
            index,
        }
    }
}

impl std::fmt::Display for HostId<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ids.get(self.index as usize) {
            "" => write!(f, "#{}", self.index),
            id => f.write_str(id),
        }
    }
}

impl Serialize for HostId<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A list of hosts written as ids.
struct HostIds<'a> {
    inventory: &'a Inventory,
    hosts: &'a [u32],
}

impl Serialize for HostIds<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.hosts.iter().map(|&h| HostId::new(self.inventory, h)))
    }
}

#[derive(Serialize)]
struct ExplainView<'a> {
    combination: Combination,
    candidates: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    considered: Option<&'a str>,
    filters: Vec<FilterView<'a>>,
    scores: Vec<ScoreView<'a>>,
    totals: Vec<TotalView<'a>>,
    outcome: &'static str,
    winner: Option<HostId<'a>>,
    tie_break: &'static str,
    tied_with: HostIds<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hardware: Option<&'a crate::hardware::claim::HardwareClaim>,
}

#[derive(Serialize)]
struct FilterView<'a> {
    unit: &'a str,
    position: Position,
    on_failure: OnFailure,
    input: usize,
    rejected: Vec<RejectionView<'a>>,
    survivors: usize,
    usage: &'a Usage,
    failure: &'a Option<FailureRecord>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: &'a Option<String>,
    #[serde(skip_serializing_if = "nothing_reused")]
    reused: usize,
}

/// Whether a record reused no answer: its `reused` count is then left
/// out, so records of decisions that reuse nothing read as before.
pub(crate) fn nothing_reused(reused: &usize) -> bool {
    *reused == 0
}

#[derive(Serialize)]
struct RejectionView<'a> {
    reason: &'a str,
    hosts: HostIds<'a>,
}

#[derive(Serialize)]
struct ScoreView<'a> {
    unit: &'a str,
    factor: u32,
    score_order: ScoreOrderName,
    called: bool,
    usage: &'a Option<Usage>,
    failure: &'a Option<FailureRecord>,
    floor: Option<f64>,
    ceiling: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: &'a Option<String>,
    #[serde(skip_serializing_if = "nothing_reused")]
    reused: usize,
    hosts: Vec<ScoredHostView<'a>>,
}

#[derive(Serialize)]
struct ScoredHostView<'a> {
    host: HostId<'a>,
    /// `None` for a skipped unit, which gave no raw score.
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rank: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    normalised: Option<f64>,
    points: f64,
}

#[derive(Serialize)]
struct TotalView<'a> {
    host: HostId<'a>,
    total: f64,
}

/// `ScoreOrder` as snake_case, the explain record's spelling (the model's
/// serde spelling is the WIT's kebab-case).
struct ScoreOrderName(ScoreOrder);

impl Serialize for ScoreOrderName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self.0 {
            ScoreOrder::LowerIsBetter => "lower_is_better",
            ScoreOrder::HigherIsBetter => "higher_is_better",
        })
    }
}

impl Serialize for Explain {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inv = &*self.inventory.0;
        let host = |index: u32| HostId::new(inv, index);
        let sentences: Vec<Vec<Rejection>> =
            self.filters.iter().map(FilterRecord::sentences).collect();
        let filters = self
            .filters
            .iter()
            .zip(&sentences)
            .map(|(f, sentences)| FilterView {
                unit: &f.unit,
                position: f.position,
                on_failure: f.on_failure,
                input: f.input,
                rejected: sentences
                    .iter()
                    .map(|r| RejectionView {
                        reason: &r.reason,
                        hosts: HostIds {
                            inventory: inv,
                            hosts: &r.hosts,
                        },
                    })
                    .collect(),
                survivors: f.survivors,
                usage: &f.usage,
                failure: &f.failure,
                skipped: &f.skipped,
                reused: f.reused,
            })
            .collect();
        let scores = self
            .scores
            .iter()
            .map(|u| ScoreView {
                unit: &u.unit,
                factor: u.factor,
                score_order: ScoreOrderName(u.score_order),
                called: u.called,
                usage: &u.usage,
                failure: &u.failure,
                floor: u.floor,
                ceiling: u.ceiling,
                skipped: &u.skipped,
                reused: u.reused,
                hosts: (0..u.raw.len().max(u.standing.len()))
                    .map(|i| ScoredHostView {
                        host: host(self.scored.get(i).copied().unwrap_or(u32::MAX)),
                        raw: u.raw.get(i).copied(),
                        rank: match &u.standing {
                            Standing::Ranks(r) => r.get(i).copied(),
                            _ => None,
                        },
                        normalised: match &u.standing {
                            Standing::Normalised(n) => n.get(i).copied(),
                            _ => None,
                        },
                        points: u.points(i),
                    })
                    .collect(),
            })
            .collect();
        let totals = self
            .scored
            .iter()
            .zip(&self.totals)
            .map(|(&h, &total)| TotalView {
                host: host(h),
                total,
            })
            .collect();
        let (outcome, tied_with): (_, &[u32]) = match &self.outcome {
            Outcome::NoHost => ("no_host", &[]),
            Outcome::SingleSurvivor { .. } => ("single_survivor", &[]),
            Outcome::Weighed { tied_with, .. } => ("weighed", tied_with),
        };
        ExplainView {
            combination: self.combination,
            candidates: self.candidates,
            considered: self.considered.as_deref(),
            filters,
            scores,
            totals,
            outcome,
            winner: self.outcome.winner().map(host),
            tie_break: TIE_BREAK_RULE,
            tied_with: HostIds {
                inventory: inv,
                hosts: tied_with,
            },
            hardware: self.hardware.as_deref(),
        }
        .serialize(s)
    }
}

#[derive(Serialize)]
struct BalanceView<'a> {
    unit: &'a str,
    usage: &'a Usage,
    proposal: Option<ProposalView<'a>>,
    source: Option<HostId<'a>>,
    outcome: &'static str,
    destination: Option<HostId<'a>>,
    schedule: &'a Option<Explain>,
}

#[derive(Serialize)]
struct ProposalView<'a> {
    vm: VmId<'a>,
    destinations: HostIds<'a>,
}

/// A running VM written as its id (`#<index>` when empty).
struct VmId<'a> {
    inventory: &'a Inventory,
    index: u32,
}

impl Serialize for VmId<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.inventory.vm_text(VmText::Id).get(self.index as usize) {
            "" => s.collect_str(&format_args!("#{}", self.index)),
            id => s.serialize_str(id),
        }
    }
}

impl BalanceExplain {
    /// The host the VM should move to, when the proposal won.
    pub fn destination(&self) -> Option<u32> {
        let winner = self.schedule.as_ref()?.outcome.winner()?;
        (Some(winner) != self.source).then_some(winner)
    }

    /// `balanced` (no proposal), `migrate`, `stay` (the source host won) or
    /// `nowhere` (every candidate was rejected).
    pub fn outcome(&self) -> &'static str {
        match (&self.proposal, &self.schedule) {
            (None, _) | (Some(_), None) => "balanced",
            (Some(_), Some(schedule)) => match schedule.outcome.winner() {
                None => "nowhere",
                Some(w) if Some(w) == self.source => "stay",
                Some(_) => "migrate",
            },
        }
    }
}

impl Serialize for BalanceExplain {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inv = &*self.inventory.0;
        BalanceView {
            unit: &self.unit,
            usage: &self.usage,
            proposal: self.proposal.as_ref().map(|m| ProposalView {
                vm: VmId {
                    inventory: inv,
                    index: m.vm,
                },
                destinations: HostIds {
                    inventory: inv,
                    hosts: &m.destinations,
                },
            }),
            source: self.source.map(|h| HostId::new(inv, h)),
            outcome: self.outcome(),
            destination: self.destination().map(|h| HostId::new(inv, h)),
            schedule: &self.schedule,
        }
        .serialize(s)
    }
}
