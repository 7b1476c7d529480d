//! The engine's side of the compact form: a JSON snapshot's hosts and VMs
//! written as the two Arrow streams a compact body carries. For engines
//! written in Rust, and for the tests and benchmarks, which send the same
//! snapshot both ways and compare.
//!
//! Texts that repeat across hosts or VMs (status, address, zone, each
//! capability, each VM's host) are dictionary-encoded, so a value sent by
//! every host (a cluster's few `cpu_info` descriptions) is sent once.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float64Builder, ListBuilder, StringBuilder,
    StringDictionaryBuilder, UInt32Builder,
};
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, ListArray, RecordBatch, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{ArrowError, DataType, Field};

use crate::snapshot::{Host, RunningVm, Snapshot, Status};

/// What the compact form cannot carry, or the Arrow writer's own error.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The host has what only the JSON form carries.
    #[error("host `{host}` has {what}, which only the JSON snapshot carries")]
    Unsupported { host: String, what: &'static str },
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}

/// Where in a compact body [`Streams::body`] starts each part's data: a
/// multiple of the widest alignment an Arrow buffer of ours needs (`f64`,
/// `i64`).
pub const PART_ALIGNMENT: usize = 8;

/// A compact body's two streams.
#[derive(Clone, Debug)]
pub struct Streams {
    pub hosts: Vec<u8>,
    pub vms: Vec<u8>,
}

/// A compact schedule body and its `Content-Type`.
#[derive(Clone, Debug)]
pub struct CompactBody {
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Streams {
    /// The two streams decoded, as the server decodes a compact body's
    /// parts: what the tests and benchmarks build from.
    pub fn read(self) -> Result<(super::ArrowHosts, super::ArrowVms), super::ColumnsError> {
        Ok((
            super::ArrowHosts::read(self.hosts.into())?,
            super::ArrowVms::read(self.vms.into())?,
        ))
    }

    /// The compact schedule body of `request` (a schedule request in JSON
    /// without `hosts` and `vms`) over these streams: `multipart/form-data`
    /// with the parts `request`, `hosts` and `vms`.
    ///
    /// Each part's data starts a multiple of [`PART_ALIGNMENT`] bytes
    /// into the body, padded with spaces after its delimiter (RFC 2046's
    /// transport padding), so that the server, which reads the columns
    /// where they lie in the body, finds every Arrow buffer aligned for
    /// its type and copies none.
    pub fn body(&self, request: &serde_json::Value) -> Result<CompactBody, getrandom::Error> {
        // A random boundary: Arrow's bytes may hold any fixed one.
        let mut random = [0u8; 16];
        getrandom::fill(&mut random)?;
        let boundary: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let mut body = Vec::new();
        let parts = [
            (
                "request",
                "application/json",
                request.to_string().into_bytes(),
            ),
            ("hosts", super::ARROW_STREAM, self.hosts.clone()),
            ("vms", super::ARROW_STREAM, self.vms.clone()),
        ];
        for (name, media, bytes) in parts {
            let headers = format!(
                "\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\
                 Content-Type: {media}\r\n\r\n"
            );
            let delimiter = format!("--{boundary}");
            let unpadded = body.len() + delimiter.len() + headers.len();
            let padding = unpadded.next_multiple_of(PART_ALIGNMENT) - unpadded;
            body.extend(delimiter.as_bytes());
            body.extend(std::iter::repeat_n(b' ', padding));
            body.extend(headers.as_bytes());
            body.extend(bytes);
            body.extend(b"\r\n");
        }
        body.extend(format!("--{boundary}--\r\n").as_bytes());
        Ok(CompactBody {
            content_type: format!("multipart/form-data; boundary={boundary}"),
            body,
        })
    }
}

/// Writes `snapshot`'s hosts and VMs as Arrow IPC streams.
pub fn write(snapshot: &Snapshot) -> Result<Streams, WriteError> {
    Ok(Streams {
        hosts: stream(hosts_batch(&snapshot.hosts)?)?,
        vms: stream(vms_batch(&snapshot.vms)?)?,
    })
}

fn stream(batch: RecordBatch) -> Result<Vec<u8>, ArrowError> {
    let mut writer = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    writer.write(&batch)?;
    writer.finish()?;
    writer.into_inner()
}

fn hosts_batch(hosts: &[Host]) -> Result<RecordBatch, WriteError> {
    for host in hosts {
        if host.hardware.is_some() {
            return Err(WriteError::Unsupported {
                host: host.id.clone(),
                what: "hardware",
            });
        }
    }
    let names = |each: &dyn Fn(&Host) -> Vec<&str>| -> BTreeSet<String> {
        hosts.iter().flat_map(each).map(str::to_owned).collect()
    };
    let statuses: Vec<String> = hosts.iter().map(|h| status_name(h.status)).collect();
    let mut columns: Vec<(String, ArrayRef)> = vec![
        (
            "id".into(),
            texts(hosts.iter().map(|h| Some(h.id.as_str()))),
        ),
        (
            "status".into(),
            dictionary(statuses.iter().map(|s| Some(s.as_str()))),
        ),
        (
            "address".into(),
            dictionary(hosts.iter().map(|h| Some(h.address.as_str()))),
        ),
        (
            "zone".into(),
            dictionary(hosts.iter().map(|h| Some(h.zone.as_str()))),
        ),
    ];
    // Without names, a host's name is its id: the column is left out.
    if hosts.iter().any(|h| h.name.is_some()) {
        columns.push((
            "name".into(),
            texts(hosts.iter().map(|h| h.name.as_deref())),
        ));
    }
    for name in names(&|h| h.metrics.keys().map(String::as_str).collect()) {
        let values = hosts.iter().map(|h| h.metrics.get(&name).copied());
        columns.push((format!("metrics.{name}"), figures(values)));
    }
    for name in names(&|h| h.flags.iter().map(String::as_str).collect()) {
        let values = hosts.iter().map(|h| Some(h.flags.contains(&name)));
        let mut column = BooleanBuilder::new();
        column.extend(values);
        columns.push((format!("flags.{name}"), Arc::new(column.finish())));
    }
    for name in names(&|h| h.named_metrics.keys().map(String::as_str).collect()) {
        let values = hosts.iter().map(|h| h.named_metrics.get(&name).copied());
        columns.push((format!("named_metrics.{name}"), figures(values)));
    }
    for key in names(&|h| h.capabilities.keys().map(String::as_str).collect()) {
        let values = hosts
            .iter()
            .map(|h| h.capabilities.get(&key).map(String::as_str));
        columns.push((format!("capabilities.{key}"), dictionary(values)));
    }
    if hosts.iter().any(|h| !h.networks.is_empty()) {
        columns.push((
            "networks".into(),
            lists(hosts.iter().map(|h| h.networks.iter().map(String::as_str))),
        ));
    }
    if hosts.iter().any(|h| !h.aggregates.is_empty()) {
        columns.push((
            "aggregates".into(),
            lists(
                hosts
                    .iter()
                    .map(|h| h.aggregates.keys().map(String::as_str)),
            ),
        ));
    }
    if hosts
        .iter()
        .any(|h| h.aggregates.values().any(|metadata| !metadata.is_empty()))
    {
        columns.push((
            "aggregate_metadata".into(),
            pair_lists(
                ("key", "value"),
                hosts.iter().map(|h| {
                    h.aggregates
                        .values()
                        .flatten()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                }),
            ),
        ));
    }
    if hosts.iter().any(|h| !h.instances.is_empty()) {
        columns.push((
            "instances".into(),
            pair_lists(
                ("tenant", "instance_type"),
                hosts.iter().map(|h| {
                    h.instances
                        .iter()
                        .map(|i| (i.tenant.as_str(), i.instance_type.as_str()))
                }),
            ),
        ));
    }
    Ok(RecordBatch::try_from_iter(columns)?)
}

fn vms_batch(vms: &[RunningVm]) -> Result<RecordBatch, ArrowError> {
    let mut vcpus = UInt32Builder::new();
    vcpus.extend(vms.iter().map(|vm| Some(vm.vcpus)));
    let flag = |value: fn(&RunningVm) -> bool| -> ArrayRef {
        let mut column = BooleanBuilder::new();
        column.extend(vms.iter().map(|vm| Some(value(vm))));
        Arc::new(column.finish())
    };
    let mut columns = vec![
        ("id", texts(vms.iter().map(|vm| Some(vm.id.as_str())))),
        (
            "host",
            dictionary(vms.iter().map(|vm| Some(vm.host.as_str()))),
        ),
        (
            "memory_mib",
            figures(vms.iter().map(|vm| Some(vm.memory_mib))),
        ),
        (
            "memory_guaranteed_mib",
            figures(vms.iter().map(|vm| vm.memory_guaranteed_mib)),
        ),
        ("vcpus", Arc::new(vcpus.finish()) as ArrayRef),
        (
            "cpu_usage_percent",
            figures(vms.iter().map(|vm| Some(vm.cpu_usage_percent))),
        ),
        ("migratable", flag(|vm| vm.migratable)),
        ("highly_available", flag(|vm| vm.highly_available)),
        ("hosted_engine", flag(|vm| vm.hosted_engine)),
        ("pending", flag(|vm| vm.pending)),
    ];
    if vms.iter().any(|vm| vm.name.is_some()) {
        columns.push(("name", texts(vms.iter().map(|vm| vm.name.as_deref()))));
    }
    RecordBatch::try_from_iter(columns)
}

/// The snapshot's spelling of `status` (its serde name).
fn status_name(status: Status) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(name)) => name,
        _ => String::new(),
    }
}

fn texts<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut column = StringBuilder::new();
    column.extend(values);
    Arc::new(column.finish())
}

fn dictionary<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut column = StringDictionaryBuilder::<Int32Type>::new();
    column.extend(values);
    Arc::new(column.finish())
}

fn figures(values: impl Iterator<Item = Option<f64>>) -> ArrayRef {
    let mut column = Float64Builder::new();
    column.extend(values);
    Arc::new(column.finish())
}

fn lists<'a, R: Iterator<Item = &'a str>>(rows: impl Iterator<Item = R>) -> ArrayRef {
    let mut column = ListBuilder::new(StringBuilder::new());
    for row in rows {
        for text in row {
            column.values().append_value(text);
        }
        column.append(true);
    }
    Arc::new(column.finish())
}

/// Lists of structs of two texts named `names`, each dictionary-encoded
/// (metadata keys and values, tenants, repeat across hosts).
fn pair_lists<'a, R: Iterator<Item = (&'a str, &'a str)>>(
    names: (&str, &str),
    rows: impl Iterator<Item = R>,
) -> ArrayRef {
    let mut firsts = StringDictionaryBuilder::<Int32Type>::new();
    let mut seconds = StringDictionaryBuilder::<Int32Type>::new();
    let mut offsets = vec![0i32];
    for row in rows {
        for (first, second) in row {
            firsts.append_value(first);
            seconds.append_value(second);
        }
        offsets.push(i32::try_from(firsts.len()).unwrap_or(i32::MAX));
    }
    let texts = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let field = |name: &str| Arc::new(Field::new(name, texts.clone(), true));
    let pairs = StructArray::from(vec![
        (field(names.0), Arc::new(firsts.finish()) as ArrayRef),
        (field(names.1), Arc::new(seconds.finish()) as ArrayRef),
    ]);
    let item = Arc::new(Field::new_list_field(pairs.data_type().clone(), true));
    Arc::new(ListArray::new(
        item,
        OffsetBuffer::new(offsets.into()),
        Arc::new(pairs),
        None,
    ))
}
