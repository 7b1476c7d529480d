//! What each held host has in use, as people read it (the console's
//! utilisation chart, `GET /api/v1/clusters/{id}/inventory/hosts`): what the
//! host last reported, and what the live claims on it add, computed with the
//! same rule the decisions' columns use (`resources::with_pending`), a page
//! at a time so that a 10,000-host cluster is never sent whole.

use std::collections::HashMap;

use sandpiper_model::HostMetric;

use super::cluster::ClusterState;
use super::resources::{self, Resources};
use crate::snapshot::{Host, Status};

/// One held host and what it uses: as last reported, and what live claims
/// (decisions the engine has not reported back) add. The API answers it as
/// it is (`GET .../inventory/hosts`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[schema(as = HeldHost)]
pub struct HostUsage {
    pub id: String,
    /// The display name (the id when the host has none).
    pub name: String,
    pub status: Status,
    /// The generation of the report the host comes from.
    pub generation: u64,
    /// VMs the host reports running.
    pub vms: usize,
    /// Live claims on the host.
    pub claims: usize,
    pub memory_total_mib: f64,
    /// Reported in use: total less free.
    pub memory_used_mib: f64,
    /// Claimed by decisions the engine has not reported back yet.
    pub memory_pending_mib: f64,
    /// Reported CPU load, percent of the host's CPUs.
    pub cpu_usage_percent: f64,
    /// What the claims add to the load, up to 100 % in all.
    pub cpu_pending_percent: f64,
}

/// The hosts `offset..offset + limit` of `state`, in inventory order, and
/// how many hosts it holds in all.
pub fn page(state: &ClusterState, offset: usize, limit: usize) -> (usize, Vec<HostUsage>) {
    let records = state.hosts().records();
    let shown = records.iter().skip(offset).take(limit);
    let mut pending: HashMap<&str, (Resources, usize)> = shown
        .clone()
        .map(|r| (r.host.id.as_str(), (Resources::default(), 0)))
        .collect();
    for claim in state.claims().iter() {
        if let Some((sum, count)) = pending.get_mut(claim.host_id.as_str()) {
            sum.add(&claim.resources);
            *count += 1;
        }
    }
    let hosts = shown
        .map(|record| {
            let (claimed, claims) = pending
                .get(record.host.id.as_str())
                .cloned()
                .unwrap_or_default();
            usage(
                &record.host,
                record.generation,
                record.vms.len(),
                &claimed,
                claims,
            )
        })
        .collect();
    (records.len(), hosts)
}

fn usage(
    host: &Host,
    generation: u64,
    vms: usize,
    claimed: &Resources,
    claims: usize,
) -> HostUsage {
    let metric = |name: &str| host.metrics.get(name).copied().unwrap_or(0.0);
    let total = metric("memory_total_mib");
    let cpu = metric("cpu_usage_percent");
    let cpus = resources::host_cpus(metric("cpu_threads"), metric("cpu_cores"));
    HostUsage {
        id: host.id.clone(),
        name: host.name.clone().unwrap_or_else(|| host.id.clone()),
        status: host.status,
        generation,
        vms,
        claims,
        memory_total_mib: total,
        memory_used_mib: (total - metric("memory_free_mib")).max(0.0),
        memory_pending_mib: claimed.memory_mib,
        cpu_usage_percent: cpu,
        cpu_pending_percent: resources::with_pending(
            HostMetric::CpuUsagePercent,
            cpu,
            claimed,
            cpus,
        ) - cpu.min(100.0),
    }
}
