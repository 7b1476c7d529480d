//! A decision over the hosts a request sends inline (`hosts` and `vms` in
//! the body, as oVirt's external scheduler is asked): the same pick as over
//! the held inventory, made over exactly that snapshot, with nothing held
//! and nothing claimed.

use std::sync::Arc;

use super::{Pick, PlaceError, PlaceOutcome};
use crate::inputs;
use crate::pipeline::{
    self, Decision, Lender, Means, ParamValues, Policy, Reuse, ReuseCache, ScheduleRequest,
};
use crate::placement::request::PlaceRequest;
use crate::snapshot::{Cluster, HostIndex, Snapshot, hint_pairs};
use sandpiper_model::Inventory;

/// Decides where `request`'s VM goes among `snapshot`'s hosts. One
/// instance, one pick: the options that need held state (`count`, `mode`,
/// `exclude`, ...) were refused with inline hosts when the request's source
/// was taken ([`PlaceRequest::take_source`]).
pub fn over_snapshot(
    snapshot: &Snapshot,
    request: &PlaceRequest,
    policy: &Policy,
    params: &ParamValues,
) -> Result<PlaceOutcome, PlaceError> {
    let cluster = inputs::build_checked(snapshot).map_err(PlaceError::InvalidSnapshot)?;
    over_cluster(cluster, request, policy, params, None, None)
}

/// What an inline decision keeps for the next one of its cluster.
pub struct InlineReuse<'a> {
    /// Per-host units' answers, reused for the hosts sent again unchanged
    /// (known by their content, [`ReuseCache::content_stamps`]).
    pub cache: &'a mut ReuseCache,
    /// Whether the snapshot's columns outlive the decision, kept for the
    /// next body to share (a compact body's, `arrow_snapshot::LastBody`):
    /// only then are their fingerprint shares worth keeping.
    pub columns_kept: bool,
}

/// [`over_snapshot`] over hosts already checked and built: an inline
/// body's, built as they were read (`inputs::CheckedHosts`). `cores` lends
/// the decision more cores (`pipeline::parallel`); `reuse` keeps per-host
/// units' answers from one inline decision to the next.
pub fn over_cluster(
    cluster: Cluster,
    request: &PlaceRequest,
    policy: &Policy,
    params: &ParamValues,
    cores: Option<&dyn Lender>,
    mut reuse: Option<InlineReuse<'_>>,
) -> Result<PlaceOutcome, PlaceError> {
    let (cluster, candidates) = with_candidates(cluster, request.candidates.as_deref())?;
    let inventory = Arc::new(cluster.inventory);
    let stamps = reuse
        .as_mut()
        .map(|kept| kept.cache.content_stamps(&inventory, kept.columns_kept));
    let means = Means {
        reuse: reuse.zip(stamps.as_ref()).map(|(kept, stamps)| Reuse {
            cache: kept.cache,
            view: (0, stamps.by_host().len()),
            stamps: stamps.stamps(),
        }),
        cores,
    };
    let mut decision = pick_over(
        &inventory,
        &cluster.hosts,
        candidates,
        request,
        policy,
        params,
        means,
    )?;
    // The same claim-time fit as over the held inventory, so the answer
    // says which cells, CPUs and devices the VM would take; nothing is held.
    let hardware = match &request.vm.hardware {
        None => None,
        Some(_) => {
            let vm = inputs::to_vm_checked(&request.vm, &cluster.hosts, "vm")
                .map_err(PlaceError::InvalidSnapshot)?;
            super::fit::claim_hardware(&inventory, &vm, &mut decision).map(Arc::new)
        }
    };
    let host_id = decision.chosen.map(|h| decision.explain.host_id(h));
    Ok(PlaceOutcome {
        complete: host_id.is_some(),
        picks: vec![Pick {
            vm_id: request.vm.id.clone(),
            host_id,
            decision,
            hardware,
        }],
        not_tried: Vec::new(),
        claims: Vec::new(),
        pending_could_fit: false,
        sample: None,
    })
}

/// One pick of `request`'s VM among `candidates` (host indices; every
/// host when `None`) of a snapshot already built, claiming nothing: the
/// decision [`over_snapshot`] makes, and the one the kube-scheduler
/// extender makes over the held inventory's snapshot
/// (`PlacementService::held_view`). `hosts` resolves the host ids the VM
/// names (its current host, its groups' hosts).
pub fn pick_over(
    inventory: &Arc<Inventory>,
    hosts: &HostIndex,
    candidates: Option<Vec<u32>>,
    request: &PlaceRequest,
    policy: &Policy,
    params: &ParamValues,
    means: Means<'_>,
) -> Result<Decision, PlaceError> {
    let vm =
        inputs::to_vm_checked(&request.vm, hosts, "vm").map_err(PlaceError::InvalidSnapshot)?;
    let pick = ScheduleRequest {
        vm,
        hints: hint_pairs(&request.hints),
        candidates,
        params: params.clone(),
    };
    pipeline::schedule_with(policy, inventory, &pick, means).map_err(|error| PlaceError::Schedule {
        instance: request.vm.id.clone(),
        error: Box::new(error),
    })
}

/// A cluster built from hosts sent inline, and the candidate ids resolved
/// against it; for a schedule decision and a balancing round alike.
pub fn with_candidates(
    cluster: Cluster,
    candidates: Option<&[String]>,
) -> Result<(Cluster, Option<Vec<u32>>), PlaceError> {
    let candidates = candidates
        .map(|ids| cluster.hosts.resolve_all(ids, "candidates"))
        .transpose()
        .map_err(PlaceError::InvalidSnapshot)?;
    Ok((cluster, candidates))
}
