//! oVirt's external scheduler endpoint: XML-RPC over HTTP `POST`, at `/`
//! (the engine's default `ExternalSchedulerServiceURL` is
//! `http://localhost:18781/`) and at `/RPC2` (the path Python's and most
//! XML-RPC clients default to). Served only on the listener an operator
//! binds with `--ovirt-listen`, with no token: the engine's XML-RPC client
//! sends none (docs/ovirt.md). The calls are read and answered by
//! `crate::ovirt`; the decision is the one every front door makes
//! (`placement::pick_over` over the held inventory of the hosts' cluster,
//! or `PlacementService::balance_admitted`), with an ad-hoc policy of the
//! units the call names.
//!
//! **Errors.** Every answer is HTTP 200 with XML-RPC in it, as XML-RPC
//! asks: a body that is not a call the server can read (too large, not
//! XML, not a `methodCall`, an unknown method, wrong parameters) is a
//! `<fault>` with a code and a message; a well-formed call that cannot be
//! decided is an answer with `result_code` 1 and the reason in `errors`
//! (`crate::ovirt`'s module doc).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use dxr::Value;
use sandpiper_model::HostText;
use uuid::Uuid;

use super::extract::{BodyLimit, body_bytes};
use super::{AppState, MAX_JSON_BODY_BYTES};
use crate::ovirt::xmlrpc::{self, code};
use crate::ovirt::{self, Balance, CostFunctions, Filters, Method, Reply};
use crate::pipeline::{Means, ParamValues, Policy, only_declared};
use crate::placement::{BalanceJob, HeldView, HostsSource, PlaceRequest, pick_over};
use crate::snapshot::{HostIndex, VmSpec};
use crate::unit::{Role, Unit};

/// Largest call body, bytes: the JSON API's own limit. A call carries
/// host ids (about 60 bytes of XML each), so a MiB holds some 16,000.
pub const MAX_CALL_BYTES: usize = MAX_JSON_BODY_BYTES;

/// The XML-RPC endpoint alone, for the `--ovirt-listen` listener.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/", post(rpc))
        .route("/RPC2", post(rpc))
        .layer(DefaultBodyLimit::max(MAX_CALL_BYTES))
        .layer(axum::Extension(BodyLimit(MAX_CALL_BYTES)))
        .fallback(not_here)
        .method_not_allowed_fallback(not_here)
        .with_state(state)
}

/// Anything but `POST /` or `POST /RPC2`: a fault naming the endpoint, so
/// an engine pointed at a wrong URL says why in its log.
async fn not_here() -> Response {
    xml(xmlrpc::fault(
        code::INVALID_REQUEST,
        "XML-RPC calls are POSTed to / or /RPC2",
    ))
}

fn xml(body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/xml; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A failure that ends a call with a fault.
struct Fault {
    code: i32,
    message: String,
}

impl Fault {
    fn internal(message: impl std::fmt::Display) -> Fault {
        Fault {
            code: code::INTERNAL_ERROR,
            message: message.to_string(),
        }
    }
}

/// `POST /`: one XML-RPC call.
async fn rpc(State(state): State<AppState>, request: Request) -> Response {
    match answer(&state, request).await {
        Ok(value) => xml(xmlrpc::response(value)),
        Err(Fault { code, message }) => xml(xmlrpc::fault(code, &message)),
    }
}

async fn answer(state: &AppState, request: Request) -> Result<Value, Fault> {
    let body = body_bytes(request, &()).await.map_err(|e| Fault {
        code: code::INVALID_REQUEST,
        message: e.to_string(),
    })?;
    // Parsed on the blocking pool: a large body takes milliseconds.
    let method = tokio::task::spawn_blocking(move || {
        let call = xmlrpc::parse_call(&body).map_err(|e| Fault {
            code: e.code(),
            message: e.to_string(),
        })?;
        Method::from_call(call).map_err(|e| Fault {
            code: e.code(),
            message: e.to_string(),
        })
    })
    .await
    .map_err(Fault::internal)??;
    match method {
        Method::Discover => {
            let mut conn = state.store().read().await.map_err(Fault::internal)?;
            let units = conn.units().await.map_err(Fault::internal)?;
            Ok(ovirt::discover(&units))
        }
        Method::RunFilters(call) => Ok(run_filters(state, call).await?.into_value()),
        Method::RunCostFunctions(call) => Ok(run_cost_functions(state, call).await?.into_value()),
        Method::RunLoadBalancing(call) => Ok(run_load_balancing(state, call).await?.into_value()),
    }
}

/// The units a call names, in a role: each one found, enabled, loaded and
/// exporting the role, or a message in `plugin_errors` for it.
async fn units(
    state: &AppState,
    names: &[String],
    role: Role,
    reply: &mut Reply,
) -> Result<Vec<Arc<dyn Unit>>, Fault> {
    let mut conn = state.store().read().await.map_err(Fault::internal)?;
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        let record = conn.unit_by_name(name).await.map_err(Fault::internal)?;
        let problem = match record {
            // The proxy's own words for a unit it does not have.
            None => Some(format!("plugin not found: '{name}'")),
            Some(r) if !r.enabled => Some(format!("unit `{}` is disabled", r.name)),
            Some(r) if !r.exports.has(role) => Some(format!(
                "unit `{}` does not export the {role} interface",
                r.name
            )),
            Some(r) => match state.registry().get(r.id) {
                Some(unit) => {
                    found.push(unit);
                    None
                }
                None => Some(format!("unit `{}` is not loaded", r.name)),
            },
        };
        if let Some(message) = problem {
            reply.plugin_error(name, message);
        }
    }
    Ok(found)
}

/// The cluster whose held inventory holds the first of `hosts` that any
/// holds, and every id that inventory holds. The engine names no cluster;
/// a host belongs to one.
async fn cluster_of(
    state: &AppState,
    hosts: &[String],
) -> Result<Option<(Uuid, HashSet<String>)>, Fault> {
    let asked: HashMap<&str, usize> = hosts
        .iter()
        .enumerate()
        .rev()
        .map(|(i, h)| (h.as_str(), i))
        .collect();
    let clusters = {
        let mut conn = state.store().read().await.map_err(Fault::internal)?;
        conn.clusters().await.map_err(Fault::internal)?
    };
    let mut best: Option<(usize, Uuid, HashSet<String>)> = None;
    for cluster in clusters {
        let held = state
            .placement()
            .held_host_ids(cluster.id)
            .await
            .map_err(Fault::internal)?;
        let first = held.iter().filter_map(|h| asked.get(h.as_str())).min();
        if let Some(&first) = first
            && best.as_ref().is_none_or(|(at, _, _)| first < *at)
        {
            best = Some((first, cluster.id, held.into_iter().collect()));
        }
    }
    Ok(best.map(|(_, id, held)| (id, held)))
}

/// What a `runFilters` or `runCostFunctions` decides with: the hosts'
/// cluster's held view and the VM.
struct Held {
    cluster: Uuid,
    view: HeldView,
    vm: VmSpec,
}

/// Resolves the call's hosts and VM against the held inventory, noting
/// every id it does not hold in `errors`. `None` when no cluster holds
/// any of the hosts.
async fn held(
    state: &AppState,
    hosts: &[String],
    vm_id: &str,
    reply: &mut Reply,
) -> Result<Option<Held>, Fault> {
    let Some((cluster, _)) = cluster_of(state, hosts).await? else {
        reply.errors.push(format!(
            "none of the {} hosts is in a cluster's held inventory: push the cluster's hosts \
             with PUT /api/v1/clusters/{{id}}/inventory",
            hosts.len()
        ));
        return Ok(None);
    };
    let view = state
        .placement()
        .held_view(cluster, hosts.to_vec())
        .await
        .map_err(Fault::internal)?;
    for id in &view.unknown {
        reply.errors.push(format!(
            "host {id} is not in cluster {cluster}'s held inventory: left out"
        ));
    }
    let running = state
        .placement()
        .held_vm(cluster, vm_id.to_owned())
        .await
        .map_err(Fault::internal)?;
    let vm = match running {
        // Judged where to run, not whether to leave its host: a decision
        // over the held view cannot resolve the VM's own host id
        // (docs/ovirt.md).
        Some(running) => VmSpec {
            current_host: None,
            ..running.to_migration()
        },
        None => {
            reply.errors.push(format!(
                "vm {vm_id} is not in cluster {cluster}'s held inventory (no host reports it): \
                 judged as a VM of no known size"
            ));
            VmSpec {
                id: vm_id.to_owned(),
                ..VmSpec::default()
            }
        }
    };
    Ok(Some(Held { cluster, view, vm }))
}

/// The ad-hoc policy of `build`'s units with the call's properties as its
/// parameters (only the keys its units declare: the engine sends every
/// property of the cluster's policy), or why not in `errors`.
fn policy(
    build: crate::pipeline::PolicyBuilder,
    units: &[Arc<dyn Unit>],
    properties: &ParamValues,
    reply: &mut Reply,
) -> Option<Policy> {
    match build
        .params(only_declared(properties, units.iter()))
        .build()
    {
        Ok(policy) => Some(policy),
        Err(e) => {
            reply.errors.push(e.to_string());
            None
        }
    }
}

/// One pick over the held view with `policy`, or why not in `errors`.
async fn decide(
    state: &AppState,
    held: Held,
    policy: Policy,
    reply: &mut Reply,
) -> Result<Option<crate::pipeline::Decision>, Fault> {
    let admission = match state.placement().admit(held.cluster) {
        Ok(admission) => admission,
        Err(e) => {
            reply.errors.push(e.to_string());
            return Ok(None);
        }
    };
    let Held { view, vm, .. } = held;
    let request = PlaceRequest {
        vm,
        ..PlaceRequest::default()
    };
    let cores = admission.lender();
    let decided = admission
        .run(move || {
            pick_over(
                &Arc::new(view.inventory),
                &HostIndex::default(),
                Some(view.candidates),
                &request,
                &policy,
                &ParamValues::new(),
                Means {
                    reuse: None,
                    cores: Some(&cores),
                },
            )
        })
        .await
        .map_err(Fault::internal)?;
    match decided {
        Ok(decision) => Ok(Some(decision)),
        Err(e) => {
            reply.errors.push(e.to_string());
            Ok(None)
        }
    }
}

/// `runFilters`: the hosts the named filters keep, in the order sent.
async fn run_filters(state: &AppState, call: Filters) -> Result<Reply, Fault> {
    let mut reply = Reply::default();
    let units = units(state, &call.filters, Role::Filter, &mut reply).await?;
    let mut decision = None;
    if !units.is_empty()
        && let Some(held) = held(state, &call.hosts, &call.vm, &mut reply).await?
    {
        let build = units
            .iter()
            .fold(Policy::builder(), |b, u| b.filter(Arc::clone(u)));
        if let Some(policy) = policy(build, &units, &call.properties, &mut reply) {
            decision = decide(state, held, policy, &mut reply).await?;
        }
    }
    reply.result = match decision {
        Some(decision) => {
            reply.note_unit_failures(&decision);
            ovirt::passed(&decision, &call.hosts)
        }
        // Nothing decided: every host sent, as the proxy answers when all
        // its filters failed.
        None => call.hosts.into_iter().map(xmlrpc::string).collect(),
    };
    Ok(reply)
}

/// `runCostFunctions`: a cost per host from the named score units and
/// their factors (lower is better), in the order sent.
async fn run_cost_functions(state: &AppState, call: CostFunctions) -> Result<Reply, Fault> {
    let mut reply = Reply::default();
    let names: Vec<String> = call.functions.iter().map(|(n, _)| n.clone()).collect();
    let units = units(state, &names, Role::Score, &mut reply).await?;
    if !units.is_empty()
        && let Some(held) = held(state, &call.hosts, &call.vm, &mut reply).await?
    {
        let factor_of = |unit: &Arc<dyn Unit>| {
            call.functions
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(&unit.info().name))
                .map_or(1, |(_, f)| *f)
        };
        let build = units.iter().fold(Policy::builder(), |b, u| {
            b.score(Arc::clone(u), factor_of(u))
        });
        if let Some(policy) = policy(build, &units, &call.properties, &mut reply)
            && let Some(decision) = decide(state, held, policy, &mut reply).await?
        {
            reply.note_unit_failures(&decision);
            reply.result = ovirt::costs(&decision, &call.hosts);
        }
    }
    Ok(reply)
}

/// `runLoadBalancing`: the VM the named balance unit would move and the
/// hosts it proposes (the engine then schedules the VM among them).
async fn run_load_balancing(state: &AppState, call: Balance) -> Result<Reply, Fault> {
    let mut reply = Reply {
        result: ovirt::no_migration(),
        ..Reply::default()
    };
    let units = units(
        state,
        std::slice::from_ref(&call.balance),
        Role::Balance,
        &mut reply,
    )
    .await?;
    let Some(unit) = units.first() else {
        return Ok(reply);
    };
    let Some((cluster, held)) = cluster_of(state, &call.hosts).await? else {
        reply.errors.push(format!(
            "none of the {} hosts is in a cluster's held inventory: push the cluster's hosts \
             with PUT /api/v1/clusters/{{id}}/inventory",
            call.hosts.len()
        ));
        return Ok(reply);
    };
    let mut seen = HashSet::new();
    let mut known = Vec::new();
    for id in &call.hosts {
        if !seen.insert(id.as_str()) {
            continue;
        }
        if held.contains(id) {
            known.push(id.clone());
        } else {
            reply.errors.push(format!(
                "host {id} is not in cluster {cluster}'s held inventory: left out"
            ));
        }
    }
    let build = Policy::builder().balance(Arc::clone(unit));
    let Some(policy) = policy(build, &units, &call.properties, &mut reply) else {
        return Ok(reply);
    };
    let admission = match state.placement().admit(cluster) {
        Ok(admission) => admission,
        Err(e) => {
            reply.errors.push(e.to_string());
            return Ok(reply);
        }
    };
    let job = BalanceJob {
        policy: Arc::new(policy),
        params: ParamValues::new(),
        candidates: Some(known),
        source: HostsSource::Held,
    };
    match state
        .placement()
        .balance_admitted(cluster, job, &admission)
        .await
    {
        Ok(balanced) => {
            if let (Some(vm), Some(proposal)) = (balanced.vm_id, &balanced.decision.proposal) {
                let ids = balanced
                    .decision
                    .explain
                    .inventory
                    .0
                    .host_text(HostText::Id);
                let hosts = proposal
                    .destinations
                    .iter()
                    .map(|&h| xmlrpc::string(ids.get(h as usize)))
                    .collect();
                reply.result = vec![xmlrpc::string(vm), Value::Array(hosts)];
            }
        }
        Err(e) => reply.errors.push(e.to_string()),
    }
    Ok(reply)
}
