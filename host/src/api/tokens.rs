//! `/api/v1/tokens`: admins create and revoke bearer tokens. A token's
//! secret is shown once, in the response that creates it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{Json, Path};
use super::types::check_name;
use super::{AppState, location};
use crate::auth::{Principal, Role, generate_token, hash_token};
use crate::store::tokens::TokenRecord;

/// A role, for requests and responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenRole {
    /// GET only.
    Reader,
    /// Reads, plus schedule and balance.
    Engine,
    /// Everything.
    Admin,
}

impl From<TokenRole> for Role {
    fn from(r: TokenRole) -> Self {
        match r {
            TokenRole::Reader => Role::Reader,
            TokenRole::Engine => Role::Engine,
            TokenRole::Admin => Role::Admin,
        }
    }
}

impl From<Role> for TokenRole {
    fn from(r: Role) -> Self {
        match r {
            Role::Reader => TokenRole::Reader,
            Role::Engine => TokenRole::Engine,
            Role::Admin => TokenRole::Admin,
        }
    }
}

/// A token, without its secret.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Token {
    pub id: Uuid,
    pub name: String,
    pub role: TokenRole,
    pub created_at: String,
    /// Set once the token is revoked; it then authenticates nothing.
    pub revoked_at: Option<String>,
    pub href: String,
}

/// A token just created, with its secret. The secret is not stored and
/// cannot be shown again.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub token: Token,
    /// Send as `Authorization: Bearer <secret>`.
    pub secret: String,
}

/// A token to create.
#[derive(Clone, Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenAdd {
    /// Who or what will use it, e.g. `ovirt-engine-prod`.
    #[schema(schema_with = crate::names::name_schema, required = true)]
    pub name: String,
    pub role: TokenRole,
}

fn view(t: TokenRecord) -> Token {
    Token {
        href: format!("/api/v1/tokens/{}", t.id),
        id: t.id,
        name: t.name,
        role: t.role.into(),
        created_at: t.created_at,
        revoked_at: t.revoked_at,
    }
}

/// Lists every token, revoked ones included.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    security(("bearer" = [])),
    responses(
        (status = 200, body = Vec<Token>),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
    ))]
pub async fn list_tokens(
    State(state): State<AppState>,
) -> Result<axum::Json<Vec<Token>>, ApiError> {
    let mut conn = state.store().read().await?;
    let tokens = conn.tokens().await?;
    Ok(axum::Json(tokens.into_iter().map(view).collect()))
}

/// Creates a token; the response holds its secret, once.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "tokens",
    security(("bearer" = [])),
    request_body = TokenAdd,
    responses(
        (status = 201, body = CreatedToken),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
    ))]
pub async fn add_token(
    State(state): State<AppState>,
    Json(body): Json<TokenAdd>,
) -> Result<impl IntoResponse, ApiError> {
    check_name("name", &body.name)?;
    let secret = generate_token().map_err(|e| ApiError::Internal(format!("no randomness: {e}")))?;
    let id = Uuid::new_v4();
    let mut tx = state.store().write().await?;
    tx.insert_token(id, &body.name, body.role.into(), &hash_token(&secret))
        .await?;
    let record = tx
        .token(id)
        .await?
        .ok_or_else(|| ApiError::Internal("token vanished after insert".to_owned()))?;
    tx.commit().await?;
    // Never the secret.
    tracing::info!(token = %id, name = %record.name, role = %record.role, "token created");
    Ok((
        StatusCode::CREATED,
        location(format!("/api/v1/tokens/{id}")),
        axum::Json(CreatedToken {
            token: view(record),
            secret,
        }),
    ))
}

/// Revokes a token. Revoking the last admin token is refused, so the
/// server cannot lock its admins out.
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "tokens",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Token id")),
    responses(
        (status = 204, description = "Revoked (or already revoked)"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "`last_admin_token`", body = ErrorBody),
    ))]
pub async fn revoke_token(
    State(state): State<AppState>,
    axum::Extension(_caller): axum::Extension<Principal>,
    Path(id): Path<Uuid>,
) -> Result<StatusCode, ApiError> {
    let mut tx = state.store().write().await?;
    let token = tx.token(id).await?.ok_or_else(|| ApiError::NotFound {
        resource: "token",
        id: id.to_string(),
    })?;
    if token.revoked_at.is_none()
        && token.role == Role::Admin
        && tx.count_active_admins().await? <= 1
    {
        return Err(ApiError::LastAdminToken { token: token.name });
    }
    tx.revoke_token(id).await?;
    tx.commit().await?;
    // Committed: from the next request on, the token is refused.
    state.tokens().invalidate();
    tracing::info!(token = %id, name = %token.name, role = %token.role, "token revoked");
    Ok(StatusCode::NO_CONTENT)
}
