//! A workload trace: VM arrivals and departures in time order, read from
//! JSON Lines or CSV (docs/simulator.md, "Trace format"), or made by
//! [`mod@super::generate`]. Every event is checked once, here, with an error
//! naming its line (in a file) or its index (in an API body) and the
//! field, so the replay never meets a VM it cannot decide.
//!
//! An arriving VM is the snapshot format's VM to place (`snapshot::VmSpec`,
//! what `POST .../schedule` takes as `"vm"`), checked by the same
//! `inputs::check_vm`: no second VM format.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::inputs;
use crate::snapshot::VmSpec;

/// The most events a trace may hold: 100,000 arrivals and departures
/// replayed against 8 policies is minutes of CPU, already more than a
/// request should ask of a server; a real trace of a larger cluster can be
/// cut into windows.
pub const MAX_EVENTS: usize = 100_000;

/// The longest line of a trace file, bytes: one VM in the snapshot format
/// is a few hundred bytes; 64 KiB leaves room for long extra specs and
/// groups, and bounds what a broken file (no newlines) makes us buffer.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The largest trace file read, bytes: [`MAX_EVENTS`] lines of a few
/// hundred bytes each.
pub const MAX_TRACE_BYTES: u64 = 64 * 1024 * 1024;

/// The latest time an event may have, seconds from the start: ten years,
/// far past any trace, and small enough that every count of sampling or
/// balancing intervals derived from it stays exact.
pub const MAX_AT_S: u64 = 10 * 366 * 24 * 3600;

/// The CSV header, exactly: the columns are the snapshot format's own
/// field names (`vm.id` as `vm_id`).
pub const CSV_HEADER: &str = "at_s,event,vm_id,memory_mib,vcpus";

/// What happens to a VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The VM asks to start: a schedule decision.
    Arrive,
    /// The VM stops and leaves its host.
    Depart,
}

/// One event of a trace: a line of a JSON Lines trace, an element of the
/// API's `trace.events`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceEvent {
    /// Seconds from the start of the trace; events are in this order.
    pub at_s: u64,
    pub event: EventKind,
    /// The arriving VM (`arrive` only), as `POST .../schedule`'s `vm`; its
    /// `id` is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<VmSpec>,
    /// The departing VM's id (`depart` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::names::optional_id_schema)]
    pub vm_id: Option<String>,
}

/// A checked trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// In time order.
    pub events: Vec<Event>,
    /// The seed of a generated trace.
    pub seed: Option<u64>,
    /// How long the replay runs, seconds: the last event's time, or a
    /// generated trace's horizon.
    pub duration_s: u64,
}

/// A checked event.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Arrive { at_s: u64, vm: Box<VmSpec> },
    Depart { at_s: u64, vm_id: String },
}

impl Event {
    pub fn at_s(&self) -> u64 {
        match self {
            Event::Arrive { at_s, .. } | Event::Depart { at_s, .. } => *at_s,
        }
    }

    /// The event in its wire form.
    pub fn to_wire(&self) -> TraceEvent {
        match self {
            Event::Arrive { at_s, vm } => TraceEvent {
                at_s: *at_s,
                event: EventKind::Arrive,
                vm: Some(vm.as_ref().clone()),
                vm_id: None,
            },
            Event::Depart { at_s, vm_id } => TraceEvent {
                at_s: *at_s,
                event: EventKind::Depart,
                vm: None,
                vm_id: Some(vm_id.clone()),
            },
        }
    }
}

/// Where a bad event is: a file's line (1-based) or a body's event index
/// (0-based), and the field in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {field}: {message}", self.place())]
pub struct TraceError {
    /// The event's 0-based index, for `trace.events[i]`.
    pub index: usize,
    /// The file line, when the trace came from a file.
    pub line: Option<usize>,
    /// The field inside the event (`vm.memory_mib`, `at_s`), or empty for
    /// the whole event or file.
    pub field: String,
    pub message: String,
}

impl TraceError {
    fn place(&self) -> String {
        match self.line {
            Some(line) => format!("line {line}"),
            None => format!("events[{}]", self.index),
        }
    }

    fn at(index: usize, field: impl Into<String>, message: impl Into<String>) -> Self {
        TraceError {
            index,
            line: None,
            field: field.into(),
            message: message.into(),
        }
    }

    fn on_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
}

/// The format of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// CSV when the first non-blank line is the CSV header, else JSON
    /// Lines: a JSON Lines trace starts with `{`, so the two never meet.
    pub fn sniff(text: &str) -> Format {
        match text.lines().map(str::trim).find(|l| !l.is_empty()) {
            Some(first) if first.starts_with("at_s,") => Format::Csv,
            _ => Format::Jsonl,
        }
    }
}

/// Reads a trace file's text (its format sniffed, [`Format::sniff`]).
pub fn parse(text: &str) -> Result<Trace, TraceError> {
    match Format::sniff(text) {
        Format::Jsonl => parse_jsonl(text),
        Format::Csv => parse_csv(text),
    }
}

/// Numbered non-blank lines, each checked against [`MAX_LINE_BYTES`].
fn lines(text: &str) -> impl Iterator<Item = Result<(usize, &str), TraceError>> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            if l.len() > MAX_LINE_BYTES {
                Err(TraceError::at(
                    0,
                    "",
                    format!("the line is longer than {MAX_LINE_BYTES} bytes"),
                )
                .on_line(n))
            } else {
                Ok((n, l))
            }
        })
}

/// Reads a JSON Lines trace: one [`TraceEvent`] object per line.
pub fn parse_jsonl(text: &str) -> Result<Trace, TraceError> {
    let mut wire = Vec::new();
    let mut line_of = Vec::new();
    for line in lines(text) {
        let (n, l) = line?;
        check_count(wire.len()).map_err(|e| e.on_line(n))?;
        let mut de = serde_json::Deserializer::from_str(l);
        let event: TraceEvent = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." { String::new() } else { field };
            TraceError::at(wire.len(), field, e.into_inner().to_string()).on_line(n)
        })?;
        wire.push(event);
        line_of.push(n);
    }
    check_events(wire, None).map_err(|e| {
        let line = line_of.get(e.index).copied();
        TraceError { line, ..e }
    })
}

/// Reads a CSV trace: [`CSV_HEADER`], then one event per line; `depart`
/// rows leave `memory_mib` and `vcpus` empty.
pub fn parse_csv(text: &str) -> Result<Trace, TraceError> {
    let mut all = lines(text);
    let header = match all.next() {
        Some(line) => line?,
        None => return Ok(Trace::default()),
    };
    if header.1.trim() != CSV_HEADER {
        return Err(
            TraceError::at(0, "", format!("the header must be `{CSV_HEADER}`")).on_line(header.0),
        );
    }
    let mut wire = Vec::new();
    let mut line_of = Vec::new();
    for line in all {
        let (n, l) = line?;
        check_count(wire.len()).map_err(|e| e.on_line(n))?;
        let event = csv_row(wire.len(), l).map_err(|e| e.on_line(n))?;
        wire.push(event);
        line_of.push(n);
    }
    check_events(wire, None).map_err(|e| {
        let line = line_of.get(e.index).copied();
        TraceError { line, ..e }
    })
}

/// One CSV row as the event it stands for.
fn csv_row(index: usize, line: &str) -> Result<TraceEvent, TraceError> {
    let cells: Vec<&str> = line.split(',').map(str::trim).collect();
    let [at_s, event, vm_id, memory_mib, vcpus] = cells[..] else {
        return Err(TraceError::at(
            index,
            "",
            format!("{} cells; the header has 5", cells.len()),
        ));
    };
    let number = |field: &str, cell: &str| -> Result<f64, TraceError> {
        cell.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| TraceError::at(index, field, format!("`{cell}` is not a number")))
    };
    let at_s = at_s.parse::<u64>().map_err(|_| {
        TraceError::at(
            index,
            "at_s",
            format!("`{at_s}` is not a whole number of seconds"),
        )
    })?;
    let vm_id = vm_id.to_owned();
    match event {
        "arrive" => {
            let memory_mib = number("vm.memory_mib", memory_mib)?;
            let vcpus = vcpus.parse::<u32>().map_err(|_| {
                TraceError::at(
                    index,
                    "vm.vcpus",
                    format!("`{vcpus}` is not a whole number"),
                )
            })?;
            Ok(TraceEvent {
                at_s,
                event: EventKind::Arrive,
                vm: Some(VmSpec {
                    id: vm_id,
                    memory_mib,
                    vcpus,
                    ..VmSpec::default()
                }),
                vm_id: None,
            })
        }
        "depart" => Ok(TraceEvent {
            at_s,
            event: EventKind::Depart,
            vm: None,
            vm_id: Some(vm_id),
        }),
        other => Err(TraceError::at(
            index,
            "event",
            format!("`{other}` is neither `arrive` nor `depart`"),
        )),
    }
}

fn check_count(held: usize) -> Result<(), TraceError> {
    if held >= MAX_EVENTS {
        return Err(TraceError::at(
            held,
            "",
            format!("the trace has more than {MAX_EVENTS} events"),
        ));
    }
    Ok(())
}

/// Checks events in their wire form and returns the trace: times in order
/// and at most [`MAX_AT_S`], an arriving VM valid with an id, a VM not
/// arriving while it is already there, a departure naming a VM. `seed`
/// is the generator's, if any. A departure of a VM that never arrived is
/// allowed: it may be a VM of the starting cluster.
pub fn check_events(events: Vec<TraceEvent>, seed: Option<u64>) -> Result<Trace, TraceError> {
    if events.len() > MAX_EVENTS {
        return Err(TraceError::at(
            MAX_EVENTS,
            "",
            format!("the trace has more than {MAX_EVENTS} events"),
        ));
    }
    let mut out = Vec::with_capacity(events.len());
    let mut last = 0;
    let mut present: BTreeSet<String> = BTreeSet::new();
    for (i, e) in events.into_iter().enumerate() {
        if e.at_s > MAX_AT_S {
            return Err(TraceError::at(
                i,
                "at_s",
                format!("{} is past the limit of {MAX_AT_S} s", e.at_s),
            ));
        }
        if e.at_s < last {
            return Err(TraceError::at(
                i,
                "at_s",
                format!(
                    "{} is before the previous event's {last}: events must be in time order",
                    e.at_s
                ),
            ));
        }
        last = e.at_s;
        let event = match (e.event, e.vm, e.vm_id) {
            (EventKind::Arrive, Some(vm), None) => {
                if vm.id.is_empty() {
                    return Err(TraceError::at(i, "vm.id", "an arriving VM needs an id"));
                }
                inputs::check_vm(&vm, "vm")
                    .map_err(|s| TraceError::at(i, s.path, s.kind.to_string()))?;
                if !present.insert(vm.id.clone()) {
                    return Err(TraceError::at(
                        i,
                        "vm.id",
                        format!("`{}` arrives again before it departed", vm.id),
                    ));
                }
                Event::Arrive {
                    at_s: e.at_s,
                    vm: Box::new(vm),
                }
            }
            (EventKind::Arrive, None, _) => {
                return Err(TraceError::at(i, "vm", "an `arrive` event needs `vm`"));
            }
            (EventKind::Arrive, Some(_), Some(_)) => {
                return Err(TraceError::at(
                    i,
                    "vm_id",
                    "an `arrive` event names its VM in `vm.id`",
                ));
            }
            (EventKind::Depart, None, Some(vm_id)) => {
                inputs::check_id(&vm_id, format_args!("vm_id"))
                    .map_err(|s| TraceError::at(i, "vm_id", s.kind.to_string()))?;
                present.remove(&vm_id);
                Event::Depart {
                    at_s: e.at_s,
                    vm_id,
                }
            }
            (EventKind::Depart, _, None) => {
                return Err(TraceError::at(i, "vm_id", "a `depart` event needs `vm_id`"));
            }
            (EventKind::Depart, Some(_), Some(_)) => {
                return Err(TraceError::at(
                    i,
                    "vm",
                    "a `depart` event names its VM in `vm_id` only",
                ));
            }
        };
        out.push(event);
    }
    let duration_s = out.last().map_or(0, Event::at_s);
    Ok(Trace {
        events: out,
        seed,
        duration_s,
    })
}

/// The trace as JSON Lines, one event per line: what
/// `sandpiper simulate generate-trace` prints, which [`parse`] reads back.
/// A VM's fields left at their defaults are left out, so a line says
/// what the VM is, not every option it does not use.
pub fn to_jsonl(trace: &Trace) -> Result<String, serde_json::Error> {
    let defaults = serde_json::to_value(VmSpec::default())?;
    let mut out = String::new();
    for event in &trace.events {
        let mut line = serde_json::to_value(event.to_wire())?;
        if let (Some(vm), Some(defaults)) = (
            line.get_mut("vm").and_then(|v| v.as_object_mut()),
            defaults.as_object(),
        ) {
            vm.retain(|key, value| key == "id" || defaults.get(key) != Some(value));
        }
        out.push_str(&serde_json::to_string(&line)?);
        out.push('\n');
    }
    Ok(out)
}

/// The trace as CSV ([`CSV_HEADER`]), when every arriving VM says no more
/// than CSV can (an id, memory and vCPUs); `None` otherwise.
pub fn to_csv(trace: &Trace) -> Option<String> {
    let mut out = format!("{CSV_HEADER}\n");
    for event in &trace.events {
        match event {
            Event::Arrive { at_s, vm } => {
                let plain = VmSpec {
                    id: vm.id.clone(),
                    memory_mib: vm.memory_mib,
                    vcpus: vm.vcpus,
                    ..VmSpec::default()
                };
                if **vm != plain || vm.id.contains(',') {
                    return None;
                }
                out.push_str(&format!(
                    "{at_s},arrive,{},{},{}\n",
                    vm.id, vm.memory_mib, vm.vcpus
                ));
            }
            Event::Depart { at_s, vm_id } => {
                if vm_id.contains(',') {
                    return None;
                }
                out.push_str(&format!("{at_s},depart,{vm_id},,\n"));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_line_is_named_with_its_field() {
        let text = "{\"at_s\":0,\"event\":\"arrive\",\"vm\":{\"id\":\"a\",\"memory_mib\":1024}}\n\n\
                    {\"at_s\":5,\"event\":\"arrive\",\"vm\":{\"id\":\"b\",\"memory_mib\":-1}}\n";
        let e = parse(text).unwrap_err();
        assert_eq!(
            (e.line, e.index, e.field.as_str()),
            (Some(3), 1, "vm.memory_mib")
        );
        let text = "{\"at_s\":0,\"event\":\"arrive\",\"vm\":{\"id\":\"a\",\"memry_mib\":1}}\n";
        let e = parse(text).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(1), "vm.memry_mib"));
    }

    #[test]
    fn unsorted_events_are_refused_at_the_late_one() {
        let text = format!("{CSV_HEADER}\n10,arrive,a,1024,1\n5,depart,a,,\n");
        let e = parse(&text).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (Some(3), "at_s"));
    }

    #[test]
    fn csv_and_jsonl_read_the_same() {
        let csv = format!("{CSV_HEADER}\n0,arrive,a,1024,2\n60,depart,a,,\n");
        let trace = parse(&csv).unwrap();
        let again = parse(&to_jsonl(&trace).unwrap()).unwrap();
        assert_eq!(trace, again);
        assert_eq!(to_csv(&again).as_deref(), Some(csv.as_str()));
        assert_eq!(trace.duration_s, 60);
    }
}
