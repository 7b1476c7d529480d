//! `HostedEngineSpares`: keeps enough hosted-engine hosts able to receive
//! the engine VM if its host fails.
//!
//! Behaviour from oVirt's `HostedEngineMemoryReservationFilterPolicyUnit`
//! (reference notes §2.1). With `HeSparesCount` = N > 0, for a VM other
//! than the engine VM, each candidate is sorted out:
//! * not an active hosted-engine host, HA score 0, or the host the engine
//!   VM runs on: a plain candidate;
//! * schedulable memory for the engine VM *and* this VM: a spare and a
//!   candidate;
//! * schedulable memory for the engine VM only: a spare, **not** a
//!   candidate (placing this VM there would consume the spare);
//! * neither: a plain candidate.
//!
//! When there are more than N spares, one less does not hurt and every
//! host passes; otherwise the spare-only hosts are rejected. N = 0, no
//! engine VM in the cluster, or placing the engine VM itself: no-op.
//! "Schedulable memory" is oVirt's max scheduling memory (strictly more
//! than needed, as oVirt compares); the VM needs nothing on the host it
//! already runs on.
//!
//! Data: host `hosted-engine` flag, `ha-score`, `memory-total-mib`,
//! `memory-committed-mib`, `memory-reserved-mib`; the running VMs'
//! `hosted-engine` flag, host and `memory-mib` (the engine VM is the first
//! VM flagged `hosted-engine`); the VM's `memory-mib`, `hosted-engine` and
//! `current-host`.
//!
//! Where we differ from oVirt: oVirt adds a per-VM guest overhead estimate
//! to both VMs and skips hosts in hosted-engine *local maintenance*; our
//! inventory has neither. `MaxMemoryOverCommit` (oVirt's cluster setting)
//! is this unit's parameter, shared by name with `Memory`.

use sandpiper_guest::float;
use sandpiper_guest::prelude::*;
use sandpiper_ovirt::memory::MemoryColumns;
use sandpiper_ovirt::params::{self, HE_SPARES_COUNT, MAX_MEMORY_OVER_COMMIT};
use sandpiper_ovirt::{flag, value};

/// The `HostedEngineSpares` filter.
pub struct HostedEngineSpares;

impl Unit for HostedEngineSpares {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "HostedEngineSpares",
            "Keeps HeSparesCount hosted-engine hosts with the memory to receive the engine VM: \
             while there are no more spares than that, hosts that could take only one of the \
             engine VM and this VM are rejected.",
        )
        .with_param(params::he_spares_count())
        .with_param(params::max_memory_over_commit())
        // Off (0, the default) it has nothing to say: the pipeline skips
        // it without a call.
        .applies_to([RequestProperty::Param(HE_SPARES_COUNT.to_owned())])
    }
}

/// The running engine VM: its host and memory.
struct EngineVm {
    host: u32,
    memory_mib: f64,
}

fn engine_vm(cx: &Context<'_>) -> Option<EngineVm> {
    let vms = cx.vms();
    let index = vms.flags(VmFlag::HostedEngine).iter().position(|&he| he)?;
    let vm = vms.get(index as u32)?;
    Some(EngineVm {
        host: vm.host(),
        memory_mib: vm.memory_mib(),
    })
}

impl Filter for HostedEngineSpares {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let params = cx.params();
        // `HeSparesCount` first: at 0 the unit says nothing, whatever the
        // other parameter holds, which is what lets `applies-to` skip it.
        let settings = params.f64(HE_SPARES_COUNT).and_then(|count| {
            if count == 0.0 {
                return Ok(None);
            }
            Ok(Some((count, params.f64(MAX_MEMORY_OVER_COMMIT)?)))
        });
        let (required_spares, over_commit_percent) = match settings {
            Ok(Some(settings)) => settings,
            Ok(None) => return rejections.into_vec(),
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let vm = cx.vm();
        if candidates.is_empty() || vm.hosted_engine {
            return rejections.into_vec();
        }
        let Some(engine) = engine_vm(cx) else {
            return rejections.into_vec();
        };
        let hosts = cx.hosts();
        let he_hosts = hosts.flags(HostFlag::HostedEngine);
        let ha_scores = hosts.metric(HostMetric::HaScore);
        let memory = MemoryColumns::new(&hosts, over_commit_percent);
        let mut spares = 0usize;
        let mut spare_only: Vec<u32> = Vec::new();
        for host in hosts.candidates(candidates) {
            let h = host.index();
            let score = value(ha_scores, h);
            if !flag(he_hosts, h) || score == 0.0 || h == engine.host {
                continue;
            }
            let needed = if vm.current_host == Some(h) {
                0.0
            } else {
                float::max(vm.memory_mib, 0.0)
            };
            let schedulable = memory.max_scheduling_mib(h);
            if schedulable > needed + engine.memory_mib {
                spares += 1;
            } else if schedulable > engine.memory_mib {
                spares += 1;
                spare_only.push(h);
            }
        }
        if spares as f64 <= required_spares {
            let reason = format!(
                "kept free for the hosted-engine VM: {spares} spare hosts, HeSparesCount \
                 {required_spares}"
            );
            rejections.reject_all(&spare_only, reason);
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(HostedEngineSpares: filter);
