//! The snapshot's compact form: a decision's hosts and their running VMs
//! as Apache Arrow columns, one IPC stream each, which an engine may send
//! instead of the JSON lists (`POST .../schedule` as `multipart/form-data`;
//! docs/compact-body.md).
//!
//! Why: an inline decision over 10,000 hosts and 30,000 VMs spent most of
//! its time reading 15.7 MB of JSON into rows and the rows into columns
//! (docs/performance.md, "Inline hosts read one at a time"). In Arrow each
//! column arrives as one buffer: figures are read as they lie, texts as
//! one block with offsets, and a dictionary-encoded column (every host's
//! `cpu_info` capability) carries each distinct value once.
//!
//! The columns, by field name; every one but the ids may be absent:
//!
//! | hosts | type | when null or absent |
//! |---|---|---|
//! | `id` | text | refused |
//! | `name`, `address`, `zone` | text | the id; empty |
//! | `status` | text: `up`, `disabled`, `maintenance`, `down`, `non_operational` | `up` |
//! | `metrics.<metric>` | figure | 0 |
//! | `flags.<flag>` | boolean | false |
//! | `named_metrics.<name>` | figure | absent |
//! | `capabilities.<key>` | text | the host has no such capability |
//! | `networks`, `aggregates` | list of texts | none |
//! | `aggregate_metadata` | list of structs {`key`, `value`}: every pair of every aggregate the host is in | none |
//! | `instances` | list of structs {`tenant`, `instance_type`} | none |
//!
//! | VMs | type | when null or absent |
//! |---|---|---|
//! | `id`, `host` | text | refused |
//! | `name` | text | the id |
//! | `memory_mib`, `cpu_usage_percent` | figure | 0 |
//! | `memory_guaranteed_mib` | figure | `memory_mib` |
//! | `vcpus` | figure (a whole number) | 1 |
//! | `migratable` | boolean | true |
//! | `highly_available`, `hosted_engine`, `pending` | boolean | false |
//!
//! A text is Arrow `Utf8`, `LargeUtf8`, `Utf8View` or a dictionary of
//! one of them; a figure any integer or `Float32`/`Float64`. Names and
//! meanings are the JSON snapshot's (`crate::snapshot::Host`,
//! `RunningVm`). Hosts with hardware (NUMA cells, PCI devices, CPU model
//! and flags) are sent as JSON: the compact form has no columns for it.
//!
//! Two steps, as for JSON hosts: [`ArrowHosts::read`] decodes a stream
//! (every buffer, offset, UTF-8 text and dictionary key validated by the
//! Arrow reader) and checks each column's name and type, refusing the
//! body with the column named ([`ColumnsError`], 422 `invalid_snapshot`);
//! [`ArrowHosts::build`] checks the values with the rules and errors of
//! `crate::inputs` at the JSON paths (`hosts[3].metrics.memory_free_mib`),
//! column by column, and builds the columns.

mod write;

pub use self::write::{CompactBody, PART_ALIGNMENT, Streams, WriteError, write};

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{Array, GenericStringArray, RecordBatch, StringViewArray, new_empty_array};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_ipc::reader::StreamDecoder;
use arrow_schema::DataType;
use sandpiper_model::interning::{Interner, LabelsBuilder};
use sandpiper_model::{HostFlag, HostLabels, HostMetric, HostStatus, HostText, Inventory};
use serde::Deserialize;

use crate::inputs::{
    check_display_name, check_host_metric, check_id, check_named_metric, check_running_vm,
    vcpus_from_figure,
};
use crate::snapshot::{
    Cluster, HostIndex, SnapshotError, SnapshotErrorKind, Status, VmColumns, VmRow, metric_name,
    snake_case_name,
};

/// The media type of each stream part.
pub const ARROW_STREAM: &str = "application/vnd.apache.arrow.stream";

/// A compact body's part that is not what it must be: not an Arrow stream,
/// or a column unknown, repeated, missing or of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ColumnsError {
    /// The part (`hosts`, `vms`), with the column when one is at fault
    /// (`hosts.metrics.memory_free_mib`).
    pub field: String,
    pub message: String,
}

impl ColumnsError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ColumnsError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The kinds of values a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Figure,
    Flag,
    TextList,
    /// A list of structs of two texts, by these names.
    PairList(&'static str, &'static str),
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Kind::Text => "texts (Utf8, LargeUtf8, Utf8View or a dictionary of them)",
            Kind::Figure => "figures (an integer type, Float32 or Float64)",
            Kind::Flag => "booleans",
            Kind::TextList => "lists of texts (a List of texts)",
            Kind::PairList(..) => "lists of pairs of texts (a List of Struct of two texts)",
        }
    }

    /// Whether columns of type `data_type` hold this kind: asked of the
    /// readers themselves, over an empty column, so that what is accepted
    /// is exactly what can be read.
    fn accepts(self, data_type: &DataType) -> bool {
        let empty = new_empty_array(data_type);
        let empty = empty.as_ref();
        match self {
            Kind::Text => Texts::of(empty).is_some(),
            Kind::Figure => figures(empty, 0.0).is_some(),
            Kind::Flag => flags(empty, false).is_some(),
            Kind::TextList | Kind::PairList(..) => Lists::of(empty, self).is_some(),
        }
    }
}

/// A stream's batches and the position of each column it names.
#[derive(Clone, Debug)]
struct Table<C> {
    batches: Vec<RecordBatch>,
    rows: usize,
    columns: Vec<(usize, C)>,
}

impl<C: Copy + PartialEq> Table<C> {
    /// Decodes `bytes`, one Arrow IPC stream, naming `part` in its errors;
    /// `column` says what each field name is, and of which kind.
    fn read(
        part: &str,
        bytes: Buffer,
        mut column: impl FnMut(&str) -> Option<(C, Kind)>,
    ) -> Result<Self, ColumnsError> {
        let not_a_stream = |e: arrow_schema::ArrowError| {
            ColumnsError::new(part, format!("not an Arrow IPC stream: {e}"))
        };
        let mut decoder = StreamDecoder::new();
        let mut bytes = bytes;
        let mut batches = Vec::new();
        while !bytes.is_empty() {
            if let Some(batch) = decoder.decode(&mut bytes).map_err(not_a_stream)? {
                batches.push(batch);
            }
        }
        decoder.finish().map_err(not_a_stream)?;
        let schema = decoder
            .schema()
            .ok_or_else(|| ColumnsError::new(part, "not an Arrow IPC stream: no schema"))?;
        let mut columns: Vec<(usize, C)> = Vec::new();
        for (i, field) in schema.fields().iter().enumerate() {
            let name = field.name();
            let at = || format!("{part}.{name}");
            let (which, kind) = column(name).ok_or_else(|| {
                ColumnsError::new(
                    at(),
                    format!("`{name}` is not a column of the compact {part}"),
                )
            })?;
            // By name: two `capabilities.x` columns are two positions.
            if schema.fields()[..i].iter().any(|f| f.name() == name) {
                return Err(ColumnsError::new(at(), format!("`{name}` is there twice")));
            }
            if !kind.accepts(field.data_type()) {
                return Err(ColumnsError::new(
                    at(),
                    format!("expected {}, not {}", kind.expected(), field.data_type()),
                ));
            }
            columns.push((i, which));
        }
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        Ok(Table {
            batches,
            rows,
            columns,
        })
    }

    /// Whether `other` has the same columns, in the same batches of the
    /// same rows: its columns can be compared with these one by one.
    fn same_shape(&self, other: &Table<C>) -> bool {
        self.rows == other.rows
            && self.columns == other.columns
            && self.batches.len() == other.batches.len()
            && self
                .batches
                .iter()
                .zip(&other.batches)
                .all(|(a, b)| a.num_rows() == b.num_rows())
    }

    /// Whether each of the columns `fields` holds the same bytes in
    /// `other` (of the same shape, [`Table::same_shape`]), or is absent
    /// from both.
    fn same_columns(&self, other: &Table<C>, fields: &[C]) -> bool {
        fields.iter().all(
            |&field| match (self.position(field), other.position(field)) {
                (None, None) => true,
                (Some(i), Some(j)) => self
                    .batches
                    .iter()
                    .zip(&other.batches)
                    .all(|(a, b)| same_values(a.column(i).as_ref(), b.column(j).as_ref())),
                _ => false,
            },
        )
    }

    /// The columns sent.
    fn fields(&self) -> Vec<C> {
        self.columns.iter().map(|&(_, c)| c).collect()
    }

    /// Column `which`'s position in the schema; none when it is absent.
    fn position(&self, which: C) -> Option<usize> {
        let &(i, _) = self.columns.iter().find(|&&(_, c)| c == which)?;
        Some(i)
    }

    /// Column `which`'s arrays, one per batch; none when it is absent.
    fn arrays(&self, which: C) -> Option<impl Iterator<Item = &dyn Array>> {
        let i = self.position(which)?;
        Some(self.batches.iter().map(move |b| b.column(i).as_ref()))
    }

    /// Column `which`'s texts, row by row (`None` when null or absent).
    fn texts(&self, which: C) -> Vec<Option<&str>> {
        let mut out = Vec::with_capacity(self.rows);
        match self.arrays(which) {
            Some(arrays) => {
                for array in arrays {
                    let texts = Texts::of(array).expect("checked when read");
                    out.extend((0..array.len()).map(|i| texts.get(i)));
                }
            }
            None => out.resize(self.rows, None),
        }
        out
    }

    /// Column `which`'s figures, `absent` where null, or `None` when the
    /// column is absent.
    fn figures(&self, which: C, absent: f64) -> Option<Vec<f64>> {
        let mut out = Vec::with_capacity(self.rows);
        for array in self.arrays(which)? {
            out.extend(figures(array, absent).expect("checked when read"));
        }
        Some(out)
    }

    /// Column `which`'s booleans, `absent` where null or when the column is
    /// absent.
    fn flags(&self, which: C, absent: bool) -> Vec<bool> {
        let mut out = Vec::with_capacity(self.rows);
        match self.arrays(which) {
            Some(arrays) => {
                for array in arrays {
                    out.extend(flags(array, absent).expect("checked when read"));
                }
            }
            None => out.resize(self.rows, absent),
        }
        out
    }
}

/// Whether two arrays are the same bytes: the same type, length and
/// offset, and byte for byte the same validity, buffers and children.
/// Equal bytes are equal values; equal values in other bytes (another
/// dictionary order, other padding) are only built again.
///
/// Why bytes, not Arrow's equality: that compares value by value, and
/// the lists of structs of texts (each host's instances and aggregate
/// metadata) made it 15 % of the server's samples in compact decisions
/// that rebuilt nothing (`perf`), against a few memory comparisons.
fn same_values(a: &dyn Array, b: &dyn Array) -> bool {
    same_bytes(&a.to_data(), &b.to_data())
}

fn same_bytes(a: &ArrayData, b: &ArrayData) -> bool {
    a.data_type() == b.data_type()
        && a.len() == b.len()
        && a.offset() == b.offset()
        && match (a.nulls(), b.nulls()) {
            (None, None) => true,
            (Some(x), Some(y)) => x.inner() == y.inner(),
            _ => false,
        }
        && a.buffers().len() == b.buffers().len()
        && a.buffers()
            .iter()
            .zip(b.buffers())
            .all(|(x, y)| x.as_slice() == y.as_slice())
        && a.child_data().len() == b.child_data().len()
        && a.child_data()
            .iter()
            .zip(b.child_data())
            .all(|(x, y)| same_bytes(x, y))
}

/// A host column of the compact form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostField {
    Id,
    Name,
    Status,
    Address,
    Zone,
    Metric(HostMetric),
    Flag(HostFlag),
    /// By position in the schema's named metrics and capabilities, whose
    /// names [`ArrowHosts`] keeps.
    NamedMetric(usize),
    Capability(usize),
    Networks,
    Aggregates,
    AggregateMetadata,
    Instances,
}

/// The columns of lists of pairs, and their structs' field names.
const AGGREGATE_METADATA: Kind = Kind::PairList("key", "value");
const INSTANCES: Kind = Kind::PairList("tenant", "instance_type");

/// Which host column a field name is, and of which kind; `names` gets each
/// named metric's and capability's name.
fn host_field(name: &str, names: &mut Vec<String>) -> Option<(HostField, Kind)> {
    let mut named = |n: &str| {
        names.push(n.to_owned());
        names.len() - 1
    };
    Some(match name {
        "id" => (HostField::Id, Kind::Text),
        "name" => (HostField::Name, Kind::Text),
        "status" => (HostField::Status, Kind::Text),
        "address" => (HostField::Address, Kind::Text),
        "zone" => (HostField::Zone, Kind::Text),
        "networks" => (HostField::Networks, Kind::TextList),
        "aggregates" => (HostField::Aggregates, Kind::TextList),
        "aggregate_metadata" => (HostField::AggregateMetadata, AGGREGATE_METADATA),
        "instances" => (HostField::Instances, INSTANCES),
        _ => {
            let (prefix, rest) = name.split_once('.')?;
            match prefix {
                "metrics" => (
                    HostField::Metric(HostMetric::from_wit_name(&snake_case_name(rest)?)?),
                    Kind::Figure,
                ),
                "flags" => (
                    HostField::Flag(HostFlag::from_wit_name(&snake_case_name(rest)?)?),
                    Kind::Flag,
                ),
                "named_metrics" if !rest.is_empty() => {
                    (HostField::NamedMetric(named(rest)), Kind::Figure)
                }
                "capabilities" if !rest.is_empty() => {
                    (HostField::Capability(named(rest)), Kind::Text)
                }
                _ => return None,
            }
        }
    })
}

/// The compact body a cluster's last inline decision built, kept so
/// that the next one builds only the columns that changed
/// ([`ArrowHosts::build_reusing`]).
///
/// Why: an engine that sends its hosts with each decision sends mostly
/// the same columns each time (a hundredth of 10,000 hosts' free memory
/// changed between two decisions), and checking and building every
/// column was most of a compact decision (docs/performance.md, "Compact
/// columns built again only where they changed"). Columns are compared
/// byte for byte with the last body's, so a column kept is exactly what
/// building it again would give. Keeps the body's Arrow buffers (a few
/// MB at 10,000 hosts) and a share of its columns.
pub struct LastBody {
    hosts: ArrowHosts,
    vms: ArrowVms,
    /// Its columns as built, before any decision read (and so filled) one.
    inventory: Inventory,
    index: Arc<HostIndex>,
}

/// A compact body's hosts, decoded and their columns' names and types
/// checked; [`ArrowHosts::build`] checks the values.
#[derive(Clone, Debug)]
pub struct ArrowHosts {
    table: Table<HostField>,
    /// The named metrics' and capabilities' names, by position.
    names: Vec<String>,
}

impl ArrowHosts {
    /// Decodes the hosts' stream and checks its columns' names and types.
    pub fn read(bytes: Buffer) -> Result<Self, ColumnsError> {
        let mut names = Vec::new();
        let table = Table::read("hosts", bytes, |name| host_field(name, &mut names))?;
        if table.arrays(HostField::Id).is_none() {
            return Err(ColumnsError::new("hosts.id", "the column `id` is missing"));
        }
        Ok(ArrowHosts { table, names })
    }

    /// Hosts sent.
    pub fn len(&self) -> usize {
        self.table.rows
    }

    pub fn is_empty(&self) -> bool {
        self.table.rows == 0
    }

    /// Checks the hosts' values and builds their columns with those of
    /// `vms` on them; the hosts' first refusal comes before the VMs'.
    pub fn build(&self, vms: &ArrowVms) -> Result<Cluster, SnapshotError> {
        self.build_over(vms, None).map(|(cluster, _)| cluster)
    }

    /// [`ArrowHosts::build`], taking from `last` (the body built before,
    /// of the same columns and rows) every column whose source columns
    /// are equal to its own: only the columns that changed are checked and
    /// built again. A column taken had passed its checks, so the first
    /// refusal is the one a whole build gives: the pieces are built in
    /// the same order, each row by row. Also says whether the host index
    /// is `last`'s (its ids and names were kept).
    fn build_over(
        &self,
        vms: &ArrowVms,
        last: Option<&LastBody>,
    ) -> Result<(Cluster, bool), SnapshotError> {
        let n = self.table.rows;
        if u32::try_from(n).is_err() {
            return Err(at("hosts", SnapshotErrorKind::TooMany { count: n }));
        }
        // Whether the host columns `fields` are as `last` sent them.
        let kept = |fields: &[HostField]| {
            last.is_some_and(|last| self.table.same_columns(&last.hosts.table, fields))
        };
        let mut inv = match last {
            Some(last) => last.inventory.share(),
            None => Inventory::new(n, vms.table.rows),
        };
        let ids_kept = kept(&[HostField::Id]);
        let index_kept = ids_kept && kept(&[HostField::Name]);
        let index = match last {
            Some(last) if index_kept => Arc::clone(&last.index),
            _ => Arc::new(self.set_ids(&mut inv)?),
        };
        if !kept(&[HostField::Status]) {
            self.set_statuses(&mut inv)?;
        }
        for (field, text) in [
            (HostField::Address, HostText::Address),
            (HostField::Zone, HostText::Zone),
        ] {
            if !kept(&[field]) {
                self.set_text(&mut inv, field, text)?;
            }
        }
        if last.is_none() {
            self.set_constants(&mut inv)?;
        }
        for &metric in HostMetric::ALL {
            if !kept(&[HostField::Metric(metric)]) {
                self.set_metric(&mut inv, metric)?;
            }
        }
        for &flag in HostFlag::ALL {
            if !kept(&[HostField::Flag(flag)]) {
                self.set_flag(&mut inv, flag)?;
            }
        }
        let mut capabilities = Vec::new();
        for (position, name) in self.names.iter().enumerate() {
            if !kept(&[HostField::NamedMetric(position)]) {
                self.set_named_metric(&mut inv, position, name)?;
            }
            if let Some(i) = self.table.position(HostField::Capability(position)) {
                capabilities.push((name.as_str(), i, HostField::Capability(position)));
            }
        }
        let fields: Vec<HostField> = capabilities.iter().map(|c| c.2).collect();
        if !kept(&fields) {
            let columns = capabilities.iter().map(|&(name, i, _)| (name, i)).collect();
            self.set_capabilities(&mut inv, columns)?;
        }
        for (field, kind) in [
            (HostField::Networks, HostLabels::Networks),
            (HostField::Aggregates, HostLabels::Aggregates),
            (HostField::AggregateMetadata, HostLabels::AggregateMetadata),
            (HostField::Instances, HostLabels::Instances),
        ] {
            if !kept(&[field]) {
                self.set_list_labels(&mut inv, field, kind)?;
            }
        }
        // The VMs name their hosts by id: built again when either changed.
        let vms_kept = last.is_some_and(|last| {
            ids_kept && vms.table.same_columns(&last.vms.table, &vms.table.fields())
        });
        if !vms_kept {
            vms.build_into(&mut inv, &index)?;
        }
        let cluster = Cluster {
            inventory: inv,
            hosts: index,
        };
        Ok((cluster, index_kept))
    }

    /// Builds this body's cluster, reusing what `last` built of the
    /// columns sent again unchanged, and keeps this body in `last` for the
    /// next one. A body of other columns or rows is built whole.
    pub fn build_reusing(
        self,
        vms: ArrowVms,
        last: &mut Option<LastBody>,
    ) -> Result<Cluster, SnapshotError> {
        let fits = last.as_ref().filter(|last| {
            self.table.same_shape(&last.hosts.table)
                && self.names == last.hosts.names
                && vms.table.same_shape(&last.vms.table)
        });
        let (cluster, index_kept) = self.build_over(&vms, fits)?;
        // The index taken from `last` is kept again as it is.
        let index = match last.take() {
            Some(kept) if index_kept => kept.index,
            _ => Arc::clone(&cluster.hosts),
        };
        *last = Some(LastBody {
            hosts: self,
            vms,
            inventory: cluster.inventory.share(),
            index,
        });
        Ok(cluster)
    }

    /// Sets the ids' and names' columns; gives the ids' index.
    fn set_ids(&self, inv: &mut Inventory) -> Result<HostIndex, SnapshotError> {
        let n = self.table.rows;
        let column = |e| at("hosts", SnapshotErrorKind::Column(e));
        let ids = self.table.texts(HostField::Id);
        let mut index = HostIndex::with_capacity(n);
        let mut id_texts = Interner::with_capacity(n);
        for (i, id) in ids.iter().enumerate() {
            let id = id.unwrap_or("");
            check_id(id, format_args!("hosts[{i}].id"))?;
            if !index.push(id) {
                return Err(at(
                    format!("hosts[{i}].id"),
                    SnapshotErrorKind::DuplicateHost(id.to_owned()),
                ));
            }
            id_texts.push(id);
        }
        let id_texts = id_texts.finish();
        // Without names, each host's name is its id: the ids' column.
        let name_texts = if self.table.position(HostField::Name).is_some() {
            let names = self.table.texts(HostField::Name);
            let mut name_texts = Interner::with_capacity(n);
            for (i, (name, id)) in names.iter().zip(&ids).enumerate() {
                check_display_name(*name, format_args!("hosts[{i}].name"))?;
                name_texts.push(name.or(*id).unwrap_or(""));
            }
            name_texts.finish()
        } else {
            id_texts.clone()
        };
        inv.set_host_text(HostText::Id, id_texts).map_err(column)?;
        inv.set_host_text(HostText::Name, name_texts)
            .map_err(column)?;
        Ok(index)
    }

    fn set_statuses(&self, inv: &mut Inventory) -> Result<(), SnapshotError> {
        let mut statuses = Vec::with_capacity(self.table.rows);
        let mut known: BTreeMap<&str, HostStatus> = BTreeMap::new();
        for (i, status) in self.table.texts(HostField::Status).into_iter().enumerate() {
            statuses.push(match status {
                None => Status::default().into(),
                Some(text) => match known.get(text) {
                    Some(&status) => status,
                    None => {
                        let status = parse_status(text, i)?;
                        known.insert(text, status);
                        status
                    }
                },
            });
        }
        inv.set_host_statuses(statuses)
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }

    fn set_text(
        &self,
        inv: &mut Inventory,
        field: HostField,
        text: HostText,
    ) -> Result<(), SnapshotError> {
        let mut texts = Interner::with_capacity(self.table.rows);
        for value in self.table.texts(field) {
            texts.push(value.unwrap_or(""));
        }
        inv.set_host_text(text, texts.finish())
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }

    /// Sets the columns the compact form has no field for: the CPU model,
    /// and the hardware's, empty on every host.
    fn set_constants(&self, inv: &mut Inventory) -> Result<(), SnapshotError> {
        let n = self.table.rows;
        let column = |e| at("hosts", SnapshotErrorKind::Column(e));
        let mut cpu_models = Interner::with_capacity(n);
        for _ in 0..n {
            cpu_models.push("");
        }
        inv.set_host_text(HostText::CpuModel, cpu_models.finish())
            .map_err(column)?;
        for kind in [
            HostLabels::CpuFlags,
            HostLabels::EmulatedMachines,
            HostLabels::ClusterLevels,
        ] {
            let mut none = LabelsBuilder::default();
            for _ in 0..n {
                none.push_row(std::iter::empty::<(&str, &str)>());
            }
            inv.set_host_labels(kind, none.finish()).map_err(column)?;
        }
        crate::hardware::columns::fill(std::iter::repeat_n(None, n), inv).map_err(column)
    }

    fn set_metric(&self, inv: &mut Inventory, metric: HostMetric) -> Result<(), SnapshotError> {
        let Some(values) = self.table.figures(HostField::Metric(metric), 0.0) else {
            return Ok(());
        };
        let name = metric_name(metric);
        for (i, &value) in values.iter().enumerate() {
            check_host_metric(&name, value, format_args!("hosts[{i}].metrics.{name}"))?;
        }
        inv.set_host_metric(metric, values)
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }

    fn set_flag(&self, inv: &mut Inventory, flag: HostFlag) -> Result<(), SnapshotError> {
        let key = HostField::Flag(flag);
        if self.table.arrays(key).is_none() {
            return Ok(());
        }
        inv.set_host_flag(flag, self.table.flags(key, false))
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }

    fn set_named_metric(
        &self,
        inv: &mut Inventory,
        position: usize,
        name: &str,
    ) -> Result<(), SnapshotError> {
        let Some(values) = self
            .table
            .figures(HostField::NamedMetric(position), f64::NAN)
        else {
            return Ok(());
        };
        for (i, &value) in values.iter().enumerate() {
            if !value.is_nan() {
                check_named_metric(value, format_args!("hosts[{i}].named_metrics.{name}"))?;
            }
        }
        inv.set_host_named_metric(name, values)
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }

    /// Sets the capabilities, from the columns `(key, position)`: each
    /// host's pairs in key order, as a JSON host's map gives them.
    fn set_capabilities(
        &self,
        inv: &mut Inventory,
        mut columns: Vec<(&str, usize)>,
    ) -> Result<(), SnapshotError> {
        columns.sort_by(|a, b| a.0.cmp(b.0));
        let mut labels = LabelsBuilder::default();
        // Each string is interned when first met, key before value, as
        // the JSON path does: the columns come out identical.
        let mut keys: Vec<Option<u32>> = vec![None; columns.len()];
        for batch in &self.table.batches {
            let texts: Vec<Texts> = columns
                .iter()
                .map(|&(_, i)| Texts::of(batch.column(i).as_ref()).expect("checked when read"))
                .collect();
            let mut values: Vec<LabelTexts> = texts.iter().map(LabelTexts::new).collect();
            for row in 0..batch.num_rows() {
                for ((value, key), &(name, _)) in values.iter_mut().zip(&mut keys).zip(&columns) {
                    if value.present(row) {
                        let key = *key.get_or_insert_with(|| labels.intern(name));
                        if let Some(value) = value.position(&mut labels, row) {
                            labels.push_pair(key, value);
                        }
                    }
                }
                labels.end_row();
            }
        }
        inv.set_host_labels(HostLabels::Capabilities, labels.finish())
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }

    /// Sets `kind` from the list column `field` (absent: no host has
    /// any): networks and aggregates as keys (aggregates sorted and each
    /// once, as a JSON host's map keys are), metadata pairs as they come,
    /// each instance as its tenant and instance type.
    fn set_list_labels(
        &self,
        inv: &mut Inventory,
        field: HostField,
        kind: HostLabels,
    ) -> Result<(), SnapshotError> {
        let mut labels = LabelsBuilder::default();
        // Each string is interned when first met, key before value, as
        // the JSON path does: the columns come out identical.
        let mut constants: [Option<u32>; 3] = [None; 3];
        let mut constant = |labels: &mut LabelsBuilder, which: usize| {
            *constants[which]
                .get_or_insert_with(|| labels.intern(["", "tenant", "instance-type"][which]))
        };
        let (empty, tenant, instance_type) = (0, 1, 2);
        let mut row: Vec<&str> = Vec::new();
        let mut rows = 0;
        let item_kind = match field {
            HostField::AggregateMetadata => AGGREGATE_METADATA,
            HostField::Instances => INSTANCES,
            _ => Kind::TextList,
        };
        if let Some(arrays) = self.table.arrays(field) {
            for array in arrays {
                let lists = Lists::of(array, item_kind).expect("checked when read");
                let (mut first, mut second) = match &lists.items {
                    Items::Texts(texts) => (LabelTexts::new(texts), None),
                    Items::Pairs(pairs) => (
                        LabelTexts::new(&pairs.first),
                        Some(LabelTexts::new(&pairs.second)),
                    ),
                };
                for i in 0..array.len() {
                    if field == HostField::Aggregates {
                        // Sorted and each once, as a JSON host's map keys.
                        row.clear();
                        row.extend(lists.range(i).filter_map(|j| first.texts.get(j)));
                        row.sort_unstable();
                        row.dedup();
                        for name in &row {
                            let key = labels.intern(name);
                            let value = constant(&mut labels, empty);
                            labels.push_pair(key, value);
                        }
                        labels.end_row();
                        rows += 1;
                        continue;
                    }
                    for j in lists.range(i) {
                        match &mut second {
                            None => {
                                if let Some(key) = first.position(&mut labels, j) {
                                    let value = constant(&mut labels, empty);
                                    labels.push_pair(key, value);
                                }
                            }
                            Some(_) if !lists.array_item_valid(j) => {}
                            Some(second) => {
                                if field == HostField::Instances {
                                    let key = constant(&mut labels, tenant);
                                    let value = first.position_or_empty(&mut labels, j);
                                    labels.push_pair(key, value);
                                    let key = constant(&mut labels, instance_type);
                                    let value = second.position_or_empty(&mut labels, j);
                                    labels.push_pair(key, value);
                                } else {
                                    let key = first.position_or_empty(&mut labels, j);
                                    let value = second.position_or_empty(&mut labels, j);
                                    labels.push_pair(key, value);
                                }
                            }
                        }
                    }
                    labels.end_row();
                    rows += 1;
                }
            }
        }
        for _ in rows..self.table.rows {
            labels.end_row();
        }
        inv.set_host_labels(kind, labels.finish())
            .map_err(|e| at("hosts", SnapshotErrorKind::Column(e)))
    }
}

/// A text column's strings' positions in a labels builder: a dictionary
/// column's values are interned once each, not once per row (a cluster's
/// few hundred `cpu_info` texts, sent by each of 10,000 hosts).
struct LabelTexts<'t, 'a> {
    texts: &'t Texts<'a>,
    /// By dictionary position; `u32::MAX` while not interned.
    known: Vec<u32>,
}

impl<'t, 'a> LabelTexts<'t, 'a> {
    fn new(texts: &'t Texts<'a>) -> Self {
        let known = match texts {
            Texts::Dictionary { values, .. } => vec![u32::MAX; values.len()],
            _ => Vec::new(),
        };
        LabelTexts { texts, known }
    }

    /// Whether row `i` has a text (is not null).
    fn present(&self, i: usize) -> bool {
        self.texts.get(i).is_some()
    }

    /// Row `i`'s text's position, the empty text's when null.
    fn position_or_empty(&mut self, labels: &mut LabelsBuilder, i: usize) -> u32 {
        self.position(labels, i)
            .unwrap_or_else(|| labels.intern(""))
    }

    /// Row `i`'s text's position (`None`: null).
    fn position(&mut self, labels: &mut LabelsBuilder, i: usize) -> Option<u32> {
        let Texts::Dictionary {
            array,
            keys,
            values,
        } = self.texts
        else {
            return self.texts.get(i).map(|text| labels.intern(text));
        };
        let key = *keys.get(i)?;
        if !array.is_valid(i) || key >= self.known.len() {
            return None;
        }
        if self.known[key] == u32::MAX {
            self.known[key] = labels.intern(values.get(key)?);
        }
        Some(self.known[key])
    }
}

/// Host status `text` of row `i`, as the JSON snapshot spells it.
fn parse_status(text: &str, i: usize) -> Result<HostStatus, SnapshotError> {
    let deserializer = serde::de::value::StrDeserializer::<serde::de::value::Error>::new(text);
    Status::deserialize(deserializer)
        .map(HostStatus::from)
        .map_err(|e| {
            at(
                format!("hosts[{i}].status"),
                SnapshotErrorKind::InvalidValue(e.to_string()),
            )
        })
}

/// A VM column of the compact form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VmField {
    Id,
    Name,
    Host,
    MemoryMib,
    MemoryGuaranteedMib,
    Vcpus,
    CpuUsagePercent,
    Migratable,
    HighlyAvailable,
    HostedEngine,
    Pending,
}

fn vm_field(name: &str) -> Option<(VmField, Kind)> {
    use VmField::*;
    Some(match name {
        "id" => (Id, Kind::Text),
        "name" => (Name, Kind::Text),
        "host" => (Host, Kind::Text),
        "memory_mib" => (MemoryMib, Kind::Figure),
        "memory_guaranteed_mib" => (MemoryGuaranteedMib, Kind::Figure),
        "vcpus" => (Vcpus, Kind::Figure),
        "cpu_usage_percent" => (CpuUsagePercent, Kind::Figure),
        "migratable" => (Migratable, Kind::Flag),
        "highly_available" => (HighlyAvailable, Kind::Flag),
        "hosted_engine" => (HostedEngine, Kind::Flag),
        "pending" => (Pending, Kind::Flag),
        _ => return None,
    })
}

/// A compact body's running VMs, decoded and their columns' names and
/// types checked; none when the body has no `vms` part.
#[derive(Clone, Debug)]
pub struct ArrowVms {
    table: Table<VmField>,
}

impl Default for ArrowVms {
    fn default() -> Self {
        ArrowVms {
            table: Table {
                batches: Vec::new(),
                rows: 0,
                columns: Vec::new(),
            },
        }
    }
}

impl ArrowVms {
    /// Decodes the VMs' stream and checks its columns' names and types.
    pub fn read(bytes: Buffer) -> Result<Self, ColumnsError> {
        let table = Table::read("vms", bytes, vm_field)?;
        for (field, name) in [(VmField::Id, "id"), (VmField::Host, "host")] {
            if table.rows > 0 && table.arrays(field).is_none() {
                return Err(ColumnsError::new(
                    format!("vms.{name}"),
                    format!("the column `{name}` is missing"),
                ));
            }
        }
        Ok(ArrowVms { table })
    }

    /// Checks the VMs' values and sets `inv`'s VM columns, each VM's host
    /// resolved against `hosts`.
    fn build_into(&self, inv: &mut Inventory, hosts: &HostIndex) -> Result<(), SnapshotError> {
        let t = &self.table;
        let n = t.rows;
        let ids = t.texts(VmField::Id);
        let names = t.texts(VmField::Name);
        let on = t.texts(VmField::Host);
        let memory = t.figures(VmField::MemoryMib, 0.0);
        let guaranteed = t.figures(VmField::MemoryGuaranteedMib, f64::NAN);
        let vcpus = t.figures(VmField::Vcpus, 1.0);
        let usage = t.figures(VmField::CpuUsagePercent, 0.0);
        let migratable = t.flags(VmField::Migratable, true);
        let highly_available = t.flags(VmField::HighlyAvailable, false);
        let hosted_engine = t.flags(VmField::HostedEngine, false);
        let pending = t.flags(VmField::Pending, false);
        let figure = |column: &Option<Vec<f64>>, i: usize, absent: f64| {
            column.as_ref().map_or(absent, |values| values[i])
        };
        let mut columns = VmColumns::with_capacity(n);
        for i in 0..n {
            let row = VmRow {
                id: ids[i].unwrap_or(""),
                name: names[i],
                host: on[i].unwrap_or(""),
                memory_mib: figure(&memory, i, 0.0),
                memory_guaranteed_mib: Some(figure(&guaranteed, i, f64::NAN))
                    .filter(|g| !g.is_nan()),
                vcpus: vcpus_from_figure(figure(&vcpus, i, 1.0), format_args!("vms[{i}].vcpus"))?,
                cpu_usage_percent: figure(&usage, i, 0.0),
                migratable: migratable[i],
                highly_available: highly_available[i],
                hosted_engine: hosted_engine[i],
                pending: pending[i],
            };
            check_running_vm(&row, format_args!("vms[{i}]"))?;
            columns.push(row)?;
        }
        columns.finish(inv, hosts)
    }
}

fn at(path: impl Into<String>, kind: SnapshotErrorKind) -> SnapshotError {
    SnapshotError {
        path: path.into(),
        kind,
    }
}

/// A column of texts, `None` where null.
enum Texts<'a> {
    Utf8(&'a GenericStringArray<i32>),
    LargeUtf8(&'a GenericStringArray<i64>),
    View(&'a StringViewArray),
    Dictionary {
        array: &'a dyn Array,
        keys: Vec<usize>,
        values: Box<Texts<'a>>,
    },
}

impl<'a> Texts<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        if let Some(a) = array.as_string_opt::<i32>() {
            Some(Texts::Utf8(a))
        } else if let Some(a) = array.as_string_opt::<i64>() {
            Some(Texts::LargeUtf8(a))
        } else if let Some(a) = array.as_string_view_opt() {
            Some(Texts::View(a))
        } else if let Some(d) = array.as_any_dictionary_opt() {
            let values = d.values().as_ref();
            if values.as_any_dictionary_opt().is_some() {
                return None;
            }
            Some(Texts::Dictionary {
                array,
                keys: dictionary_keys(d.keys())?,
                values: Box::new(Texts::of(values)?),
            })
        } else {
            None
        }
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Texts::Utf8(a) => a.is_valid(i).then(|| a.value(i)),
            Texts::LargeUtf8(a) => a.is_valid(i).then(|| a.value(i)),
            Texts::View(a) => a.is_valid(i).then(|| a.value(i)),
            Texts::Dictionary {
                array,
                keys,
                values,
            } => {
                // A null's key may be anything; a valid key is in range
                // (validated when read), checked again all the same.
                let key = *keys.get(i)?;
                if array.is_valid(i) && key < values.len() {
                    values.get(key)
                } else {
                    None
                }
            }
        }
    }
}

impl Texts<'_> {
    fn len(&self) -> usize {
        match self {
            Texts::Utf8(a) => a.len(),
            Texts::LargeUtf8(a) => a.len(),
            Texts::View(a) => a.len(),
            Texts::Dictionary { array, .. } => array.len(),
        }
    }
}

/// A dictionary's keys as positions (`usize::MAX` for one that is none,
/// which only a null may have); `None` when they are not integers. Not
/// `normalized_keys`, which panics on an empty dictionary, as a column
/// of nulls may have.
fn dictionary_keys(keys: &dyn Array) -> Option<Vec<usize>> {
    macro_rules! as_keys {
        ($($t:ty),*) => {
            $(
                if let Some(a) = keys.as_primitive_opt::<$t>() {
                    return Some(
                        a.values()
                            .iter()
                            .map(|&k| usize::try_from(k as i128).unwrap_or(usize::MAX))
                            .collect(),
                    );
                }
            )*
        };
    }
    as_keys!(
        Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type
    );
    None
}

/// A column of lists; a null list is empty.
struct Lists<'a> {
    offsets: &'a [i32],
    array: &'a dyn Array,
    items: Items<'a>,
}

/// A list column's items.
enum Items<'a> {
    Texts(Texts<'a>),
    Pairs(Pairs<'a>),
}

impl<'a> Lists<'a> {
    /// The column as lists of `kind` ([`Kind::TextList`] or
    /// [`Kind::PairList`]).
    fn of(array: &'a dyn Array, kind: Kind) -> Option<Self> {
        let lists = array.as_list_opt::<i32>()?;
        let items = lists.values().as_ref();
        Some(Lists {
            offsets: lists.value_offsets(),
            array,
            items: match kind {
                Kind::TextList => Items::Texts(Texts::of(items)?),
                Kind::PairList(first, second) => Items::Pairs(Pairs::of(items, first, second)?),
                _ => return None,
            },
        })
    }

    /// Whether item `j` (of a list of structs) is there, not null.
    fn array_item_valid(&self, j: usize) -> bool {
        match &self.items {
            Items::Pairs(pairs) => pairs.array.is_valid(j),
            Items::Texts(_) => true,
        }
    }

    /// Row `i`'s items' positions.
    fn range(&self, i: usize) -> std::ops::Range<usize> {
        if self.array.is_valid(i) {
            self.offsets[i] as usize..self.offsets[i + 1] as usize
        } else {
            0..0
        }
    }
}

/// A struct column's two texts (a null text is empty; a null struct is
/// skipped by [`Lists::array_item_valid`]).
struct Pairs<'a> {
    array: &'a dyn Array,
    first: Texts<'a>,
    second: Texts<'a>,
}

impl<'a> Pairs<'a> {
    fn of(array: &'a dyn Array, first: &str, second: &str) -> Option<Self> {
        let structs = array.as_struct_opt()?;
        if structs.num_columns() != 2 {
            return None;
        }
        Some(Pairs {
            array,
            first: Texts::of(structs.column_by_name(first)?.as_ref())?,
            second: Texts::of(structs.column_by_name(second)?.as_ref())?,
        })
    }
}

/// A column's figures, `absent` where null; `None` when it holds none.
fn figures(array: &dyn Array, absent: f64) -> Option<Vec<f64>> {
    macro_rules! as_figures {
        ($($t:ty),*) => {
            $(
                if let Some(a) = array.as_primitive_opt::<$t>() {
                    return Some(a.iter().map(|v| v.map_or(absent, |v| v as f64)).collect());
                }
            )*
        };
    }
    as_figures!(
        Float64Type,
        Float32Type,
        Int64Type,
        Int32Type,
        Int16Type,
        Int8Type,
        UInt64Type,
        UInt32Type,
        UInt16Type,
        UInt8Type
    );
    None
}

/// A column's booleans, `absent` where null; `None` when it holds none.
fn flags(array: &dyn Array, absent: bool) -> Option<Vec<bool>> {
    let a = array.as_boolean_opt()?;
    Some(a.iter().map(|v| v.unwrap_or(absent)).collect())
}

#[cfg(test)]
mod tests {

    use arrow_array::builder::{Int64Builder, LargeStringBuilder, StringViewBuilder};
    use arrow_array::{ArrayRef, Float64Array, StringArray};
    use arrow_ipc::writer::StreamWriter;

    use super::*;
    use crate::inputs::build_checked;
    use crate::inputs::tests::columns;
    use crate::snapshot::{Snapshot, from_json};

    /// A snapshot with every column the compact form has: metrics, flags
    /// and named metrics some hosts lack, texts, statuses, capabilities
    /// (one shared by two hosts), networks, aggregates with metadata,
    /// instances, and VMs with and
    /// without each optional field.
    const SNAPSHOT: &str = r#"{"hosts": [
        {"id": "a", "name": "A", "status": "maintenance", "address": "10.0.0.1",
         "zone": "z1", "metrics": {"memory_free_mib": -5, "cpu_cores": 8},
         "flags": ["spm"], "networks": ["n2", "n1"],
         "capabilities": {"cpu_info": "{\"arch\": \"x86_64\"}", "hypervisor_type": "QEMU"},
         "aggregates": {"g2": {"ssd": "true", "az": "z1"}, "g1": {"az": "z2"}},
         "named_metrics": {"cpu.percent": 40},
         "instances": [{"tenant": "t1", "instance_type": "small"}, {"tenant": "t2"}]},
        {"id": "b", "zone": "z1", "metrics": {"cpu_threads": 16}},
        {"id": "c", "address": "10.0.0.1", "flags": ["isolated", "spm"],
         "metrics": {"cpu_cores": 4}, "named_metrics": {"temp": 30},
         "capabilities": {"cpu_info": "{\"arch\": \"x86_64\"}"}, "status": "down"},
        {"id": "d"}
      ],
      "vms": [{"id": "v1", "host": "c", "memory_mib": 512, "memory_guaranteed_mib": 256},
              {"id": "v2", "name": "web", "host": "a", "vcpus": 2, "pending": true,
               "migratable": false, "cpu_usage_percent": 12.5}]}"#;

    fn read(streams: &Streams) -> Result<(ArrowHosts, ArrowVms), ColumnsError> {
        streams.clone().read()
    }

    fn built(streams: &Streams) -> Result<Cluster, SnapshotError> {
        let (hosts, vms) = read(streams).expect("well-formed streams");
        hosts.build(&vms)
    }

    /// One Arrow stream of `batches` of `columns` each.
    fn stream(batches: &[Vec<(&str, ArrayRef)>]) -> Vec<u8> {
        let batches: Vec<RecordBatch> = batches
            .iter()
            .map(|columns| RecordBatch::try_from_iter(columns.clone()).expect("a batch"))
            .collect();
        let mut writer = StreamWriter::try_new(Vec::new(), &batches[0].schema()).expect("a writer");
        for batch in &batches {
            writer.write(batch).expect("written");
        }
        writer.finish().expect("finished");
        writer.into_inner().expect("the stream")
    }

    fn utf8(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    fn float64(values: &[Option<f64>]) -> ArrayRef {
        Arc::new(Float64Array::from(values.to_vec()))
    }

    /// The compact form of a snapshot builds exactly the columns its JSON
    /// form builds (`build_checked`), and a few columns say what the
    /// snapshot says, since both share builders.
    #[test]
    fn compact_hosts_build_what_json_hosts_build() {
        let snapshot: Snapshot = from_json(SNAPSHOT).expect("valid JSON");
        let whole = build_checked(&snapshot).expect("a valid snapshot");
        let streams = write(&snapshot).expect("written");
        let compact = built(&streams).expect("valid columns");
        assert_eq!(columns(&compact.inventory), columns(&whole.inventory));
        assert_eq!(compact.hosts, whole.hosts);

        let inv = &compact.inventory;
        assert_eq!(inv.host_metric(HostMetric::CpuCores), [8.0, 0.0, 4.0, 0.0]);
        assert_eq!(inv.vm_hosts(), [2, 0]);
        let capabilities = inv.host_labels(HostLabels::Capabilities);
        assert_eq!(
            capabilities.row(0).collect::<Vec<_>>(),
            [
                ("cpu_info", r#"{"arch": "x86_64"}"#),
                ("hypervisor_type", "QEMU")
            ]
        );
        let statuses = inv.host_statuses();
        assert_eq!(statuses[2], HostStatus::Down);
    }

    /// A body written by `Streams::body` starts each part's data at a
    /// multiple of `PART_ALIGNMENT` from its start, whatever the request's
    /// length, and reads back as the same parts through the server's
    /// multipart reader (which takes the padding as transport padding).
    #[test]
    fn each_part_of_a_written_body_starts_aligned() {
        let snapshot: Snapshot = from_json(SNAPSHOT).expect("valid JSON");
        let streams = write(&snapshot).expect("written");
        for id in ["v", "vm-1", "a-longer-vm-id", "x"] {
            let request = serde_json::json!({ "vm": { "id": id } });
            let written = streams.body(&request).expect("a boundary");
            let body = bytes::Bytes::from(written.body);
            let mut headers = axum::http::HeaderMap::new();
            let content_type = written.content_type.parse().expect("a header value");
            headers.insert(axum::http::header::CONTENT_TYPE, content_type);
            let boundary = crate::api::multipart::boundary(&headers).expect("a boundary");
            let parts = crate::api::multipart::Parts::new(body.clone(), &boundary)
                .expect("a multipart body")
                .collect::<Result<Vec<_>, _>>()
                .expect("its parts");
            let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names, ["request", "hosts", "vms"], "{id}");
            for part in &parts {
                let offset = part.data.as_ptr() as usize - body.as_ptr() as usize;
                assert_eq!(offset % PART_ALIGNMENT, 0, "{id}: part {}", part.name);
            }
            assert_eq!(&parts[1].data[..], &streams.hosts[..], "{id}");
            assert_eq!(&parts[2].data[..], &streams.vms[..], "{id}");
            assert_eq!(
                serde_json::from_slice::<serde_json::Value>(&parts[0].data).expect("JSON"),
                request
            );
        }
    }

    /// Each body of a stream built over the last one, as a cluster's
    /// inline decisions build them: the columns come out exactly as a
    /// whole build's (their values and the hosts' fingerprints), the
    /// columns sent again unchanged are the last body's own, and a body
    /// refused leaves the last one kept.
    #[test]
    fn a_body_built_over_the_last_one_builds_exactly_what_a_whole_build_gives() {
        use serde_json::{Value, json};
        let base: Value = serde_json::from_str(SNAPSHOT).expect("JSON");
        let streams = |body: &Value| {
            write(&from_json(&body.to_string()).expect("a snapshot")).expect("written")
        };
        // Each change made to the body before.
        type Change<'a> = (&'a str, &'a dyn Fn(&mut Value));
        let changes: [Change; 9] = [
            ("the same body", &|_| {}),
            ("a host's free memory", &|b| {
                b["hosts"][1]["metrics"]["memory_free_mib"] = json!(7);
            }),
            ("a status", &|b| b["hosts"][3]["status"] = json!("disabled")),
            ("a capability", &|b| {
                b["hosts"][2]["capabilities"]["cpu_info"] = json!("{}");
            }),
            ("a VM's memory", &|b| {
                b["vms"][0]["memory_mib"] = json!(1024)
            }),
            ("a host renamed", &|b| b["hosts"][3]["id"] = json!("e")),
            ("a named metric and a network", &|b| {
                b["hosts"][2]["named_metrics"]["temp"] = json!(31);
                b["hosts"][1]["networks"] = json!(["n3"]);
            }),
            ("a host more", &|b| {
                let more = json!({"id": "f", "metrics": {"cpu_cores": 2}});
                b["hosts"].as_array_mut().expect("hosts").push(more);
            }),
            ("the first body again", &|b| *b = base.clone()),
        ];
        let mut body = base.clone();
        let bodies: Vec<(&str, Streams)> = changes
            .iter()
            .map(|(what, change)| {
                change(&mut body);
                (*what, streams(&body))
            })
            .collect();
        let first = write(&from_json(SNAPSHOT).expect("a snapshot")).expect("written");
        let (hosts, vms) = read(&first).expect("read");
        let mut last = None;
        let mut before = hosts.build_reusing(vms, &mut last).expect("valid");
        // The fingerprints' column shares kept as an inline decision keeps them.
        let mut kept = crate::pipeline::ReuseCache::default();
        let hashed = kept.content_stamps(&before.inventory, true).by_host().len();
        assert_eq!(hashed, before.inventory.host_count());
        let (_, hashed_columns) = kept.fingerprint_columns();
        for (what, streams) in &bodies {
            let whole = built(streams).expect("valid");
            let (hosts, vms) = read(streams).expect("read");
            let over = hosts.build_reusing(vms, &mut last).expect("valid");
            // Before the columns are read: a read sets a column not given.
            assert_eq!(
                kept.content_stamps(&over.inventory, true).by_host(),
                crate::pipeline::content_stamps(&whole.inventory).by_host(),
                "{what}"
            );
            if *what == "the same body" {
                let all = (hashed_columns, hashed_columns);
                assert_eq!(kept.fingerprint_columns(), all, "{what}");
            }
            assert_eq!(
                columns(&over.inventory),
                columns(&whole.inventory),
                "{what}"
            );
            assert_eq!(over.hosts, whole.hosts, "{what}");
            // Kept columns are the last body's own, not copies.
            let same = |metric| {
                std::ptr::eq(
                    over.inventory.host_metric(metric).as_ptr(),
                    before.inventory.host_metric(metric).as_ptr(),
                )
            };
            let shape_changed = *what == "a host more" || *what == "the first body again";
            assert_eq!(same(HostMetric::CpuCores), !shape_changed, "{what}");
            let free_changed = *what == "a host's free memory" || shape_changed;
            assert_eq!(same(HostMetric::MemoryFreeMib), !free_changed, "{what}");
            // So is the host index, while the ids and names are.
            let ids_changed = *what == "a host renamed" || shape_changed;
            let same_index = Arc::ptr_eq(&over.hosts, &before.hosts);
            assert_eq!(same_index, !ids_changed, "{what}");
            before = over;
        }

        // A body refused (a negative VM memory) gives the whole build's
        // error, and the body before stays kept.
        let mut bad = base.clone();
        bad["vms"][1]["memory_mib"] = json!(-1);
        let bad = streams(&bad);
        let (hosts, vms) = read(&bad).expect("read");
        let refused = hosts.build_reusing(vms, &mut last).map(|_| ()).unwrap_err();
        assert_eq!(refused, built(&bad).map(|_| ()).unwrap_err());
        let (hosts, vms) = read(&bodies[8].1).expect("read");
        let again = hosts.build_reusing(vms, &mut last).expect("valid");
        assert!(std::ptr::eq(
            again.inventory.host_metric(HostMetric::CpuCores).as_ptr(),
            before.inventory.host_metric(HostMetric::CpuCores).as_ptr(),
        ));
    }

    /// Every text type, integer figures, several batches and a stream
    /// without VMs read as the JSON form of the same hosts.
    #[test]
    fn every_text_type_integers_and_several_batches_are_read() {
        let mut ids = LargeStringBuilder::new();
        ids.extend([Some("h1"), Some("h2")]);
        let mut names = StringViewBuilder::new();
        names.extend([None, Some("Two")]);
        let mut cores = Int64Builder::new();
        cores.extend([Some(4), None]);
        let first: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(ids.finish())),
            ("name", Arc::new(names.finish())),
            ("metrics.cpu_cores", Arc::new(cores.finish())),
        ];
        let mut ids = LargeStringBuilder::new();
        ids.extend([Some("h3")]);
        let mut names = StringViewBuilder::new();
        names.extend([Some("Three")]);
        let mut cores = Int64Builder::new();
        cores.extend([Some(16)]);
        let second: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(ids.finish())),
            ("name", Arc::new(names.finish())),
            ("metrics.cpu_cores", Arc::new(cores.finish())),
        ];
        let hosts = ArrowHosts::read(Buffer::from(stream(&[first, second]))).expect("read");
        assert_eq!(hosts.len(), 3);
        let compact = hosts.build(&ArrowVms::default()).expect("valid");
        let json: Snapshot = from_json(
            r#"{"hosts": [{"id": "h1", "metrics": {"cpu_cores": 4}},
                          {"id": "h2", "name": "Two"},
                          {"id": "h3", "name": "Three", "metrics": {"cpu_cores": 16}}]}"#,
        )
        .expect("valid JSON");
        let whole = build_checked(&json).expect("valid");
        assert_eq!(columns(&compact.inventory), columns(&whole.inventory));
    }

    /// A stream that is not one, or a column unknown, repeated, missing or
    /// of the wrong type, is refused naming the part and the column.
    #[test]
    fn malformed_streams_and_columns_are_refused_with_the_column() {
        let id = || utf8(&[Some("h1")]);
        let cases: Vec<(Vec<u8>, &str, &str)> = vec![
            (b"not arrow".to_vec(), "hosts", "not an Arrow IPC stream"),
            (Vec::new(), "hosts", "no schema"),
            (
                stream(&[vec![
                    ("id", id()),
                    ("metrics.memry_free_mib", float64(&[Some(1.0)])),
                ]]),
                "hosts.metrics.memry_free_mib",
                "is not a column of the compact hosts",
            ),
            (
                stream(&[vec![
                    ("id", id()),
                    ("metrics.cpu_cores", utf8(&[Some("8")])),
                ]]),
                "hosts.metrics.cpu_cores",
                "expected figures",
            ),
            (
                stream(&[vec![("id", id()), ("id", id())]]),
                "hosts.id",
                "is there twice",
            ),
            (
                stream(&[vec![
                    ("id", id()),
                    ("capabilities.x", id()),
                    ("capabilities.x", id()),
                ]]),
                "hosts.capabilities.x",
                "is there twice",
            ),
            (stream(&[vec![("name", id())]]), "hosts.id", "is missing"),
            (
                stream(&[vec![("id", float64(&[Some(1.0)]))]]),
                "hosts.id",
                "expected texts",
            ),
        ];
        for (bytes, field, message) in cases {
            let e = ArrowHosts::read(Buffer::from(bytes)).expect_err(field);
            assert_eq!(e.field, field);
            assert!(e.message.contains(message), "{field}: {}", e.message);
        }
        let truncated = stream(&[vec![("id", id())]]);
        let e = ArrowHosts::read(Buffer::from(truncated[..truncated.len() - 12].to_vec()))
            .expect_err("a truncated stream");
        assert_eq!(e.field, "hosts");
        let e = ArrowVms::read(Buffer::from(stream(&[vec![("id", id())]])))
            .expect_err("VMs without their hosts");
        assert_eq!(e.field, "vms.host");
    }

    /// A value the JSON form refuses is refused the same way (path and
    /// kind) when sent as columns.
    #[test]
    fn refused_values_are_answered_as_for_json_hosts() {
        let refusals = [
            r#"{"hosts": [{"id": "a"}, {"id": "a"}]}"#,
            r#"{"hosts": [{"id": ""}]}"#,
            r#"{"hosts": [{"id": "a\u0007"}]}"#,
            r#"{"hosts": [{"id": "a", "metrics": {"cpu_cores": -1}}]}"#,
            r#"{"hosts": [{"id": "a", "name": "x\u0000y"}]}"#,
            r#"{"hosts": [{"id": "a"}], "vms": [{"id": "v", "host": "b"}]}"#,
            r#"{"hosts": [{"id": "a"}], "vms": [{"id": "v", "host": "a"}, {"id": "v", "host": "a"}]}"#,
            r#"{"hosts": [{"id": "a"}], "vms": [{"id": "v", "host": "a", "vcpus": 0}]}"#,
            r#"{"hosts": [{"id": "a"}], "vms": [{"id": "v", "host": "a", "memory_mib": -1}]}"#,
            r#"{"hosts": [{"id": "a", "metrics": {"cpu_cores": -1}}], "vms": [{"id": "", "host": "a"}]}"#,
        ];
        for text in refusals {
            let snapshot: Snapshot = from_json(text).expect("valid JSON");
            let json = build_checked(&snapshot).map(|_| ()).expect_err(text);
            let compact = built(&write(&snapshot).expect("written"))
                .map(|_| ())
                .expect_err(text);
            assert_eq!(compact, json, "{text}");
        }
        // What JSON cannot send: NaN, a fractional vCPU count, an unknown
        // status.
        let refusal = |columns: Vec<(&str, ArrayRef)>| {
            ArrowHosts::read(Buffer::from(stream(&[columns])))
                .expect("read")
                .build(&ArrowVms::default())
                .map(|_| ())
                .unwrap_err()
        };
        let e = refusal(vec![
            ("id", utf8(&[Some("a")])),
            ("metrics.cpu_cores", float64(&[Some(f64::NAN)])),
        ]);
        assert_eq!(e.path, "hosts[0].metrics.cpu_cores");
        let e = refusal(vec![
            ("id", utf8(&[Some("a")])),
            ("status", utf8(&[Some("sleepy")])),
        ]);
        assert_eq!(e.path, "hosts[0].status");
        let hosts = ArrowHosts::read(Buffer::from(stream(&[vec![("id", utf8(&[Some("a")]))]])))
            .expect("read");
        let vms = ArrowVms::read(Buffer::from(stream(&[vec![
            ("id", utf8(&[Some("v")])),
            ("host", utf8(&[Some("a")])),
            ("vcpus", float64(&[Some(1.5)])),
        ]])))
        .expect("read");
        let e = hosts.build(&vms).map(|_| ()).unwrap_err();
        assert_eq!(e.path, "vms[0].vcpus");
    }

    /// Hardware, which only JSON carries, is refused by the writer,
    /// naming the host.
    #[test]
    fn hosts_with_hardware_are_not_written() {
        let snapshot: Snapshot =
            from_json(r#"{"hosts": [{"id": "a", "hardware": {"cpu_model": "Skylake"}}]}"#)
                .expect("valid JSON");
        let e = write(&snapshot).expect_err("hardware");
        assert!(e.to_string().contains("host `a` has hardware"), "{e}");
    }
}
