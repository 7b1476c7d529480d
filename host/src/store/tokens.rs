//! Bearer tokens: a name, a role and the sha256 of the secret. The secret
//! itself is never stored.

use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, parse_id};
use crate::role::Role;

/// A stored token, without its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

row_struct! {
    struct Row {
        id: String,
        name: String,
        role: String,
        created_at: String,
        revoked_at: Option<String>,
    }
}

impl Row {
    fn into_record(self) -> Result<TokenRecord, StoreError> {
        Ok(TokenRecord {
            id: parse_id(&self.id)?,
            role: Role::from_name(&self.role)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown role `{}`", self.role)))?,
            name: self.name,
            created_at: self.created_at,
            revoked_at: self.revoked_at,
        })
    }
}

const SELECT: &str = "SELECT id, name, role, created_at, revoked_at FROM tokens";

impl Db {
    pub async fn insert_token(
        &mut self,
        id: Uuid,
        name: &str,
        role: Role,
        token_sha256: &str,
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query("INSERT INTO tokens (id, name, role, token_sha256) VALUES ($1, $2, $3, $4)")
            .bind(id.to_string())
            .bind(name)
            .bind(role.name())
            .bind(token_sha256)
            .execute(conn)
            .await?;
        Ok(())
    }

    /// The unrevoked token whose secret hashes to `token_sha256`.
    pub async fn active_token(
        &mut self,
        token_sha256: &str,
    ) -> Result<Option<TokenRecord>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!(
            "{SELECT} WHERE token_sha256 = $1 AND revoked_at IS NULL"
        )))
        .bind(token_sha256)
        .fetch_optional(conn)
        .await?
        .map(Row::into_record)
        .transpose()
    }

    /// Every token, revoked ones included, oldest first.
    pub async fn tokens(&mut self) -> Result<Vec<TokenRecord>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!(
            "{SELECT} ORDER BY created_at, id"
        )))
        .fetch_all(conn)
        .await?
        .into_iter()
        .map(Row::into_record)
        .collect()
    }

    pub async fn token(&mut self, id: Uuid) -> Result<Option<TokenRecord>, StoreError> {
        let conn = self.conn();
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE id = $1")))
            .bind(id.to_string())
            .fetch_optional(conn)
            .await?
            .map(Row::into_record)
            .transpose()
    }

    /// Marks token `id` revoked (idempotently).
    pub async fn revoke_token(&mut self, id: Uuid) -> Result<(), StoreError> {
        let now = self.now();
        let conn = self.conn();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE tokens SET revoked_at = {now} WHERE id = $1 AND revoked_at IS NULL"
        )))
        .bind(id.to_string())
        .execute(conn)
        .await?;
        Ok(())
    }

    /// How many tokens exist at all, revoked ones included.
    pub async fn count_tokens(&mut self) -> Result<i64, StoreError> {
        let conn = self.conn();
        Ok(sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tokens")
            .fetch_one(conn)
            .await?)
    }

    /// How many unrevoked admin tokens exist.
    pub async fn count_active_admins(&mut self) -> Result<i64, StoreError> {
        let conn = self.conn();
        Ok(sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM tokens WHERE role = 'admin' AND revoked_at IS NULL",
        )
        .fetch_one(conn)
        .await?)
    }

    /// Whether a token with this hash was ever stored, revoked or not.
    pub async fn token_hash_known(&mut self, token_sha256: &str) -> Result<bool, StoreError> {
        let conn = self.conn();
        Ok(
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tokens WHERE token_sha256 = $1")
                .bind(token_sha256)
                .fetch_one(conn)
                .await?
                > 0,
        )
    }
}
