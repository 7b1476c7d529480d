//! A held cluster's decision as its turn makes it: `ClusterState::place`
//! over 10,000 held hosts (the hosts `http_schedule` holds) with the
//! built-in default policy `none`, each decision claiming 2 GiB, so claims
//! pile up as they do under `http_schedule` (whose clients never confirm
//! them). This is the part of an HTTP decision that runs under the
//! cluster's lock, one decision at a time, so it bounds how many decisions
//! a second one cluster can take; here it is timed without HTTP, the store
//! or other threads, which on a two-core machine blur it by more than the
//! changes it is meant to compare.
//!
//! Two samplings: `adaptive` (a rotating window of 500 hosts, the
//! server's default) and `all` (every host). For each, the policy runs
//! with every unit as its embedded component in the real sandbox and with
//! the same units compiled natively, interleaved decision by decision,
//! each over a cluster of its own.
//!
//! Run with: `cargo bench --bench held` (figures in docs/performance.md);
//! `HELD_LEAVE_OUT=HostedEngineSpares,...` runs the policy without those
//! units.
//! Prints per sampling and build
//! `held hosts=10000 sampling=... build=wasm|native decisions=... claims_at_end=... median_us=... p90_us=... min_us=...`
//! and `held hosts=10000 sampling=... wasm_over_native=...`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use sandpiper::builtin::UNITS;
use sandpiper::pipeline::ParamValues;
use sandpiper::placement::{ClusterState, PlaceContext, PlaceRequest, Sampling, Timestamp};
use sandpiper::sandbox::{Limits, Runtime};
use sandpiper::snapshot::Snapshot;
use sandpiper::unit::Unit;
use serde_json::json;

mod support;

/// Hosts held: the seed's "more than 10,000 hypervisors".
const HOSTS: usize = 10_000;
/// Untimed decisions first, so every window's answers are kept.
const WARMUP: usize = 200;
/// Units (comma-separated names) to take out of the policy: what a
/// decision would cost if they made no call, the most that skipping or
/// reusing their calls could save (docs/performance.md).
const LEAVE_OUT_ENV: &str = "HELD_LEAVE_OUT";

/// Takes the units named in `names` out of `spec`'s filters and weights;
/// a name the policy does not have is an error, not a silent full run.
fn leave_out(spec: &mut sandpiper::builtin::BuiltinPolicy, names: &str) -> anyhow::Result<()> {
    for name in names.split(',').filter(|n| !n.is_empty()) {
        let before = spec.filters.len() + spec.weights.len();
        spec.filters.retain(|f| f.unit != name);
        spec.weights.retain(|w| w.unit != name);
        if spec.filters.len() + spec.weights.len() == before {
            bail!("{LEAVE_OUT_ENV}: the default policy has no unit {name:?}");
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let runtime = Runtime::new(Limits::default()).context("starting the sandbox runtime")?;
    let mut spec = support::default_policy_spec()?;
    if let Ok(names) = std::env::var(LEAVE_OUT_ENV) {
        leave_out(&mut spec, &names)?;
    }
    let mut wasm = HashMap::new();
    let mut native: HashMap<String, Arc<dyn Unit>> = HashMap::new();
    for builtin in UNITS {
        let unit: Arc<dyn Unit> = runtime
            .load(builtin.wasm)
            .with_context(|| format!("loading {}", builtin.package))?;
        wasm.insert(unit.info().name.clone(), unit);
        let unit = builtin.native();
        native.insert(unit.info.name.clone(), Arc::new(unit));
    }
    let policies = [
        ("wasm", support::compose(&spec, &wasm)?),
        ("native", support::compose(&spec, &native)?),
    ];
    let snapshot: Snapshot = serde_json::from_value(json!({
        "hosts": (0..HOSTS).map(|i| support::host(i, 2)).collect::<Vec<_>>(),
    }))
    .context("the bench's hosts")?;

    let params = ParamValues::default();
    for (sampling, decisions) in [(Sampling::Adaptive, 3_000), (Sampling::All, 400)] {
        let mut states = Vec::new();
        for _ in &policies {
            let mut state = ClusterState::new();
            state
                .replace_snapshot(1, snapshot.clone())
                .context("holding the hosts")?;
            states.push(state);
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(decisions); policies.len()];
        for i in 0..WARMUP + decisions {
            let request: PlaceRequest = serde_json::from_value(json!({
                "vm": { "id": format!("vm-{i}"), "memory_mib": 2048.0, "vcpus": 2 }
            }))
            .context("the bench's request")?;
            for (at, ((_, policy), state)) in policies.iter().zip(&mut states).enumerate() {
                let cx = PlaceContext {
                    policy,
                    params: &params,
                    decision_id: uuid::Uuid::new_v4(),
                    now: Timestamp::now(),
                    claim_ttl: Duration::from_secs(3600),
                    hold_deadline: None,
                    dry_run: false,
                    sampling,
                    reuse_answers: true,
                    cores: None,
                };
                let started = Instant::now();
                let (outcome, _changes) = state
                    .place(&request, &cx)
                    .with_context(|| format!("decision {i}"))?;
                let took = started.elapsed();
                if !outcome.complete {
                    bail!("decision {i} placed nothing");
                }
                if i >= WARMUP {
                    times[at].push(took);
                }
            }
        }
        let mut medians = Vec::new();
        for (((build, _), mut samples), state) in policies.iter().zip(times).zip(&states) {
            samples.sort();
            let at = |share: f64| {
                samples[((samples.len() as f64 * share) as usize).min(samples.len() - 1)]
            };
            let us = |d: Duration| d.as_secs_f64() * 1e6;
            println!(
                "held hosts={HOSTS} sampling={sampling} build={build} decisions={decisions} \
                 claims_at_end={} median_us={:.0} p90_us={:.0} min_us={:.0}",
                state.summary().claims,
                us(at(0.5)),
                us(at(0.9)),
                us(samples[0]),
            );
            medians.push(at(0.5));
        }
        println!(
            "held hosts={HOSTS} sampling={sampling} wasm_over_native={:.2}",
            medians[0].as_secs_f64() / medians[1].as_secs_f64()
        );
    }
    Ok(())
}
