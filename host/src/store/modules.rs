//! Module blobs, content-addressed by the sha256 of their bytes, and the
//! machine code compiled from them, keyed by module and engine.

use super::{Db, StoreError};

impl Db {
    /// Stores `wasm` under its hash unless the same bytes are already stored.
    /// Returns whether a new row was written.
    pub async fn insert_module(&mut self, sha256: &str, wasm: &[u8]) -> Result<bool, StoreError> {
        let conn = self.sqlite();
        let done = sqlx::query(
            "INSERT INTO modules (sha256, size_bytes, wasm) VALUES (?, ?, ?) \
             ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(sha256)
        .bind(i64::try_from(wasm.len()).unwrap_or(i64::MAX))
        .bind(wasm)
        .execute(conn)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The `.wasm` bytes stored under `sha256`.
    pub async fn module_wasm(&mut self, sha256: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.sqlite();
        Ok(
            sqlx::query_scalar::<_, Vec<u8>>("SELECT wasm FROM modules WHERE sha256 = ?")
                .bind(sha256)
                .fetch_optional(conn)
                .await?,
        )
    }

    /// The compiled code for `sha256` produced by an engine whose compatibility
    /// hash is `engine_hash`.
    pub async fn artifact(
        &mut self,
        sha256: &str,
        engine_hash: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.sqlite();
        Ok(sqlx::query_scalar::<_, Vec<u8>>(
            "SELECT artifact FROM artifacts WHERE module_sha256 = ? AND engine_hash = ?",
        )
        .bind(sha256)
        .bind(engine_hash)
        .fetch_optional(conn)
        .await?)
    }

    /// Stores compiled code for a stored module, replacing any earlier code for
    /// the same engine.
    pub async fn insert_artifact(
        &mut self,
        sha256: &str,
        engine_hash: &str,
        artifact: &[u8],
    ) -> Result<(), StoreError> {
        let conn = self.sqlite();
        sqlx::query(
            "INSERT INTO artifacts (module_sha256, engine_hash, artifact) VALUES (?, ?, ?) \
             ON CONFLICT (module_sha256, engine_hash) DO UPDATE SET artifact = excluded.artifact",
        )
        .bind(sha256)
        .bind(engine_hash)
        .bind(artifact)
        .execute(conn)
        .await?;
        Ok(())
    }

    /// Deletes the modules no unit uses any more (and, by cascade, their
    /// compiled code), and compiled code for engines other than `engine_hash`.
    pub async fn collect_module_garbage(&mut self, engine_hash: &str) -> Result<(), StoreError> {
        let conn = self.sqlite();
        sqlx::query(
            "DELETE FROM modules WHERE sha256 NOT IN (SELECT module_sha256 FROM policy_units)",
        )
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM artifacts WHERE engine_hash <> ?")
            .bind(engine_hash)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
