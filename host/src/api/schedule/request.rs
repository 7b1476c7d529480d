//! What a decision request carries besides the schedule request itself
//! (`crate::placement::PlaceRequest`, which the placement layer takes as
//! parsed): the balancing request, the query string, and the parsing of a
//! body once, on the right thread.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::HeaderMap;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::blocking;
use crate::api::error::ApiError;
use crate::api::extract::{body_bytes, essence, media_type, parse_json};
use crate::api::multipart::{self, MultipartError};
use crate::arrow_snapshot::{ARROW_STREAM, ArrowHosts, ArrowVms, ColumnsError};
use crate::inputs::{CheckedHosts, CheckedVms};
use crate::placement::{
    Admission, HostsSource, InlineHosts, PlaceRequest, SourceMismatch, check_compact_request,
};
use crate::snapshot::{HintValue, Host, RunningVm, VmSpec};

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

/// A compact schedule body, as the OpenAPI document describes it: the
/// parts [`read_compact`] reads (docs/compact-body.md). Only
/// described, never built: the parts are read one by one.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = CompactScheduleBody,
    description = "A schedule request whose inline hosts and VMs are Arrow IPC streams \
                   (docs/compact-body.md)."
)]
#[allow(dead_code)]
pub struct CompactScheduleBody {
    /// The schedule request in JSON (`application/json`), as an inline
    /// one without `hosts` and `vms`.
    request: CompactScheduleRequest,
    /// The hosts: one Arrow IPC stream
    /// (`application/vnd.apache.arrow.stream`), a column per field.
    #[schema(value_type = String, format = Binary)]
    hosts: (),
    /// The VMs running on them, as an Arrow IPC stream; none when absent.
    #[schema(value_type = Option<String>, format = Binary)]
    vms: (),
}

/// A compact body's `request` part, as the OpenAPI document describes
/// it: the fields of an inline schedule request but its hosts and VMs
/// (read as a [`PlaceRequest`], which refuses those).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct CompactScheduleRequest {
    /// The VM to place.
    vm: VmSpec,
    /// Scheduler hints (Nova's `same_host`, ...): a string or a list each.
    #[serde(default)]
    hints: BTreeMap<String, HintValue>,
    /// Host ids the VM may go to, in order of preference among equals;
    /// every host when absent.
    #[serde(default)]
    candidates: Option<Vec<String>>,
}

/// A compact balance body, as the OpenAPI document describes it: the
/// parts [`read_compact_balance`] reads. Only described, never built.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(
    as = CompactBalanceBody,
    description = "A balancing request whose inline hosts and VMs are Arrow IPC streams \
                   (docs/compact-body.md)."
)]
#[allow(dead_code)]
pub struct CompactBalanceBody {
    /// The balancing request in JSON (`application/json`), without
    /// `hosts` and `vms`.
    request: CompactBalanceRequest,
    /// The hosts: one Arrow IPC stream
    /// (`application/vnd.apache.arrow.stream`), a column per field.
    #[schema(value_type = String, format = Binary)]
    hosts: (),
    /// The VMs running on them, as an Arrow IPC stream; none when absent.
    #[schema(value_type = Option<String>, format = Binary)]
    vms: (),
}

/// A compact balance body's `request` part, as the OpenAPI document
/// describes it (read as a [`BalanceBody`], which refuses `hosts` and
/// `vms` there).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct CompactBalanceRequest {
    /// Host ids VMs may move between; every host when absent.
    #[serde(default)]
    candidates: Option<Vec<String>>,
}

/// Whether the body is `multipart/form-data`: a compact body.
pub fn is_multipart(headers: &HeaderMap) -> bool {
    media_type(headers).is_some_and(|essence| essence == "multipart/form-data")
}

/// Reads a compact schedule body (`multipart/form-data`;
/// docs/compact-body.md): its `request` part, a schedule request in JSON
/// without `hosts` and `vms`, and its hosts and VMs (Arrow IPC streams,
/// decoded on the blocking pool). Gives the request and its hosts source.
pub async fn read_compact(
    admission: &Admission,
    request: Request,
) -> Result<(PlaceRequest, HostsSource), ApiError> {
    let parts = CompactParts::read(request, "schedule").await?;
    let request: PlaceRequest = parse_json(&parts.request)?;
    let (hosts, vms) = parts.decode(admission).await?;
    let source = request
        .compact_source(hosts, vms)
        .map_err(source_mismatch)?;
    Ok((request, source))
}

/// Reads a compact balance body: as [`read_compact`], its `request` part
/// a balancing request in JSON without `hosts` and `vms`. Gives the
/// request, whose `hosts` and `vms` are then unset, and its hosts.
pub async fn read_compact_balance(
    admission: &Admission,
    request: Request,
) -> Result<(BalanceBody, InlineHosts), ApiError> {
    let parts = CompactParts::read(request, "balance").await?;
    let body: BalanceBody = parse_json(&parts.request)?;
    check_compact_request(body.hosts.is_some(), body.vms.is_some()).map_err(source_mismatch)?;
    let (hosts, vms) = parts.decode(admission).await?;
    Ok((body, InlineHosts::Arrow { hosts, vms }))
}

/// The parts of a compact body, read but not decoded: `request` (JSON),
/// `hosts` and optional `vms` (Arrow IPC streams).
struct CompactParts {
    request: Bytes,
    hosts: Bytes,
    vms: Option<Bytes>,
}

impl CompactParts {
    /// Reads the parts of a compact `decision` (`schedule`, `balance`)
    /// body, refusing a part missing, repeated, unknown or of the wrong
    /// content type.
    async fn read(request: Request, decision: &str) -> Result<CompactParts, ApiError> {
        let boundary =
            multipart::boundary(request.headers()).ok_or_else(|| ApiError::InvalidField {
                field: "Content-Type".to_owned(),
                message: "a multipart/form-data body needs its boundary".to_owned(),
            })?;
        let body = body_bytes(request, &()).await?;
        let malformed = |e: MultipartError| ApiError::InvalidField {
            field: ".".to_owned(),
            message: format!("not a multipart/form-data body: {e}"),
        };
        let (mut json, mut hosts, mut vms) = (None, None, None);
        for part in multipart::Parts::new(body, &boundary).map_err(malformed)? {
            let part = part.map_err(malformed)?;
            let name = part.name;
            // What a client sends a file as unless told otherwise (curl's
            // `-F hosts=@hosts.arrows`) is taken for a stream too.
            let (slot, media): (_, &[&str]) = match name.as_str() {
                "request" => (&mut json, &["application/json"]),
                "hosts" => (&mut hosts, &[ARROW_STREAM, "application/octet-stream"]),
                "vms" => (&mut vms, &[ARROW_STREAM, "application/octet-stream"]),
                _ => {
                    return Err(ApiError::InvalidField {
                        field: name,
                        message: format!(
                            "not a part of a compact {decision} body (`request`, `hosts`, `vms`)"
                        ),
                    });
                }
            };
            if let Some(given) = part.content_type
                && !media.contains(&essence(&given).as_str())
            {
                return Err(ApiError::InvalidField {
                    field: name,
                    message: format!(
                        "the part's Content-Type must be {}, not {given}",
                        media.join(" or ")
                    ),
                });
            }
            if slot.is_some() {
                return Err(ApiError::InvalidField {
                    field: name,
                    message: "the part is sent twice".to_owned(),
                });
            }
            *slot = Some(part.data);
        }
        let missing = |part: &str| ApiError::InvalidField {
            field: part.to_owned(),
            message: format!("a compact {decision} body needs this part"),
        };
        Ok(CompactParts {
            request: json.ok_or_else(|| missing("request"))?,
            hosts: hosts.ok_or_else(|| missing("hosts"))?,
            vms,
        })
    }

    /// Decodes the streams on the blocking pool.
    async fn decode(self, admission: &Admission) -> Result<(ArrowHosts, ArrowVms), ApiError> {
        // The OpenAPI document can say a part is binary, not that it is an
        // Arrow stream with these columns: 422, as for a snapshot's values.
        let columns = |e: ColumnsError| ApiError::Unprocessable {
            code: "invalid_snapshot",
            message: format!("{}: {}", e.field, e.message),
            details: serde_json::json!({ "field": e.field }),
        };
        let CompactParts { hosts, vms, .. } = self;
        blocking(admission, move || {
            let hosts = ArrowHosts::read(hosts.into()).map_err(columns)?;
            let vms = match vms {
                Some(vms) => ArrowVms::read(vms.into()).map_err(columns)?,
                None => ArrowVms::default(),
            };
            Ok((hosts, vms))
        })
        .await
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
