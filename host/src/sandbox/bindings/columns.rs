//! The inventory's numeric columns lowered straight from the snapshot.
//!
//! `bindgen!`'s imports return owned values, so the generated
//! `host-metrics` copies a column out of the shared snapshot into a fresh
//! `Vec`, and wasmtime then copies that `Vec` into the unit's memory: two
//! copies of 80 KB per column at 10,000 hosts, for every column every
//! call reads. The functions here replace the generated `host-metrics`,
//! `host-named-metric`, `vm-hosts` and `vm-metrics` of every version (same
//! names, same types, defined over them in the linker) and hand wasmtime
//! the snapshot's own `Arc`, which it lowers with one copy. What a unit
//! receives is the same list, byte for byte.

use sandpiper_model as model;
use wasmtime::component::{ComponentType, Lift, Linker};

use super::{PolicyVersion, v0_1, v0_2, v0_3};
use crate::sandbox::call_state::CallState;

/// Defines the column functions of every version over the generated ones;
/// call after each version's `add_to_linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined =
        define::<v0_1::types::HostMetric, v0_1::types::VmMetric>(linker, PolicyVersion::V0_1)
            .and_then(|()| {
                define::<v0_2::types::HostMetric, v0_2::types::VmMetric>(
                    linker,
                    PolicyVersion::V0_2,
                )
            })
            .and_then(|()| {
                define::<v0_3::types::HostMetric, v0_3::types::VmMetric>(
                    linker,
                    PolicyVersion::V0_3,
                )
            });
    linker.allow_shadowing(false);
    defined
}

/// One version's column functions, `H` and `V` being its metric enums.
fn define<H, V>(linker: &mut Linker<CallState>, version: PolicyVersion) -> wasmtime::Result<()>
where
    H: ComponentType + Lift + Into<model::HostMetric> + Send + Sync + 'static,
    V: ComponentType + Lift + Into<model::VmMetric> + Send + Sync + 'static,
{
    let name = format!("sandpiper:policy/inventory@{}", version.package_version());
    let mut inventory = linker.instance(&name)?;
    inventory.func_wrap("host-metrics", |mut store, (metric,): (H,)| {
        let column = store
            .data_mut()
            .inventory()
            .host_metric_column(metric.into());
        Ok((column,))
    })?;
    inventory.func_wrap("host-named-metric", |mut store, (name,): (String,)| {
        Ok((store.data_mut().inventory().host_named_metric_column(&name),))
    })?;
    inventory.func_wrap("vm-hosts", |mut store, (): ()| {
        Ok((store.data_mut().inventory().vm_host_column(),))
    })?;
    inventory.func_wrap("vm-metrics", |mut store, (metric,): (V,)| {
        let column = store.data_mut().inventory().vm_metric_column(metric.into());
        Ok((column,))
    })?;
    Ok(())
}
