//! The `inventory` import, as the functions `Inventory` fetches its columns
//! with (WebAssembly only).
//!
//! Each checks the host sent one row per host (or VM). A short or long
//! column is a broken host, not bad data: answering from it would be wrong
//! for every later row, so the call traps with a message naming the column,
//! which the host reports as the unit's failure.

use crate::bindings::inventory as wit;
use crate::model::{
    HostFlag, HostLabels, HostMetric, HostStatus, HostText, Interned, Labels, VmFlag, VmMetric,
    VmText,
};

/// Stops the call: the host broke the contract (see the module doc).
#[cold]
fn wrong_length(column: &str, expected: usize, actual: usize) -> ! {
    panic!("the host sent column `{column}` with {actual} rows, the snapshot has {expected}")
}

fn checked<T>(column: &str, rows: usize, values: Vec<T>) -> Vec<T> {
    if values.len() != rows {
        wrong_length(column, rows, values.len());
    }
    values
}

pub fn host_count() -> u32 {
    wit::host_count()
}

pub fn vm_count() -> u32 {
    wit::vm_count()
}

pub fn host_metric(metric: HostMetric, rows: usize) -> Vec<f64> {
    checked(metric.wit_name(), rows, wit::host_metrics(metric.into()))
}

pub fn host_statuses(rows: usize) -> Vec<HostStatus> {
    let statuses = checked("host-statuses", rows, wit::host_statuses());
    statuses.into_iter().map(HostStatus::from).collect()
}

pub fn host_flag(flag: HostFlag, rows: usize) -> Vec<bool> {
    flags(checked(flag.wit_name(), rows, wit::host_flags(flag.into())))
}

pub fn host_text(text: HostText, rows: usize) -> Interned {
    let column = wit::host_texts(text.into());
    if column.indices.len() != rows {
        wrong_length(text.wit_name(), rows, column.indices.len());
    }
    column.into()
}

pub fn host_labels(kind: HostLabels, rows: usize) -> Labels {
    let column = Labels::from(wit::host_labels(kind.into()));
    if column.rows() != rows {
        wrong_length(kind.wit_name(), rows, column.rows());
    }
    column
}

pub fn host_named_metric(name: &str, rows: usize) -> Vec<f64> {
    checked(name, rows, wit::host_named_metric(name))
}

pub fn vm_hosts(rows: usize) -> Vec<u32> {
    checked("vm-hosts", rows, wit::vm_hosts())
}

pub fn vm_metric(metric: VmMetric, rows: usize) -> Vec<f64> {
    checked(metric.wit_name(), rows, wit::vm_metrics(metric.into()))
}

pub fn vm_flag(flag: VmFlag, rows: usize) -> Vec<bool> {
    flags(checked(flag.wit_name(), rows, wit::vm_flags(flag.into())))
}

/// A yes/no column as the WIT sends it (`list<u8>`, 1 or 0) as booleans;
/// any non-zero byte is yes. Reuses the bytes' allocation.
fn flags(bytes: Vec<u8>) -> Vec<bool> {
    bytes.into_iter().map(|byte| byte != 0).collect()
}

pub fn vm_text(text: VmText, rows: usize) -> Interned {
    let column = wit::vm_texts(text.into());
    if column.indices.len() != rows {
        wrong_length(text.wit_name(), rows, column.indices.len());
    }
    column.into()
}
