//! What-if on a decision already made:
//! `POST /api/v1/clusters/{id}/decisions/{decision_id}/replay?policy=ID`
//! decides the request a logged decision was asked again, as a dry run,
//! with another policy (or the cluster's current one), and answers both
//! explain records side by side.
//!
//! The replay runs over the inventory held for the cluster *now*, with the
//! live claims as usage, exactly as a `dry_run=true` schedule request with
//! `policy=ID` would: the hosts as they were when the decision was made are
//! not kept (they are the inventory's, and change), so a replay answers
//! "what would this policy do with this request today". Placing a VM again
//! sets its own claim aside (`crate::placement::claims`), so the decision's
//! own claim does not count against the replay. Only schedule decisions
//! over the held inventory keep their request (`store::decisions`); the
//! others answer 409 `not_replayable`.

use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::answer::{AnswerForm, ScheduleAnswer};
use super::request::{DecisionQuery, source_mismatch};
use super::{admission, facts, json_response, place_and_answer, place_job};
use crate::api::AppState;
use crate::api::clusters::{DecisionEntry, decision_view};
use crate::api::error::{ApiError, ErrorBody};
use crate::api::extract::{Path, Query, parse_json};
use crate::api::prepared::decision_policy;
use crate::metrics::SchedulingAttempt;
use crate::placement::{ExplainDetail, HostsSource, PlaceRequest};

/// Which policy replays the decision.
#[derive(Clone, Copy, Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReplayQuery {
    /// The scheduling policy to decide with; the cluster's current policy
    /// when absent.
    pub policy: Option<Uuid>,
}

/// A logged decision and the same request decided again.
#[derive(Debug, Serialize, ToSchema)]
pub struct Replay {
    /// The decision as logged (`GET .../decisions/{decision_id}`).
    pub original: DecisionEntry,
    /// The request decided again as a dry run over the held inventory,
    /// with the full explain record; nothing claimed or logged.
    #[schema(value_type = ScheduleAnswer)]
    pub replay: Box<RawValue>,
}

/// Decides a logged schedule decision's request again, with another policy.
#[utoipa::path(post, path = "/api/v1/clusters/{id}/decisions/{decision_id}/replay", tag = "decisions",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Cluster id"),
        ("decision_id" = Uuid, Path, description = "Decision id"), ReplayQuery),
    responses(
        (status = 200, description = "The decision as logged and as decided again", body = Replay),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, description = "The cluster, the decision or the policy", body = ErrorBody),
        (status = 409, description = "`not_replayable` (a balance decision, one over inline hosts, or one logged before requests were kept), `no_inventory`", body = ErrorBody),
        (status = 422, description = "`filter_failed`, `score_failed`", body = ErrorBody),
        (status = 503, description = "`cluster_busy`, `decision_too_long`, `overloaded`; with `Retry-After`", body = ErrorBody),
    ))]
pub async fn replay_decision(
    State(state): State<AppState>,
    Path((cluster_id, decision_id)): Path<(Uuid, Uuid)>,
    Query(query): Query<ReplayQuery>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let admission = admission(&state, cluster_id)?;
    let (original, asked) = {
        let mut conn = state.store().read().await?;
        let original = conn
            .decision(decision_id)
            .await?
            .filter(|d| d.cluster_id == cluster_id)
            .ok_or_else(|| ApiError::NotFound {
                resource: "decision",
                id: decision_id.to_string(),
            })?;
        let asked = conn.decision_request(decision_id).await?.flatten();
        (original, asked)
    };
    let not_replayable = |why: String| ApiError::Conflict {
        code: "not_replayable",
        message: format!("decision `{decision_id}` cannot be replayed: {why}"),
        details: json!({ "decision_id": decision_id }),
    };
    let asked = asked.ok_or_else(|| {
        not_replayable(
            "only schedule decisions over the held inventory keep the request they were asked \
             (not balance decisions, decisions over inline hosts, or decisions logged before \
             requests were kept)"
                .to_owned(),
        )
    })?;
    let mut request: PlaceRequest = parse_json(asked.as_bytes())
        .map_err(|e| not_replayable(format!("its request no longer reads: {e}")))?;
    let source = request.take_source().map_err(source_mismatch)?;
    if !matches!(source, HostsSource::Held) {
        return Err(not_replayable("its hosts were sent inline".to_owned()));
    }
    request.explain = Some(ExplainDetail::Full);
    let query = DecisionQuery {
        dry_run: true,
        policy: query.policy,
    };
    let prepared = decision_policy(&state, cluster_id, query).await?;
    let attempt = SchedulingAttempt::new(cluster_id, started);
    let facts = facts(cluster_id, query, &prepared);
    let form = AnswerForm::Placement {
        mode: request.mode,
        detail: ExplainDetail::Full,
    };
    let job = place_job(&prepared, &facts, request, source);
    let text = place_and_answer(&state, &admission, job, facts, form, attempt, None).await?;
    let replay = Replay {
        original: decision_view(original)?,
        replay: RawValue::from_string(text)
            .map_err(|e| ApiError::Internal(format!("a replay's own answer is not JSON: {e}")))?,
    };
    let body = serde_json::to_string(&replay)
        .map_err(|e| ApiError::Internal(format!("encoding a replay: {e}")))?;
    Ok(json_response(body))
}
