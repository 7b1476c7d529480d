//! Module blobs, content-addressed by the sha256 of their bytes, and the
//! machine code compiled from them, keyed by module and engine.
//!
//! Both are stored in chunks of at most [`CHUNK_BYTES`] (migration 0006),
//! written and read one chunk at a time, so that storing or reading a
//! module never holds more than a chunk of it in memory on our side or in
//! SQLite's: a blob bound in one piece is copied whole by sqlx, again by
//! SQLite, and once more into the row's record (issue #11).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{Db, StoreError};

/// Bytes per stored chunk. A megabyte makes the largest module (64 MiB)
/// 64 rows, each written and read by its key, while the memory a store or
/// a read holds at once stays a few megabytes.
pub const CHUNK_BYTES: usize = 1 << 20;

/// Where a blob's chunks live: the chunk table and the key of its owner.
enum Blob<'a> {
    Module {
        sha256: &'a str,
    },
    Artifact {
        sha256: &'a str,
        engine_hash: &'a str,
    },
}

impl Blob<'_> {
    /// What the blob is, for error messages.
    fn describe(&self) -> String {
        match self {
            Blob::Module { sha256 } => format!("module {sha256}"),
            Blob::Artifact {
                sha256,
                engine_hash,
            } => format!("compiled code of module {sha256} for engine {engine_hash}"),
        }
    }

    /// Stores chunk `seq`.
    async fn insert_chunk(
        &self,
        conn: &mut sqlx::AnyConnection,
        seq: i64,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        let query = match self {
            Blob::Module { sha256 } => sqlx::query(
                "INSERT INTO module_chunks (module_sha256, seq, bytes) VALUES ($1, $2, $3)",
            )
            .bind(*sha256),
            Blob::Artifact {
                sha256,
                engine_hash,
            } => sqlx::query(
                "INSERT INTO artifact_chunks (module_sha256, engine_hash, seq, bytes) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(*sha256)
            .bind(*engine_hash),
        };
        // Bound by value: sqlx takes the vector as it is, without a copy.
        query.bind(seq).bind(bytes).execute(conn).await?;
        Ok(())
    }

    /// Chunk `seq`, if there is one.
    async fn chunk(
        &self,
        conn: &mut sqlx::AnyConnection,
        seq: i64,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let query = match self {
            Blob::Module { sha256 } => sqlx::query_scalar::<_, Vec<u8>>(
                "SELECT bytes FROM module_chunks WHERE module_sha256 = $1 AND seq = $2",
            )
            .bind(*sha256),
            Blob::Artifact {
                sha256,
                engine_hash,
            } => sqlx::query_scalar::<_, Vec<u8>>(
                "SELECT bytes FROM artifact_chunks \
                 WHERE module_sha256 = $1 AND engine_hash = $2 AND seq = $3",
            )
            .bind(*sha256)
            .bind(*engine_hash),
        };
        Ok(query.bind(seq).fetch_optional(conn).await?)
    }

    /// Writes the `size_bytes` bytes `source` yields as chunks 0, 1, ...;
    /// fails if `source` yields another number of bytes.
    async fn write(
        &self,
        conn: &mut sqlx::AnyConnection,
        size_bytes: u64,
        mut source: impl AsyncRead + Unpin,
    ) -> Result<(), StoreError> {
        let mut written: u64 = 0;
        let mut seq: i64 = 0;
        loop {
            let chunk = read_chunk(&mut source).await.map_err(StoreError::Source)?;
            if chunk.is_empty() && seq > 0 {
                break;
            }
            let full = chunk.len() == CHUNK_BYTES;
            written += chunk.len() as u64;
            self.insert_chunk(conn, seq, chunk).await?;
            seq += 1;
            if !full {
                break;
            }
        }
        if written == size_bytes {
            Ok(())
        } else {
            Err(StoreError::Source(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} is {size_bytes} bytes, but {written} were given",
                    self.describe()
                ),
            )))
        }
    }

    /// Writes chunks 0, 1, ... to `out` in order, and checks they add up
    /// to `size_bytes`.
    async fn copy_to(
        &self,
        conn: &mut sqlx::AnyConnection,
        size_bytes: u64,
        out: &mut (impl AsyncWrite + Unpin),
    ) -> Result<(), StoreError> {
        let mut read: u64 = 0;
        let mut seq: i64 = 0;
        while read < size_bytes {
            let Some(chunk) = self.chunk(conn, seq).await? else {
                break;
            };
            read += chunk.len() as u64;
            out.write_all(&chunk).await.map_err(StoreError::Source)?;
            seq += 1;
        }
        out.flush().await.map_err(StoreError::Source)?;
        if read == size_bytes {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!(
                "{} should be {size_bytes} bytes, but its chunks hold {read}",
                self.describe()
            )))
        }
    }
}

/// Reads up to [`CHUNK_BYTES`] from `source`: fewer only at its end.
async fn read_chunk(source: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut chunk = vec![0; CHUNK_BYTES];
    let mut filled = 0;
    while filled < CHUNK_BYTES {
        let n = source.read(&mut chunk[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    chunk.truncate(filled);
    Ok(chunk)
}

fn sql_size(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl Db {
    /// Stores the module `sha256`, `size_bytes` long, read from `wasm` a
    /// chunk at a time, unless the same bytes are already stored (then
    /// `wasm` is not read). Returns whether a new module was written.
    ///
    /// Inside a write transaction a failure leaves nothing behind: the
    /// caller's transaction rolls back the row and its chunks together.
    pub async fn insert_module(
        &mut self,
        sha256: &str,
        size_bytes: u64,
        language: Option<&str>,
        wasm: impl AsyncRead + Unpin,
    ) -> Result<bool, StoreError> {
        let conn = self.conn();
        let done = sqlx::query(
            "INSERT INTO modules (sha256, size_bytes, language) VALUES ($1, $2, $3) \
             ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(sha256)
        .bind(sql_size(size_bytes))
        .bind(language)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() == 0 {
            // Stored before its language was read (migration 0013).
            if language.is_some() {
                sqlx::query(
                    "UPDATE modules SET language = $1 WHERE sha256 = $2 AND language IS NULL",
                )
                .bind(language)
                .bind(sha256)
                .execute(&mut *conn)
                .await?;
            }
            return Ok(false);
        }
        Blob::Module { sha256 }
            .write(conn, size_bytes, wasm)
            .await?;
        Ok(true)
    }

    /// Whether a module is stored under `sha256`.
    pub async fn has_module(&mut self, sha256: &str) -> Result<bool, StoreError> {
        let conn = self.conn();
        Ok(
            sqlx::query_scalar::<_, i64>("SELECT 1 FROM modules WHERE sha256 = $1")
                .bind(sha256)
                .fetch_optional(conn)
                .await?
                .is_some(),
        )
    }

    /// Writes the `.wasm` bytes stored under `sha256` to `out`, a chunk at
    /// a time, and returns how many there were; `None` when no module is
    /// stored under `sha256`.
    pub async fn copy_module_to(
        &mut self,
        sha256: &str,
        out: &mut (impl AsyncWrite + Unpin),
    ) -> Result<Option<u64>, StoreError> {
        let conn = self.conn();
        let size = sqlx::query_scalar::<_, i64>("SELECT size_bytes FROM modules WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(size) = size else {
            return Ok(None);
        };
        let size = u64::try_from(size).unwrap_or(0);
        Blob::Module { sha256 }.copy_to(conn, size, out).await?;
        Ok(Some(size))
    }

    /// The compiled code for `sha256` produced by an engine whose compatibility
    /// hash is `engine_hash`, assembled from its chunks into one buffer of
    /// exactly its size (loading needs it contiguous).
    pub async fn artifact(
        &mut self,
        sha256: &str,
        engine_hash: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let conn = self.conn();
        let size = sqlx::query_scalar::<_, i64>(
            "SELECT size_bytes FROM artifacts WHERE module_sha256 = $1 AND engine_hash = $2",
        )
        .bind(sha256)
        .bind(engine_hash)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(size) = size else {
            return Ok(None);
        };
        let size = u64::try_from(size).unwrap_or(0);
        let mut artifact = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        Blob::Artifact {
            sha256,
            engine_hash,
        }
        .copy_to(conn, size, &mut artifact)
        .await?;
        Ok(Some(artifact))
    }

    /// Stores compiled code for a stored module, replacing any earlier code for
    /// the same engine.
    pub async fn insert_artifact(
        &mut self,
        sha256: &str,
        engine_hash: &str,
        artifact: &[u8],
    ) -> Result<(), StoreError> {
        let conn = self.conn();
        // Replacing deletes the old chunks with the old row (cascade).
        sqlx::query("DELETE FROM artifacts WHERE module_sha256 = $1 AND engine_hash = $2")
            .bind(sha256)
            .bind(engine_hash)
            .execute(&mut *conn)
            .await?;
        let size = artifact.len() as u64;
        sqlx::query(
            "INSERT INTO artifacts (module_sha256, engine_hash, size_bytes) VALUES ($1, $2, $3)",
        )
        .bind(sha256)
        .bind(engine_hash)
        .bind(sql_size(size))
        .execute(&mut *conn)
        .await?;
        Blob::Artifact {
            sha256,
            engine_hash,
        }
        .write(conn, size, artifact)
        .await
    }

    /// Deletes the modules no unit uses or keeps as a version any more
    /// (and, by cascade, their chunks and compiled code), and compiled code
    /// for engines other than `engine_hash`.
    pub async fn collect_module_garbage(&mut self, engine_hash: &str) -> Result<(), StoreError> {
        let conn = self.conn();
        sqlx::query(
            "DELETE FROM modules WHERE sha256 NOT IN (SELECT module_sha256 FROM policy_units) \
             AND sha256 NOT IN (SELECT module_sha256 FROM unit_versions)",
        )
        .execute(&mut *conn)
        .await?;
        sqlx::query("DELETE FROM artifacts WHERE engine_hash <> $1")
            .bind(engine_hash)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::backends;

    /// Bytes that differ in every chunk, so a chunk out of order shows.
    fn blob(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i / 7 % 251) as u8).collect()
    }

    #[tokio::test]
    async fn modules_and_artifacts_come_back_as_stored_across_chunk_boundaries() {
        for db in backends().await {
            let store = db.open().await;
            for len in [1, CHUNK_BYTES - 1, CHUNK_BYTES, 2 * CHUNK_BYTES + 5] {
                let wasm = blob(len);
                let sha256 = crate::sandbox::hex(&crate::sandbox::sha256(&wasm));
                let mut tx = store.write().await.expect("write");
                assert!(
                    tx.insert_module(&sha256, len as u64, None, &wasm[..])
                        .await
                        .expect("insert")
                );
                assert!(
                    !tx.insert_module(&sha256, len as u64, None, &b""[..])
                        .await
                        .expect("again"),
                    "the same bytes are stored once, and not read again"
                );
                tx.insert_artifact(&sha256, "e", &wasm[..len / 2])
                    .await
                    .expect("artifact");
                tx.insert_artifact(&sha256, "e", &wasm)
                    .await
                    .expect("replaced");
                tx.commit().await.expect("commit");

                let mut conn = store.read().await.expect("read");
                assert!(conn.has_module(&sha256).await.expect("has"));
                let mut out = Vec::new();
                let copied = conn.copy_module_to(&sha256, &mut out).await.expect("copy");
                assert_eq!((copied, out == wasm), (Some(len as u64), true), "{len}");
                let artifact = conn.artifact(&sha256, "e").await.expect("artifact");
                assert!(artifact.as_deref() == Some(&wasm[..]), "{len}");
                assert_eq!(conn.artifact(&sha256, "other").await.expect("none"), None);
            }
            let mut conn = store.read().await.expect("read");
            assert!(!conn.has_module(&"0".repeat(64)).await.expect("has"));
            assert_eq!(
                conn.copy_module_to(&"0".repeat(64), &mut Vec::new())
                    .await
                    .expect("copy"),
                None
            );
        }
    }

    #[tokio::test]
    async fn a_module_shorter_than_announced_is_not_stored() {
        for db in backends().await {
            let store = db.open().await;
            let sha256 = "1".repeat(64);
            let mut tx = store.write().await.expect("write");
            let refused = tx.insert_module(&sha256, 10, None, &b"short"[..]).await;
            assert!(matches!(refused, Err(StoreError::Source(_))), "{refused:?}");
        }
    }
}
