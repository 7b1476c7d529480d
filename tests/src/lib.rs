//! What the integration tests share: the test units built from
//! `tests/guests/` and small builders for snapshots and requests.

use std::sync::{Arc, LazyLock};

use sandpiper::sandbox::{Limits, Runtime};
use sandpiper_guest::Inventory;
use sandpiper_guest::model::{HostMetric, KeyValue, Request};

/// The components built from `tests/guests/*` by `build.rs`: one constant
/// per crate (`SANDPIPER_TEST_HOSTILE`, ...) and `ALL`.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// The runtime with the default limits that tests loading the built-in
/// units share: one per test process, as `Runtime` asks, so each unit is
/// compiled once (its cache is by content) and not once per test module.
/// In a test build compiling every built-in unit takes about 30 s of CPU.
pub fn shared_runtime() -> &'static Runtime {
    static SHARED: LazyLock<Runtime> = LazyLock::new(runtime);
    &SHARED
}

/// A runtime of the test's own with the default limits.
pub fn runtime() -> Runtime {
    match Runtime::new(Limits::default()) {
        Ok(runtime) => runtime,
        Err(error) => panic!("the runtime should start: {error}"),
    }
}

/// A snapshot of `hosts` hosts, each with 16 GiB of memory of which host
/// `i` has `i * 1024 MiB` (modulo 16 GiB) free, and `vms` VMs on host 0.
pub fn inventory(hosts: usize, vms: usize) -> Arc<Inventory> {
    let mut inventory = Inventory::new(hosts, vms);
    let free = (0..hosts).map(|i| ((i * 1024) % 16384) as f64).collect();
    let columns = [
        inventory.set_host_metric(HostMetric::MemoryTotalMib, vec![16384.0; hosts]),
        inventory.set_host_metric(HostMetric::MemoryFreeMib, free),
    ];
    for column in columns {
        if let Err(error) = column {
            panic!("{error}");
        }
    }
    Arc::new(inventory)
}

/// A request for a 4 GiB VM with the unit parameters `params`.
pub fn request(params: &[(&str, &str)]) -> Request {
    let mut request = Request {
        params: params.iter().map(|&(k, v)| KeyValue::new(k, v)).collect(),
        ..Request::default()
    };
    request.vm.memory_mib = 4096.0;
    request
}

/// Host indices `0..n`.
pub fn all_hosts(n: usize) -> Vec<u32> {
    (0..n as u32).collect()
}
