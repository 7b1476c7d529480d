//! The engines' own protocols over the real listeners of the real
//! `sandpiper` binary, 1,000 hosts held (issue #14):
//!
//! * **oVirt's XML-RPC** (`--ovirt-listen`): what the engine does per VM
//!   with external units, `runFilters` then `runCostFunctions` on the
//!   survivors, with the shape of the published proxy measurement (one
//!   memory filter; a CPU score ×2 and a VM-count score ×1): `Memory`,
//!   then `OptimalForCpuEvenDistribution` ×2 and
//!   `OptimalForEvenGuestDistribution` ×1, each unit a WebAssembly
//!   component. The anchor: 119 ms p50 for ovirt-scheduler-proxy at 1,000
//!   hosts (a Python process per plugin).
//! * **kube-scheduler's extender** (`--extender-listen`), node cache
//!   capable: `filter` with the 1,000 node names, then `prioritize` on the
//!   survivors, as kube-scheduler drives it, with the built-in
//!   `nova_default` policy. The anchor: ~111 pods/s (9 ms a pod) for an
//!   extender at 500 nodes.
//!
//! Run with: `cargo bench --bench front_doors` (figures in
//! docs/performance.md). Prints
//! `xmlrpc hosts=1000 filter_score_ms=<median> ... load=<1-minute load>` and
//! `extender nodes=1000 filter_prioritize_ms=<median> ... load=...`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use dxr::{MethodResponse, Value as Xml};
use serde_json::{Value, json};

mod support;
use support::{Client, Server, load_average, ms};

/// Hosts held, and asked about in every call.
const HOSTS: usize = 1_000;
/// Untimed rounds first, so units, caches and connections are warm.
const WARMUP: usize = 20;
/// Timed rounds (each two calls).
const ROUNDS: usize = 200;
/// The server under test with both front doors' own listeners.
struct Doors {
    server: Server,
    ovirt: SocketAddr,
    extender: SocketAddr,
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("temp dir")?;
    let db = dir.path().join("bench.db");
    let free = || -> anyhow::Result<SocketAddr> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
    };
    let (ovirt, extender) = (free()?, free()?);
    let (ovirt_flag, extender_flag) = (ovirt.to_string(), extender.to_string());
    let server = Server::start(
        &db,
        &[
            "--ovirt-listen",
            &ovirt_flag,
            "--extender-listen",
            &extender_flag,
        ],
        &[],
    )?;
    let mut doors = Doors {
        server,
        ovirt,
        extender,
    };
    let result = run(&doors);
    doors.server.stop();
    result
}

fn run(doors: &Doors) -> anyhow::Result<()> {
    let server = &doors.server;
    let mut admin = Client::connect(server.addr)?;
    let policies = admin.json("GET", "/api/v1/schedulingpolicies", None)?;
    let policy_id = |name: &str| -> anyhow::Result<Value> {
        policies
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .map(|p| p["id"].clone())
            .with_context(|| format!("policy {name}"))
    };
    for (cluster, policy, prefix) in [
        ("ovirt", "none", "00000000-0000-0000-0000-"),
        ("kube", "nova_default", "node-"),
    ] {
        let created = admin.json(
            "POST",
            "/api/v1/clusters",
            Some(&json!({ "name": cluster, "scheduling_policy": { "id": policy_id(policy)? } })),
        )?;
        let id = created["id"].as_str().context("cluster id")?;
        let hosts: Vec<Value> = (0..HOSTS).map(|i| host(&host_id(prefix, i))).collect();
        let vms =
            vec![json!({ "id": VM, "host": host_id(prefix, 0), "memory_mib": 2048, "vcpus": 2 })];
        admin.json(
            "PUT",
            &format!("/api/v1/clusters/{id}/inventory"),
            Some(&json!({ "generation": 1, "hosts": hosts, "vms": vms })),
        )?;
    }

    // oVirt: runFilters, then runCostFunctions on the survivors.
    let ids: Vec<String> = (0..HOSTS)
        .map(|i| host_id("00000000-0000-0000-0000-", i))
        .collect();
    let mut engine = Client::connect_as(doors.ovirt, None)?;
    let mut times = Vec::with_capacity(ROUNDS);
    let mut kept = 0;
    for round in 0..WARMUP + ROUNDS {
        let started = Instant::now();
        let filtered = xml_result(
            &engine.raw(
                "POST",
                "/",
                "text/xml",
                call(
                    "runFilters",
                    &[
                        strings(&["Memory"]),
                        strings(&ids),
                        s(VM),
                        "<struct/>".into(),
                    ],
                )
                .into_bytes(),
            )?,
        )?;
        let survivors: Vec<String> = match filtered {
            Xml::Array(items) => items
                .into_iter()
                .filter_map(|v| match v {
                    Xml::String(s) => Some(s),
                    _ => None,
                })
                .collect(),
            other => bail!("runFilters result {other:?}"),
        };
        let pairs = format!(
            "<array><data>{}{}</data></array>",
            pair("OptimalForCpuEvenDistribution", 2),
            pair("OptimalForEvenGuestDistribution", 1)
        );
        let scored = xml_result(
            &engine.raw(
                "POST",
                "/",
                "text/xml",
                call(
                    "runCostFunctions",
                    &[pairs, strings(&survivors), s(VM), "<struct/>".into()],
                )
                .into_bytes(),
            )?,
        )?;
        ensure!(
            matches!(&scored, Xml::Array(items) if items.len() == survivors.len()),
            "a cost per survivor"
        );
        if round >= WARMUP {
            times.push(started.elapsed());
            kept = survivors.len();
        }
    }
    println!(
        "xmlrpc hosts={HOSTS} filter_score_ms={:.2} p95_ms={:.2} kept={kept} rounds={ROUNDS} load={}",
        ms(percentile(&mut times, 50)),
        ms(percentile(&mut times, 95)),
        load_average()
    );

    // kube-scheduler: filter, then prioritize on the survivors.
    let names: Vec<String> = (0..HOSTS).map(|i| host_id("node-", i)).collect();
    let pod = json!({
        "metadata": { "name": "virt-launcher-bench", "namespace": "default" },
        "spec": { "containers": [{ "name": "compute",
            "resources": { "requests": { "cpu": "2", "memory": "2Gi" } } }] }
    });
    let mut kube = Client::connect_as(doors.extender, None)?;
    let mut times = Vec::with_capacity(ROUNDS);
    let mut kept = 0;
    for round in 0..WARMUP + ROUNDS {
        let started = Instant::now();
        let filtered = kube.json(
            "POST",
            "/k8s/kube/filter",
            Some(&json!({ "Pod": pod, "NodeNames": names })),
        )?;
        ensure!(filtered["Error"] == "", "filter: {}", filtered["Error"]);
        let survivors = filtered["NodeNames"].clone();
        let scores = kube.json(
            "POST",
            "/k8s/kube/prioritize",
            Some(&json!({ "Pod": pod, "NodeNames": survivors })),
        )?;
        ensure!(scores.is_array(), "a HostPriorityList");
        if round >= WARMUP {
            times.push(started.elapsed());
            kept = survivors.as_array().map_or(0, Vec::len);
        }
    }
    println!(
        "extender nodes={HOSTS} filter_prioritize_ms={:.2} p95_ms={:.2} kept={kept} rounds={ROUNDS} load={}",
        ms(percentile(&mut times, 50)),
        ms(percentile(&mut times, 95)),
        load_average()
    );
    Ok(())
}

/// The VM asked about (held, on the first host).
const VM: &str = "99999999-9999-9999-9999-999999999999";

fn host_id(prefix: &str, i: usize) -> String {
    if prefix.ends_with('-') && prefix.len() > 10 {
        format!("{prefix}{i:012}")
    } else {
        format!("{prefix}{i:04}")
    }
}

/// Host `i`: 64 to 512 GiB, 30 to 80 % free, some too full for a 2 GiB VM.
fn host(id: &str) -> Value {
    let i: usize = id
        .rsplit(['-'])
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let total = 65536.0 * (1 + i % 8) as f64;
    let free = if i.is_multiple_of(10) {
        1024.0
    } else {
        (total * (0.3 + 0.5 * ((i * 7919) % 100) as f64 / 100.0)).floor()
    };
    json!({
        "id": id,
        "status": "up",
        "metrics": {
            "memory_total_mib": total,
            "memory_free_mib": free,
            "cpu_sockets": 2,
            "cpu_cores": 16 * (1 + i % 4),
            "cpu_threads": 32 * (1 + i % 4),
            "cpu_usage_percent": (i % 90) as f64,
        },
        "capabilities": { "kubevirt.io/schedulable": "true" },
    })
}

/// An XML-RPC call as oVirt's engine writes it.
fn call(method: &str, params: &[String]) -> String {
    let params: String = params
        .iter()
        .map(|p| format!("<param><value>{p}</value></param>"))
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><methodCall><methodName>{method}</methodName>\
         <params>{params}</params></methodCall>"
    )
}

fn s(text: &str) -> String {
    text.to_owned()
}

fn strings(items: &[impl AsRef<str>]) -> String {
    let values: String = items
        .iter()
        .map(|i| format!("<value>{}</value>", i.as_ref()))
        .collect();
    format!("<array><data>{values}</data></array>")
}

fn pair(name: &str, factor: i32) -> String {
    format!(
        "<value><array><data><value>{name}</value><value><i4>{factor}</i4></value></data></array></value>"
    )
}

/// The `result` of an XML-RPC answer whose `result_code` is 0.
fn xml_result((status, body): &(u16, Vec<u8>)) -> anyhow::Result<Xml> {
    ensure!(*status == 200, "status {status}");
    let text = std::str::from_utf8(body)?;
    let response = MethodResponse::from_xml(text).map_err(|e| anyhow::anyhow!("{e}: {text}"))?;
    let Xml::Struct(mut members) = response.value else {
        bail!("not a struct: {text}");
    };
    ensure!(
        members.get("result_code") == Some(&Xml::Integer(0)),
        "result_code: {text}"
    );
    members.remove("result").context("result")
}

fn percentile(times: &mut [Duration], p: usize) -> Duration {
    times.sort();
    times[(times.len() * p / 100).min(times.len() - 1)]
}
