//! What a decision request carries besides the schedule request itself
//! (`crate::placement::PlaceRequest`, which the placement layer takes as
//! parsed): the balancing request, the query string, and the parsing of a
//! body once, on the right thread.

use axum::body::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::blocking;
use crate::api::error::ApiError;
use crate::api::extract::parse_json;
use crate::inputs::{CheckedHosts, CheckedVms};
use crate::placement::{Admission, SourceMismatch};
use crate::snapshot::{Host, RunningVm};

/// Bodies up to this size are parsed on the thread that read them: a
/// request over the held inventory is a few hundred bytes and parses in
/// microseconds, less than a hop to the blocking pool costs, while inline
/// hosts (megabytes at 10,000 hosts) are parsed on the blocking pool,
/// never on the threads that accept requests.
pub const PARSE_IN_PLACE_BYTES: usize = 16 * 1024;

/// A balancing request. Without `hosts`, the decision is made over the
/// inventory Sandpiper holds for the cluster, with every live claim
/// counted as usage and its VM listed as a pending VM of its host (as a
/// schedule decision sees it); `vms` then must be absent too.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BalanceBody {
    #[serde(default, deserialize_with = "crate::snapshot::list_not_null")]
    #[schema(value_type = Vec<Host>)]
    pub hosts: Option<CheckedHosts>,
    /// Running VMs of the inline `hosts`; only with them.
    #[serde(default, deserialize_with = "crate::snapshot::list_not_null")]
    #[schema(value_type = Vec<RunningVm>)]
    pub vms: Option<CheckedVms>,
    /// Host ids VMs may move between; every host when absent.
    #[serde(default)]
    pub candidates: Option<Vec<String>>,
}

/// Whether to record the decision, and with which policy.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DecisionQuery {
    /// `true`: decide, but record nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// What-if: decide with this scheduling policy instead of the
    /// cluster's (its units get the cluster's overrides of the parameters
    /// they declare). Only with `dry_run=true`.
    pub policy: Option<Uuid>,
}

/// Parses a decision's body, once, into `T`; a large body is parsed on
/// the blocking pool with one of the cluster's sandbox slots.
pub async fn parse_body<T: DeserializeOwned + Send + 'static>(
    admission: &Admission,
    bytes: Bytes,
) -> Result<T, ApiError> {
    if bytes.len() <= PARSE_IN_PLACE_BYTES {
        parse_json(&bytes)
    } else {
        blocking(admission, move || parse_json(&bytes)).await
    }
}

/// A schedule request whose fields do not fit its hosts source: the field
/// is named, as an unknown field would be.
pub fn source_mismatch(e: SourceMismatch) -> ApiError {
    ApiError::InvalidField {
        field: e.field.to_owned(),
        message: e.to_string(),
    }
}
