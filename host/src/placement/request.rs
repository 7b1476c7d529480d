//! The one schedule request: the body of `POST
//! /api/v1/clusters/{id}/schedule`, parsed once, whichever source its
//! hosts come from.
//!
//! The hosts come inline (`hosts`, and `vms` on them: a stateless decision
//! over exactly that snapshot, the way oVirt's external scheduler is asked)
//! or, when `hosts` is absent, from the inventory Sandpiper holds for the
//! cluster, where the decision records a claim per instance placed. The
//! fields that only make sense with claims (`count`, `mode`, `exclude`,
//! ...) are refused with inline hosts by [`PlaceRequest::take_source`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::arrow_snapshot::{ArrowHosts, ArrowVms, LastBody};
use crate::inputs::{CheckedHosts, CheckedVms};
use crate::pipeline::{ParamValues, Policy};
use crate::snapshot::{Cluster, HintValue, Host, RunningVm, SnapshotError, VmSpec};

/// How a multi-instance request treats an instance that cannot be placed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Every instance placed, or none (no claim is kept).
    #[default]
    AllOrNothing,
    /// The instances placed before the first failure keep their claims.
    BestEffort,
}

/// How much of each decision's explain record an answer carries: a
/// bounded summary (what the log keeps), or the full record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExplainDetail {
    /// The default over the held inventory.
    #[default]
    Summary,
    /// The default over inline hosts.
    Full,
}

/// A placement request: the VM, where the hosts come from, and (over the
/// held inventory) how many instances to place and how.
///
/// The OpenAPI document describes it as `ScheduleBody` with the fields of
/// the inline form; the fields marked "held inventory only" are described
/// in the operation's text, as they always were (documenting them in the
/// schema would change the published contract).
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ScheduleBody, description = "A placement request.")]
pub struct PlaceRequest {
    /// The VM to place (the snapshot format's VM: only `id` matters for
    /// the log; everything else has a default).
    pub vm: VmSpec,
    /// Every host of the cluster the VM could go to, in the snapshot format.
    #[serde(default, deserialize_with = "crate::snapshot::list_not_null")]
    #[schema(value_type = Vec<Host>)]
    pub hosts: Option<CheckedHosts>,
    /// The VMs running (or pending) on those hosts.
    #[serde(default, deserialize_with = "crate::snapshot::list_not_null")]
    #[schema(value_type = Vec<RunningVm>)]
    pub vms: Option<CheckedVms>,
    /// Scheduler hints (Nova's `same_host`, ...): a string or a list each.
    #[serde(default)]
    pub hints: BTreeMap<String, HintValue>,
    /// Host ids the VM may go to, in order of preference among equals;
    /// every host when absent.
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
    /// Held inventory only: host ids the VM must not go to (a blacklist);
    /// ids not in the inventory are ignored.
    #[serde(default)]
    #[schema(ignore)]
    pub exclude: Vec<String>,
    /// Held inventory only: instances to place (Nova's
    /// `min_count`/`max_count`), 1 to [`super::MAX_INSTANCES_PER_REQUEST`].
    #[serde(default = "one")]
    #[schema(ignore)]
    pub count: u32,
    /// Held inventory only: one id per instance; when empty, a single
    /// instance is `vm.id` and several are `vm.id` with `-0`, `-1`, ...
    /// appended. Each instance's id keys its claim.
    #[serde(default)]
    #[schema(ignore)]
    pub instance_ids: Vec<String>,
    /// Held inventory only: `all_or_nothing` (the default) or `best_effort`.
    #[serde(default)]
    #[schema(ignore)]
    pub mode: Mode,
    /// Held inventory only: filters (unit names) that run for the first
    /// instance only.
    #[serde(default)]
    #[schema(ignore)]
    pub once_per_request: BTreeSet<String>,
    /// Held inventory only: consider every host instead of the rotating
    /// sample.
    #[serde(default)]
    #[schema(ignore)]
    pub exhaustive: bool,
    /// The explain record the answer carries: `summary` (bounded: the
    /// best hosts and the most common reasons) or `full` (every host's
    /// verdict and score). Over the held inventory `summary` is the
    /// default; over inline hosts `full` is, as it always was.
    #[serde(default)]
    pub explain: Option<ExplainDetail>,
}

fn one() -> u32 {
    1
}

/// Where a request's hosts come from.
#[derive(Clone, Debug)]
pub enum HostsSource {
    /// The hosts and the VMs on them sent with the request.
    Inline(InlineHosts),
    /// The inventory Sandpiper holds for the cluster, with its claims.
    Held,
}

/// Hosts and the VMs on them sent with a request, read but not yet built:
/// JSON lists (checked as they were read) or a compact body's Arrow
/// columns (`crate::arrow_snapshot`): what [`HostsSource::Inline`] carries.
#[derive(Clone, Debug)]
pub enum InlineHosts {
    Json {
        hosts: CheckedHosts,
        vms: CheckedVms,
    },
    Arrow {
        hosts: ArrowHosts,
        vms: ArrowVms,
    },
}

impl InlineHosts {
    /// The hosts' and VMs' columns, or the first refusal (the hosts'
    /// before the VMs').
    pub fn build(self) -> Result<Cluster, SnapshotError> {
        match self {
            InlineHosts::Json { hosts, vms } => hosts.build(vms),
            InlineHosts::Arrow { hosts, vms } => hosts.build(&vms),
        }
    }

    /// Whether these are a compact body's columns, which
    /// [`InlineHosts::build_reusing`] keeps for the next body to share.
    pub fn is_compact(&self) -> bool {
        matches!(self, InlineHosts::Arrow { .. })
    }

    /// [`InlineHosts::build`], a compact body's columns built again only
    /// where they differ from those of `last` (the cluster's last compact
    /// body, which this one then replaces).
    pub fn build_reusing(
        self,
        last: Option<&mut Option<LastBody>>,
    ) -> Result<Cluster, SnapshotError> {
        match (self, last) {
            (InlineHosts::Arrow { hosts, vms }, Some(last)) => hosts.build_reusing(vms, last),
            (inline, _) => inline.build(),
        }
    }
}

/// A field the request's hosts source does not take: `field` is its name
/// in the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown field `{field}`: {reason}")]
pub struct SourceMismatch {
    pub field: &'static str,
    pub reason: &'static str,
}

/// Refuses a compact body's `request` part (a schedule's or a balancing
/// request's) that carries `hosts` or `vms`, as the two flags say: its
/// hosts and VMs come as the body's own parts.
pub fn check_compact_request(hosts: bool, vms: bool) -> Result<(), SourceMismatch> {
    for (field, given) in [("hosts", hosts), ("vms", vms)] {
        if given {
            return Err(SourceMismatch {
                field,
                reason: "a compact body sends its hosts and VMs as its `hosts` and `vms` \
                         parts, not in its `request` part",
            });
        }
    }
    Ok(())
}

impl PlaceRequest {
    /// Takes the hosts source out of the request (leaving `hosts` and
    /// `vms` empty), after checking that every field given fits it: `vms`
    /// come with inline hosts only, and the claim options with the held
    /// inventory only.
    pub fn take_source(&mut self) -> Result<HostsSource, SourceMismatch> {
        match self.hosts.take() {
            Some(hosts) => {
                let vms = self.vms.take().unwrap_or_default();
                self.inline(InlineHosts::Json { hosts, vms })
            }
            None if self.vms.is_some() => Err(SourceMismatch {
                field: "vms",
                reason: "VMs come with their hosts: without `hosts`, the inventory held for \
                         the cluster (and its VMs) is used",
            }),
            None => Ok(HostsSource::Held),
        }
    }

    /// The hosts source of a compact body, whose hosts and VMs came as its
    /// Arrow parts: the request part carries neither, and only the fields
    /// inline hosts take.
    pub fn compact_source(
        &self,
        hosts: ArrowHosts,
        vms: ArrowVms,
    ) -> Result<HostsSource, SourceMismatch> {
        check_compact_request(self.hosts.is_some(), self.vms.is_some())?;
        self.inline(InlineHosts::Arrow { hosts, vms })
    }

    /// `inline` as the source, if every field given fits inline hosts.
    fn inline(&self, inline: InlineHosts) -> Result<HostsSource, SourceMismatch> {
        const REASON: &str = "it applies to the held inventory only, and the request \
                              sends its hosts inline";
        let held_only = [
            ("exclude", !self.exclude.is_empty()),
            ("count", self.count > 1),
            ("instance_ids", !self.instance_ids.is_empty()),
            ("mode", self.mode != Mode::default()),
            ("once_per_request", !self.once_per_request.is_empty()),
            ("exhaustive", self.exhaustive),
        ];
        match held_only.iter().find(|(_, given)| *given) {
            Some(&(field, _)) => Err(SourceMismatch {
                field,
                reason: REASON,
            }),
            None => Ok(HostsSource::Inline(inline)),
        }
    }
}

/// A placement to make: the request, where its hosts come from, and the
/// policy to decide with.
pub struct PlaceJob {
    /// The cluster's cached policy, shared.
    pub policy: Arc<Policy>,
    /// The cluster's parameter overrides.
    pub params: ParamValues,
    /// The request, its hosts source already taken out
    /// ([`PlaceRequest::take_source`]).
    pub request: PlaceRequest,
    pub source: HostsSource,
    pub dry_run: bool,
    pub decision_id: Uuid,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> PlaceRequest {
        serde_json::from_str(body).expect("a valid request")
    }

    #[test]
    fn hosts_decide_the_source_and_the_fields_follow_it() {
        let mut inline = parse(r#"{"vm": {"id": "v"}, "hosts": [{"id": "h"}], "vms": []}"#);
        assert!(matches!(
            inline.take_source(),
            Ok(HostsSource::Inline(InlineHosts::Json { hosts, .. })) if hosts.len() == 1
        ));
        assert!(inline.hosts.is_none() && inline.vms.is_none());

        let mut held = parse(r#"{"vm": {"id": "v"}, "count": 3, "mode": "best_effort"}"#);
        assert!(matches!(held.take_source(), Ok(HostsSource::Held)));
        assert_eq!((held.count, held.mode), (3, Mode::BestEffort));

        // The claim options need the held inventory, VMs need hosts.
        let mut both = parse(r#"{"vm": {}, "hosts": [], "exclude": ["h"]}"#);
        assert_eq!(both.take_source().err().map(|e| e.field), Some("exclude"));
        let mut vms = parse(r#"{"vm": {}, "vms": []}"#);
        assert_eq!(vms.take_source().err().map(|e| e.field), Some("vms"));
        // Unknown fields stay unknown.
        assert!(serde_json::from_str::<PlaceRequest>(r#"{"vm": {}, "colour": 1}"#).is_err());
    }
}
