//! The policy simulator over the real binary (issue #18):
//! `sandpiper simulate --cluster-snapshot FILE (--trace FILE | generator
//! flags) --policy A --policy B -o json`, read back as JSON. Twenty empty
//! hosts take a generated workload; oVirt's `evenly_distributed` must end
//! with a smaller memory spread than `power_saving`, which must leave more
//! hosts empty. The same seed gives the same bytes; a CSV and a JSON Lines
//! trace of the same events give the same report; a bad line is refused
//! by its number and field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::simulation_cluster;

/// Compiled units cached once for every test of this file: the first
/// test to get here compiles the policies' units alone (as `sandpiper
/// iallocator` would), the others wait and then only read them back,
/// instead of five processes compiling the same units at once on a busy
/// machine.
fn cache() -> PathBuf {
    static WARM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    WARM.get_or_init(|| {
        let dir = crate::support::unit_cache_dir();
        let snapshot = dir.join("warm-cluster.json");
        std::fs::write(&snapshot, r#"{"hosts": [{"id": "h"}]}"#).expect("write");
        let output = Command::new(env!("CARGO_BIN_EXE_sandpiper"))
            .args(["simulate", "--cluster-snapshot"])
            .arg(&snapshot)
            .args(["--policy", "evenly_distributed", "--policy", "power_saving"])
            .args(["--policy", "none", "--arrivals", "1"])
            .env("SANDPIPER_CACHE_DIR", &dir)
            .output()
            .expect("run sandpiper");
        ok(&output);
        dir
    })
    .clone()
}

fn sandpiper(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sandpiper"))
        .args(args)
        .env("SANDPIPER_CACHE_DIR", cache())
        .output()
        .expect("run sandpiper")
}

/// Runs a simulation of `trace` on `cluster` that must be refused (exit 1);
/// what it says on stderr.
fn refused(cluster: &Path, trace: &Path) -> String {
    let output = sandpiper(&[
        "simulate",
        "--cluster-snapshot",
        cluster.to_str().expect("utf-8"),
        "--trace",
        trace.to_str().expect("utf-8"),
        "--policy",
        "none",
    ]);
    assert_eq!(output.status.code(), Some(1));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn ok(output: &Output) -> String {
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("utf-8")
}

/// [`simulation_cluster`] in a file of `dir`.
fn cluster(dir: &Path) -> PathBuf {
    let path = dir.join("cluster.json");
    std::fs::write(&path, simulation_cluster().to_string()).expect("write");
    path
}

fn simulate(cluster: &Path, more: &[&str]) -> String {
    let mut args = vec![
        "simulate",
        "--cluster-snapshot",
        cluster.to_str().expect("utf-8 path"),
        "--policy",
        "evenly_distributed",
        "--policy",
        "power_saving",
        "-o",
        "json",
    ];
    args.extend_from_slice(more);
    ok(&sandpiper(&args))
}

fn policy<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["policies"]
        .as_array()
        .expect("policies")
        .iter()
        .find(|p| p["policy"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

#[test]
fn evenly_distributed_spreads_and_power_saving_empties_hosts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster(dir.path());
    let text = simulate(&cluster, &["--seed", "7", "--arrivals", "150"]);
    let report: Value = serde_json::from_str(&text).expect("the report is JSON");
    assert_eq!(report["hosts"], 20);
    assert_eq!(report["trace"]["seed"], 7);
    let even = policy(&report, "evenly_distributed");
    let packed = policy(&report, "power_saving");
    for p in [even, packed] {
        assert_eq!(p["placed"], 150, "{p}");
        assert_eq!(p["refused"], 0, "{p}");
        assert!(p["samples"].as_array().expect("samples").len() > 2);
        assert_eq!(
            p["placements_per_host"].as_array().expect("per host").len(),
            20
        );
    }
    let stddev = |p: &Value| p["final"]["memory"]["stddev"].as_f64().expect("stddev");
    let empty = |p: &Value| p["final"]["empty_hosts"].as_u64().expect("empty hosts");
    assert!(
        stddev(even) < stddev(packed),
        "evenly_distributed {} vs power_saving {}",
        stddev(even),
        stddev(packed)
    );
    assert!(
        empty(packed) > empty(even),
        "power_saving {} vs evenly_distributed {} empty hosts",
        empty(packed),
        empty(even)
    );
    // The same VMs are on both clusters at the end: the same mean.
    assert_eq!(even["final"]["vms"], packed["final"]["vms"]);
}

#[test]
fn a_seed_gives_the_same_bytes_and_another_seed_another_trace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster(dir.path());
    let args = ["--seed", "11", "--arrivals", "60"];
    let first = simulate(&cluster, &args);
    assert_eq!(first, simulate(&cluster, &args), "same seed, other bytes");
    let other = simulate(&cluster, &["--seed", "12", "--arrivals", "60"]);
    assert_ne!(first, other);

    let trace = |seed: &str| ok(&sandpiper(&["simulate", "generate-trace", "--seed", seed]));
    assert_eq!(trace("3"), trace("3"));
    assert_ne!(trace("3"), trace("4"));
}

#[test]
fn csv_and_jsonl_traces_give_the_same_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster(dir.path());
    let generate = |format: &str| {
        ok(&sandpiper(&[
            "simulate",
            "generate-trace",
            "--seed",
            "5",
            "--arrivals",
            "40",
            "--format",
            format,
        ]))
    };
    let jsonl = dir.path().join("trace.jsonl");
    let csv = dir.path().join("trace.csv");
    std::fs::write(&jsonl, generate("jsonl")).expect("write");
    std::fs::write(&csv, generate("csv")).expect("write");
    assert!(
        std::fs::read_to_string(&csv)
            .expect("read")
            .starts_with("at_s,event,vm_id,memory_mib,vcpus\n")
    );
    let from_jsonl = simulate(&cluster, &["--trace", jsonl.to_str().expect("utf-8")]);
    let from_csv = simulate(&cluster, &["--trace", csv.to_str().expect("utf-8")]);
    assert_eq!(from_jsonl, from_csv);
    let report: Value = serde_json::from_str(&from_csv).expect("JSON");
    assert_eq!(report["trace"]["seed"], Value::Null);
    assert_eq!(policy(&report, "power_saving")["placed"], 40);
}

#[test]
fn a_bad_trace_line_is_refused_by_line_and_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster(dir.path());
    let trace = dir.path().join("bad.jsonl");
    std::fs::write(
        &trace,
        concat!(
            "{\"at_s\": 0, \"event\": \"arrive\", \"vm\": {\"id\": \"a\", \"memory_mib\": 1024}}\n",
            "\n",
            "{\"at_s\": 9, \"event\": \"arrive\", \"vm\": {\"id\": \"b\", \"memory_mib\": -4}}\n",
        ),
    )
    .expect("write");
    let stderr = refused(&cluster, &trace);
    assert!(stderr.contains("line 3: vm.memory_mib"), "{stderr}");

    // Out of order, in CSV.
    std::fs::write(
        &trace,
        "at_s,event,vm_id,memory_mib,vcpus\n60,arrive,a,1024,1\n30,arrive,b,1024,1\n",
    )
    .expect("write");
    let stderr = refused(&cluster, &trace);
    assert!(stderr.contains("line 3: at_s"), "{stderr}");
}

#[test]
fn the_html_report_is_one_self_contained_page() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = cluster(dir.path());
    let out = dir.path().join("report.html");
    let output = sandpiper(&[
        "simulate",
        "--cluster-snapshot",
        cluster.to_str().expect("utf-8"),
        "--policy",
        "evenly_distributed",
        "--policy",
        "power_saving",
        "--seed",
        "7",
        "--arrivals",
        "50",
        "-o",
        "html",
        "--out",
        out.to_str().expect("utf-8"),
    ]);
    ok(&output);
    let html = std::fs::read_to_string(&out).expect("the report file");
    assert!(html.starts_with("<!doctype html>"), "{html}");
    assert!(html.contains("<svg"), "no chart");
    assert!(html.contains("power_saving"));
    for external in ["src=\"http", "href=\"http", "<script src", "<link"] {
        assert!(!html.contains(external), "external asset: {external}");
    }
}

#[test]
fn a_vm_of_the_starting_cluster_departs_and_cannot_arrive_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let snapshot = dir.path().join("cluster.json");
    std::fs::write(
        &snapshot,
        json!({
            "hosts": [
                {"id": "a", "metrics": {"memory_total_mib": 65536, "memory_free_mib": 57344, "cpu_cores": 16}},
                {"id": "b", "metrics": {"memory_total_mib": 65536, "memory_free_mib": 65536, "cpu_cores": 16}}
            ],
            "vms": [{"id": "old", "host": "a", "memory_mib": 8192, "vcpus": 2}]
        })
        .to_string(),
    )
    .expect("write");
    let trace = dir.path().join("trace.csv");
    std::fs::write(
        &trace,
        "at_s,event,vm_id,memory_mib,vcpus\n0,arrive,old,1024,1\n60,depart,old,,\n",
    )
    .expect("write");
    let text = ok(&sandpiper(&[
        "simulate",
        "--cluster-snapshot",
        snapshot.to_str().expect("utf-8"),
        "--trace",
        trace.to_str().expect("utf-8"),
        "--policy",
        "none",
        "-o",
        "json",
    ]));
    let report: Value = serde_json::from_str(&text).expect("JSON");
    let none = policy(&report, "none");
    assert_eq!(none["refused"], 1, "{none}");
    assert_eq!(none["refusals"][0]["reason"], "already running on a");
    let first = &none["samples"][0];
    assert_eq!(
        (first["vms"].as_u64(), first["empty_hosts"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(first["memory"]["max"], 0.125);
    // Gone at 60 s: both hosts empty, its memory free again.
    assert_eq!(none["final"]["vms"], 0, "{none}");
    assert_eq!(none["final"]["empty_hosts"], 2);
    assert_eq!(none["final"]["memory"]["max"], 0.0);
}
