//! A balancing round, whichever source its hosts come from: the hosts (and
//! VMs) sent inline, or the inventory held for the cluster with every live
//! claim counted as usage and listed as a pending VM of its host, as a
//! schedule decision sees them. The round claims nothing: the engine
//! schedules the migration it decides on.

use std::sync::Arc;

use super::place::{PlaceError, with_candidates};
use super::request::HostsSource;
use crate::pipeline::{self, BalanceDecision, BalanceInput, ParamValues, Policy};
use sandpiper_model::{Inventory, VmText};

/// A balancing round to run.
pub struct BalanceJob {
    /// The cluster's cached policy, shared.
    pub policy: Arc<Policy>,
    /// The cluster's parameter overrides.
    pub params: ParamValues,
    /// Host ids VMs may move between; every host when `None`.
    pub candidates: Option<Vec<String>>,
    pub source: HostsSource,
}

/// A balancing round decided.
#[derive(Debug)]
pub struct Balanced {
    pub decision: BalanceDecision,
    /// The VM the balance unit proposed to move.
    pub vm_id: Option<String>,
    /// Where it should go, when it should move.
    pub destination: Option<String>,
}

/// Why a balancing round could not be decided.
#[derive(Debug, thiserror::Error)]
pub enum BalanceFailure {
    /// The hosts sent inline, or the candidates, cannot be used.
    #[error(transparent)]
    Place(#[from] PlaceError),
    #[error(transparent)]
    Balance(#[from] pipeline::BalanceError),
}

/// Runs the round over `held` (the held inventory and the candidates
/// resolved against it, taken under the cluster's lock) or, for inline
/// hosts, over the job's own snapshot.
pub fn run(
    job: BalanceJob,
    held: Option<(Inventory, Option<Vec<u32>>)>,
) -> Result<Balanced, BalanceFailure> {
    let (inventory, candidates) = match (held, job.source) {
        (Some(held), _) => held,
        (None, HostsSource::Inline(inline)) => {
            let cluster = inline.build().map_err(PlaceError::InvalidSnapshot)?;
            let (cluster, candidates) = with_candidates(cluster, job.candidates.as_deref())?;
            (cluster.inventory, candidates)
        }
        (None, HostsSource::Held) => {
            return Err(PlaceError::BadRequest(
                "a balancing round over the held inventory needs its snapshot".to_owned(),
            )
            .into());
        }
    };
    let inventory = Arc::new(inventory);
    let input = BalanceInput {
        candidates,
        params: job.params,
    };
    let decision = pipeline::balance(&job.policy, &inventory, &input)?;
    let vm_id = decision
        .proposal
        .as_ref()
        .map(|m| inventory.vm_text(VmText::Id).get(m.vm as usize).to_owned());
    let destination = decision
        .destination
        .and_then(|h| decision.explain.schedule.as_ref().map(|s| s.host_id(h)));
    Ok(Balanced {
        decision,
        vm_id,
        destination,
    })
}
