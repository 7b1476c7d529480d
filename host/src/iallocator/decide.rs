//! One pick, the only thing an IAllocator request asks of a policy: where
//! one VM goes among some candidate nodes of a snapshot, and why the
//! others were refused. Offline the decision is
//! `placement::over_snapshot` with a policy assembled in process
//! ([`Local`]); with a server it is the same call behind
//! `POST /api/v1/clusters/{id}/schedule` with inline hosts
//! (`super::remote`). Either way the policy decides exactly as for the
//! JSON API; this module only adapts the answer.

use std::collections::BTreeMap;

use crate::pipeline::{ParamValues, Policy};
use crate::placement::{PlaceError, PlaceRequest, over_snapshot};
use crate::snapshot::{Snapshot, VmSpec};

/// The outcome of one pick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pick {
    /// The node chosen; `None` when every candidate was refused.
    pub chosen: Option<String>,
    /// The number of nodes each filter unit refused, by unit name.
    pub refused: BTreeMap<String, usize>,
}

/// Why a pick could not be made at all (not: no node fits).
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error(transparent)]
    Place(#[from] PlaceError),
    #[error("the server: {0}")]
    Remote(String),
}

/// Makes picks.
pub trait Decide {
    /// Where `vm` goes among `candidates` (node names of `snapshot`).
    fn pick(
        &self,
        snapshot: &Snapshot,
        vm: &VmSpec,
        candidates: &[String],
    ) -> Result<Pick, DecideError>;
}

/// Decides in this process with a policy assembled from the units built
/// into the binary (`super::policy`).
pub struct Local {
    pub policy: Policy,
    pub params: ParamValues,
}

impl Decide for Local {
    fn pick(
        &self,
        snapshot: &Snapshot,
        vm: &VmSpec,
        candidates: &[String],
    ) -> Result<Pick, DecideError> {
        let request = PlaceRequest {
            vm: vm.clone(),
            candidates: Some(candidates.to_vec()),
            ..PlaceRequest::default()
        };
        let outcome = over_snapshot(snapshot, &request, &self.policy, &self.params)?;
        let mut refused = BTreeMap::new();
        let mut chosen = None;
        for pick in &outcome.picks {
            for filter in &pick.decision.explain.filters {
                let hosts: usize = filter.rejected.iter().map(|r| r.hosts.len()).sum();
                if hosts > 0 {
                    *refused.entry(filter.unit.clone()).or_default() += hosts;
                }
            }
            chosen = chosen.or_else(|| pick.host_id.clone());
        }
        Ok(Pick { chosen, refused })
    }
}
