//! Prestarted VM pools and their members (migration `0008_vm_pools.sql`):
//! the pool's settings and the members' shape as JSON, the monitor's last
//! run, and per member who it is assigned to and its last start
//! operation. A member's running state is not stored: the members are
//! read with their start operation's row (`operations`, migration
//! `0007_operations.sql`) in one statement, and `crate::pools` derives the
//! state from it.

use uuid::Uuid;

use super::rows::row_struct;
use super::{Db, StoreError, flag, parse_id, unsigned};

/// A stored pool.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolRecord {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub cluster_id: Uuid,
    pub size: u32,
    pub prestarted_vms: u32,
    pub stateful: bool,
    /// The members' shape (`snapshot::VmSpec` without an id), as JSON.
    pub vm: String,
    /// The monitor's last run over the pool, as JSON; `None` before the
    /// first.
    pub last_run: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A stored member of a pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRow {
    /// 1-based; the member's place in the pool.
    pub idx: u32,
    pub vm_id: String,
    pub assigned_to: Option<String>,
    pub start_operation_id: Option<Uuid>,
    pub host_id: Option<String>,
    /// Its start operation as the queue stored it; `None` when it has
    /// none, or the queue no longer knows it.
    pub start: Option<StartRow>,
}

/// What a member's state is derived from: its start operation's state,
/// when it finished, and the outcome the worker reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartRow {
    /// `queued`, `leased`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    /// Milliseconds since the Unix epoch.
    pub finished_at_ms: Option<u64>,
    /// `{"outcome": ..., "detail": ...}` as JSON, once finished.
    pub outcome: Option<String>,
}

row_struct! {
    struct Row {
        id: String,
        name: String,
        description: String,
        cluster_id: String,
        size: i64,
        prestarted_vms: i64,
        stateful: i64,
        vm: String,
        last_run: Option<String>,
        created_at: String,
        updated_at: String,
    }
}

const SELECT: &str = "SELECT id, name, description, cluster_id, size, prestarted_vms, stateful, \
                      vm, last_run, created_at, updated_at FROM vm_pools";

fn count(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

impl TryFrom<Row> for PoolRecord {
    type Error = StoreError;
    fn try_from(row: Row) -> Result<Self, StoreError> {
        Ok(PoolRecord {
            id: parse_id(&row.id)?,
            name: row.name,
            description: row.description,
            cluster_id: parse_id(&row.cluster_id)?,
            size: count(row.size),
            prestarted_vms: count(row.prestarted_vms),
            stateful: flag(row.stateful),
            vm: row.vm,
            last_run: row.last_run,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

impl Db {
    /// Every pool, by name.
    pub async fn vm_pools(&mut self) -> Result<Vec<PoolRecord>, StoreError> {
        let name = self.by_bytes("name");
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} ORDER BY {name}")))
            .fetch_all(self.conn())
            .await?
            .into_iter()
            .map(PoolRecord::try_from)
            .collect()
    }

    pub async fn vm_pool(&mut self, id: Uuid) -> Result<Option<PoolRecord>, StoreError> {
        sqlx::query_as::<_, Row>(sqlx::AssertSqlSafe(format!("{SELECT} WHERE id = $1")))
            .bind(id.to_string())
            .fetch_optional(self.conn())
            .await?
            .map(PoolRecord::try_from)
            .transpose()
    }

    /// The id of the pool called `name` (any case), if any.
    pub async fn vm_pool_id_by_name(&mut self, name: &str) -> Result<Option<Uuid>, StoreError> {
        self.id_by_name("vm_pools", name).await
    }

    /// Writes a pool's settings, inserting or replacing; its last run is
    /// kept ([`Db::set_vm_pool_last_run`] writes that).
    pub async fn save_vm_pool(&mut self, pool: &PoolRecord) -> Result<(), StoreError> {
        let now = self.now();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO vm_pools (id, name, description, cluster_id, size, prestarted_vms, \
             stateful, vm) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (id) DO UPDATE SET name = $2, description = $3, size = $5, \
             prestarted_vms = $6, stateful = $7, vm = $8, updated_at = {now}"
        )))
        .bind(pool.id.to_string())
        .bind(&pool.name)
        .bind(&pool.description)
        .bind(pool.cluster_id.to_string())
        .bind(i64::from(pool.size))
        .bind(i64::from(pool.prestarted_vms))
        .bind(i64::from(pool.stateful))
        .bind(&pool.vm)
        .execute(self.conn())
        .await?;
        Ok(())
    }

    /// Records the monitor's last run over a pool (JSON).
    pub async fn set_vm_pool_last_run(&mut self, id: Uuid, run: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE vm_pools SET last_run = $1 WHERE id = $2")
            .bind(run)
            .bind(id.to_string())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Deletes a pool and its members.
    pub async fn delete_vm_pool(&mut self, id: Uuid) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM vm_pools WHERE id = $1")
            .bind(id.to_string())
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// A pool's members, by index, each with its start operation.
    pub async fn vm_pool_members(&mut self, pool_id: Uuid) -> Result<Vec<MemberRow>, StoreError> {
        row_struct! {
            struct MemberJoin {
                idx: i64,
                vm_id: String,
                assigned_to: Option<String>,
                start_operation_id: Option<String>,
                host_id: Option<String>,
                state: Option<String>,
                finished_at_ms: Option<i64>,
                outcome: Option<String>,
            }
        }
        let rows: Vec<MemberJoin> = sqlx::query_as(
            "SELECT m.idx, m.vm_id, m.assigned_to, m.start_operation_id, m.host_id, \
             o.state, o.finished_at_ms, o.outcome \
             FROM vm_pool_members m LEFT JOIN operations o ON o.id = m.start_operation_id \
             WHERE m.pool_id = $1 ORDER BY m.idx",
        )
        .bind(pool_id.to_string())
        .fetch_all(self.conn())
        .await?;
        rows.into_iter()
            .map(|r| {
                Ok(MemberRow {
                    idx: count(r.idx),
                    vm_id: r.vm_id,
                    assigned_to: r.assigned_to,
                    start_operation_id: r
                        .start_operation_id
                        .as_deref()
                        .map(parse_id)
                        .transpose()?,
                    host_id: r.host_id,
                    start: r.state.map(|state| StartRow {
                        state,
                        finished_at_ms: r.finished_at_ms.map(unsigned),
                        outcome: r.outcome,
                    }),
                })
            })
            .collect()
    }

    /// Adds members (index, VM id), down and unassigned.
    pub async fn add_vm_pool_members(
        &mut self,
        pool_id: Uuid,
        members: &[(u32, String)],
    ) -> Result<(), StoreError> {
        let pool = pool_id.to_string();
        for (idx, vm_id) in members {
            sqlx::query("INSERT INTO vm_pool_members (pool_id, idx, vm_id) VALUES ($1, $2, $3)")
                .bind(&pool)
                .bind(i64::from(*idx))
                .bind(vm_id)
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    /// Removes members by index.
    pub async fn delete_vm_pool_members(
        &mut self,
        pool_id: Uuid,
        indices: &[u32],
    ) -> Result<(), StoreError> {
        let pool = pool_id.to_string();
        for idx in indices {
            sqlx::query("DELETE FROM vm_pool_members WHERE pool_id = $1 AND idx = $2")
                .bind(&pool)
                .bind(i64::from(*idx))
                .execute(self.conn())
                .await?;
        }
        Ok(())
    }

    /// Assigns a member to `user`, or (`None`) frees it.
    pub async fn set_vm_pool_member_user(
        &mut self,
        pool_id: Uuid,
        idx: u32,
        user: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE vm_pool_members SET assigned_to = $1 WHERE pool_id = $2 AND idx = $3")
            .bind(user)
            .bind(pool_id.to_string())
            .bind(i64::from(idx))
            .execute(self.conn())
            .await?;
        Ok(())
    }

    /// Records a member's start operation and the host it was placed on;
    /// `None` for both: the member is down.
    pub async fn set_vm_pool_member_start(
        &mut self,
        pool_id: Uuid,
        idx: u32,
        operation_id: Option<Uuid>,
        host_id: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE vm_pool_members SET start_operation_id = $1, host_id = $2 \
             WHERE pool_id = $3 AND idx = $4",
        )
        .bind(operation_id.map(|id| id.to_string()))
        .bind(host_id)
        .bind(pool_id.to_string())
        .bind(i64::from(idx))
        .execute(self.conn())
        .await?;
        Ok(())
    }
}
