//! A generated cluster and requests that exercise every branch of the
//! HeadroomAffinity example, including the corners where languages could
//! disagree: fractional and NaN memory, a host with its capability repeated
//! (the first value counts), non-ASCII values, a repeated extra spec,
//! candidate lists that skip and reorder hosts, and the hardware columns of
//! WIT 0.2.0 (CPU flags, NUMA cells) with reasons sent as templates.

use std::sync::Arc;

use sandpiper_guest::Inventory;
use sandpiper_guest::model::hardware::{NumaTopology, VmHardware, VmNumaCell};
use sandpiper_guest::model::{HostLabels, HostMetric, KeyValue, Labels, Request, Vm};

/// A deterministic pseudo-random sequence (64-bit LCG, Knuth's MMIX
/// constants): the same cluster on every run and every machine.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// Racks hosts are in; `r-ü` checks that non-ASCII text crosses intact.
const RACKS: [&str; 4] = ["r1", "r2", "r3", "r-ü"];

/// `hosts` hosts with varied free memory and capabilities.
pub fn inventory(hosts: usize) -> Arc<Inventory> {
    let mut random = Sequence(hosts as u64);
    let mut free = Vec::with_capacity(hosts);
    let mut capabilities = Vec::with_capacity(hosts);
    for host in 0..hosts {
        free.push(match host % 50 {
            // Unknown free memory: both comparisons are false everywhere.
            7 => f64::NAN,
            // Fractions, to show arithmetic is the same in every language.
            11 => 4096.0 + 512.0 - 0.5,
            13 => 4096.0 + 512.0,
            _ => (random.next(64) * 256) as f64 + random.next(4) as f64 * 0.25,
        });
        let rack = RACKS[random.next(RACKS.len() as u64) as usize];
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        match host % 10 {
            // No rack at all.
            3 => pairs.push(("disk", "hdd")),
            // The rack twice: only the first value is the host's rack.
            5 => {
                pairs.push(("rack", "r9"));
                pairs.push(("rack", rack));
            }
            _ => {
                pairs.push(("disk", if host % 4 == 0 { "ssd" } else { "hdd" }));
                pairs.push(("rack", rack));
            }
        }
        capabilities.push(pairs);
    }
    // CPU flags: every host has `vmx`; some also `avx512f`, some `ü-flag`
    // (non-ASCII through the string table); every ninth reports none.
    let cpu_flags: Vec<Vec<(&str, &str)>> = (0..hosts)
        .map(|host| match host % 9 {
            0 => Vec::new(),
            1 | 4 => vec![("vmx", ""), ("avx512f", "")],
            5 => vec![("vmx", ""), ("ü-flag", ""), ("avx512f", "")],
            _ => vec![("vmx", "")],
        })
        .collect();
    // NUMA: 0 to 3 cells per host.
    let mut topology = NumaTopology {
        offsets: vec![0],
        ..NumaTopology::default()
    };
    for host in 0..hosts {
        for node in 0..(host % 4) as u32 {
            topology.node_ids.push(node);
            topology.sockets.push(node / 2);
        }
        topology.offsets.push(topology.node_ids.len() as u32);
    }
    let mut inventory = Inventory::new(hosts, 0);
    inventory
        .set_host_metric(HostMetric::MemoryFreeMib, free)
        .expect("one value per host");
    inventory
        .set_host_labels(HostLabels::Capabilities, Labels::from_rows(capabilities))
        .expect("one row per host");
    inventory
        .set_host_labels(HostLabels::CpuFlags, Labels::from_rows(cpu_flags))
        .expect("one row per host");
    inventory
        .set_numa_topology(topology)
        .expect("one row per host");
    Arc::new(inventory)
}

/// One call to compare across languages.
pub struct Call {
    pub name: &'static str,
    pub request: Request,
    pub candidates: Vec<u32>,
}

fn request(memory_mib: f64, extra_specs: &[(&str, &str)], params: &[(&str, &str)]) -> Request {
    Request {
        vm: Vm {
            id: "vm".into(),
            memory_mib,
            extra_specs: extra_specs
                .iter()
                .map(|(k, v)| KeyValue::new(*k, *v))
                .collect(),
            ..Vm::default()
        },
        params: params.iter().map(|(k, v)| KeyValue::new(*k, *v)).collect(),
        hints: Vec::new(),
    }
}

/// `request` for a VM needing `flags` and `cells` guest NUMA cells.
fn with_hardware(mut request: Request, flags: &[&str], cells: usize) -> Request {
    request.vm.hardware = VmHardware {
        required_cpu_flags: flags.iter().map(|flag| flag.to_string()).collect(),
        numa_cells: vec![VmNumaCell::default(); cells],
        ..VmHardware::default()
    };
    request
}

/// The calls every language must answer identically over `hosts` hosts.
/// Parameters are given as the host gives them: every declared one, with
/// its value.
pub fn calls(hosts: usize) -> Vec<Call> {
    let all: Vec<u32> = (0..hosts as u32).collect();
    let every_third_backwards: Vec<u32> = all.iter().rev().step_by(3).copied().collect();
    let defaults = [("HeadroomMib", "512"), ("LabelKey", "rack")];
    let mut calls = vec![
        Call {
            name: "4 GiB VM for rack r1, default parameters",
            request: request(4096.0, &[("rack", "r1")], &defaults),
            candidates: all.clone(),
        },
        Call {
            name: "fractional VM for a non-ASCII rack, large headroom",
            request: request(
                1000.5,
                &[("rack", "r-ü")],
                &[("HeadroomMib", "6000"), ("LabelKey", "rack")],
            ),
            candidates: every_third_backwards.clone(),
        },
        Call {
            name: "repeated extra spec: the first value counts",
            request: request(
                2048.0,
                &[("rack", "r9"), ("rack", "r2")],
                &[("HeadroomMib", "0"), ("LabelKey", "rack")],
            ),
            candidates: all.clone(),
        },
        Call {
            name: "another label key, the largest headroom",
            request: request(
                0.0,
                &[("disk", "ssd")],
                &[("HeadroomMib", "999999999"), ("LabelKey", "disk")],
            ),
            candidates: every_third_backwards,
        },
        Call {
            name: "no matching extra spec",
            request: request(8192.0, &[], &defaults),
            candidates: all.clone(),
        },
        Call {
            name: "required CPU flags: the first one missing is named",
            request: with_hardware(
                request(4096.0, &[("rack", "r1")], &defaults),
                &["avx512f", "ü-flag"],
                0,
            ),
            candidates: all.clone(),
        },
        Call {
            name: "two NUMA cells and a flag every reporting host has",
            request: with_hardware(request(2048.0, &[], &defaults), &["vmx"], 2),
            candidates: all.clone(),
        },
    ];
    // Values the host's pattern check would refuse, given straight to the
    // unit: every language must read them as Rust's `u32` does (a `+` and
    // surrounding blanks are fine; hex, digit separators, overflow and
    // nothing are not) and, for those it cannot read, reject every
    // candidate with the same message.
    for headroom in ["+512", " 512 ", "0x10", "1_000", "4294967296", ""] {
        calls.push(Call {
            name: "a HeadroomMib the pattern would refuse",
            request: request(
                4096.0,
                &[("rack", "r1")],
                &[("HeadroomMib", headroom), ("LabelKey", "rack")],
            ),
            candidates: all.clone(),
        });
    }
    calls
}
