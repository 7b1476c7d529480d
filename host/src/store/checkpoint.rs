//! Copies SQLite's write-ahead log back into the database file on a
//! connection of its own, so that no decision waits for it.
//!
//! SQLite checkpoints inside the commit that takes the log past
//! `wal_autocheckpoint` pages (1,000 by default), and in the background
//! writer that commit is some decision's: measured with `nova_http` at
//! 10,000 hosts, one decision in about sixty waited 7–8 ms for it, and
//! the writer's mean commit was twice its median. So the writer's own
//! connection only checkpoints as a safety net
//! ([`WRITER_AUTOCHECKPOINT_PAGES`]), and after each batch it stores it
//! nudges the [`Checkpointer`], which runs a `PASSIVE` checkpoint (it
//! waits for no reader or writer) at most every [`CHECKPOINT_INTERVAL`].
//! A checkpoint changes nothing about durability: a committed batch is in
//! the log, which SQLite replays on the next open, whether or not it was
//! copied.

use std::time::Duration;

use sqlx::AnyPool;
use tokio::sync::mpsc;

/// The writer connection's `wal_autocheckpoint`: it checkpoints in its
/// own commits only if the [`Checkpointer`] falls this far behind (about
/// 64 MiB of log at 4 KiB pages), so the log stays bounded if the
/// background checkpoints fail.
pub(super) const WRITER_AUTOCHECKPOINT_PAGES: u32 = 16_384;

/// The shortest time between two background checkpoints. About as often
/// as SQLite's default of 1,000 pages triggers one with decisions
/// committed one by one; each costs two `fsync`s, so not more often.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// A handle to nudge the background checkpointer; the checkpointer stops
/// once every handle is dropped.
#[derive(Debug)]
pub(super) struct Checkpointer {
    nudges: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts the checkpointer on the current tokio runtime, checkpointing
    /// through `pool` (a pool of its own, so it never takes a connection a
    /// request is waiting for).
    pub(super) fn start(pool: AnyPool) -> Checkpointer {
        // One slot: nudges while a checkpoint runs collapse into one.
        let (nudges, nudged) = mpsc::channel(1);
        tokio::spawn(checkpoint_loop(pool, nudged));
        Checkpointer { nudges }
    }

    /// Says that the log grew: a checkpoint follows within
    /// [`CHECKPOINT_INTERVAL`] of the previous one.
    pub(super) fn nudge(&self) {
        // Full: a checkpoint is already due, and will see this commit.
        let _ = self.nudges.try_send(());
    }
}

async fn checkpoint_loop(pool: AnyPool, mut nudged: mpsc::Receiver<()>) {
    while nudged.recv().await.is_some() {
        if pool.is_closed() {
            return;
        }
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&pool)
            .await
        {
            // The writer's safety net keeps the log bounded meanwhile.
            tracing::warn!(error = %e, "could not checkpoint the write-ahead log");
        }
        tokio::time::sleep(CHECKPOINT_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use uuid::Uuid;

    use super::WRITER_AUTOCHECKPOINT_PAGES;
    use crate::store::Location;
    use crate::store::decisions::{DecisionKind, LoggedDecision, Retention};
    use crate::store::test_support::{TestDb, store_with_cluster};

    #[tokio::test]
    async fn the_writer_checkpoints_only_as_a_safety_net() {
        let db = TestDb::sqlite();
        let (store, _) = store_with_cluster(&db).await;
        let pages: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
            .fetch_one(&store.writer_pool)
            .await
            .unwrap();
        assert_eq!(pages, i64::from(WRITER_AUTOCHECKPOINT_PAGES));
    }

    /// About 2,000 pages of log, far under the writer's own threshold:
    /// only the background checkpointer copies them into the database
    /// file.
    #[tokio::test]
    async fn what_the_writer_stores_reaches_the_database_file() {
        let db = TestDb::sqlite();
        let Location::Sqlite(path) = db.location.clone() else {
            unreachable!("an SQLite test database")
        };
        let (store, cluster_id) = store_with_cluster(&db).await;
        let before = std::fs::metadata(&path).unwrap().len();
        let request = "x".repeat(200 * 1024);
        let retention = Retention {
            count: 100,
            max_age: Duration::from_secs(3600),
        };
        for i in 0..40 {
            let decision = LoggedDecision {
                id: Uuid::new_v4(),
                cluster_id,
                kind: DecisionKind::Schedule,
                vm_id: Some(format!("vm{i}")),
                host_id: None,
                answer: "{}".to_owned(),
                full: None,
                claims: Vec::new(),
                request: Some(request.clone()),
            };
            store.log_decision(decision, retention).await.unwrap();
        }
        let stored = 40 * request.len() as u64;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let now = std::fs::metadata(&path).unwrap().len();
            if now >= before + stored {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the database file is {now} bytes after 20 s, from {before}: \
                 the log was not checkpointed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
