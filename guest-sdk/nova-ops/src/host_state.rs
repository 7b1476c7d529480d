//! Nova's `HostState` names, mapped onto our columns.
//!
//! `ComputeCapabilitiesFilter` (unscoped and `capabilities:` extra specs)
//! and `JsonFilter` (`$variables`) look host data up by the attribute names
//! of Nova's `HostState`, then in its `stats` dictionary, then walk into
//! JSON documents such as `cpu_info`. Our snapshot has typed columns plus a
//! `capabilities` key/value column, so this module is the one place that
//! says which Nova name reads which column:
//!
//! | Nova name | our data |
//! |---|---|
//! | `free_ram_mb` | `memory-free-mib` |
//! | `total_usable_ram_mb` | `memory-total-mib` |
//! | `free_disk_mb` | `disk-free-gib` × 1024 |
//! | `total_usable_disk_gb` | `disk-total-gib` |
//! | `disk_mb_used` | (`disk-total-gib` − `disk-free-gib`) × 1024 |
//! | `vcpus_total` | `cpu-threads` (logical CPUs, as libvirt reports them), else `cpu-cores` |
//! | `vcpus_used` | `vcpus-used` |
//! | `num_instances` | `vm-count` |
//! | `num_io_ops` | `io-ops` |
//! | `failed_builds` | `build-failures` |
//! | `hypervisor_version` | `hypervisor-version` (Nova's integer form, 6.0.0 = 6000000) |
//! | `host`, `nodename`, `hypervisor_hostname` | host `name` |
//! | `host_ip` | host `address` |
//! | `uuid` | host `id` |
//! | `service.disabled` | status is `disabled` |
//! | anything else (`hypervisor_type`, `cpu_info`, `supported_instances`, `stats` keys) | the `capabilities` column |
//!
//! A capability path `a:b:c` (or `$a.b.c`) reads the capability stored
//! under the whole path `a:b:c` when the host has one (our flat encoding),
//! else walks into capability `a` as Nova does: each string on the way is
//! decoded as JSON and indexed by the next name; a missing key, a JSON
//! `null`, or a step into something that is not an object finds nothing.

use std::fmt;

use sandpiper_guest::Hosts;
use sandpiper_guest::model::{HostLabels, HostMetric, HostStatus, HostText, Labels};
use serde_core::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// A numeric `HostState` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumericAttribute {
    FreeRamMb,
    TotalUsableRamMb,
    FreeDiskMb,
    TotalUsableDiskGb,
    DiskMbUsed,
    VcpusTotal,
    VcpusUsed,
    NumInstances,
    NumIoOps,
    FailedBuilds,
    HypervisorVersion,
}

/// MiB per GiB: Nova counts disk in MB where our columns count GiB.
pub const MIB_PER_GIB: f64 = 1024.0;

impl NumericAttribute {
    /// Every numeric attribute with its Nova name.
    pub const NAMES: &'static [(&'static str, NumericAttribute)] = &[
        ("free_ram_mb", NumericAttribute::FreeRamMb),
        ("total_usable_ram_mb", NumericAttribute::TotalUsableRamMb),
        ("free_disk_mb", NumericAttribute::FreeDiskMb),
        ("total_usable_disk_gb", NumericAttribute::TotalUsableDiskGb),
        ("disk_mb_used", NumericAttribute::DiskMbUsed),
        ("vcpus_total", NumericAttribute::VcpusTotal),
        ("vcpus_used", NumericAttribute::VcpusUsed),
        ("num_instances", NumericAttribute::NumInstances),
        ("num_io_ops", NumericAttribute::NumIoOps),
        ("failed_builds", NumericAttribute::FailedBuilds),
        ("hypervisor_version", NumericAttribute::HypervisorVersion),
    ];

    /// The attribute Nova calls `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, attribute)| attribute)
    }

    /// The attribute's value for host `row`.
    pub fn value(self, hosts: &Hosts<'_>, row: usize) -> f64 {
        let metric = |m: HostMetric| hosts.metric(m).get(row).copied().unwrap_or(f64::NAN);
        match self {
            NumericAttribute::FreeRamMb => metric(HostMetric::MemoryFreeMib),
            NumericAttribute::TotalUsableRamMb => metric(HostMetric::MemoryTotalMib),
            NumericAttribute::FreeDiskMb => metric(HostMetric::DiskFreeGib) * MIB_PER_GIB,
            NumericAttribute::TotalUsableDiskGb => metric(HostMetric::DiskTotalGib),
            NumericAttribute::DiskMbUsed => {
                (metric(HostMetric::DiskTotalGib) - metric(HostMetric::DiskFreeGib)) * MIB_PER_GIB
            }
            NumericAttribute::VcpusTotal => {
                vcpus_total(metric(HostMetric::CpuThreads), metric(HostMetric::CpuCores))
            }
            NumericAttribute::VcpusUsed => metric(HostMetric::VcpusUsed),
            NumericAttribute::NumInstances => metric(HostMetric::VmCount),
            NumericAttribute::NumIoOps => metric(HostMetric::IoOps),
            NumericAttribute::FailedBuilds => metric(HostMetric::BuildFailures),
            NumericAttribute::HypervisorVersion => metric(HostMetric::HypervisorVersion),
        }
    }
}

/// Nova's `vcpus_total`: the logical CPUs the hypervisor reports, which is
/// our thread count; a host that reports no threads falls back to its cores.
pub fn vcpus_total(threads: f64, cores: f64) -> f64 {
    if threads > 0.0 { threads } else { cores }
}

/// A text `HostState` attribute.
pub fn text_attribute(name: &str) -> Option<HostText> {
    match name {
        "host" | "nodename" | "hypervisor_hostname" => Some(HostText::Name),
        "host_ip" => Some(HostText::Address),
        "uuid" => Some(HostText::Id),
        _ => None,
    }
}

/// Where a Nova name path reads from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A numeric attribute.
    Numeric(NumericAttribute),
    /// A text attribute.
    Text(HostText),
    /// `service.disabled`.
    ServiceDisabled,
    /// A capability path.
    Capability(Vec<String>),
    /// A path into an attribute that has no inside (`free_ram_mb.x`):
    /// never found.
    Nothing,
}

impl Source {
    /// Where `path` (Nova's `a:b:c` split, or `$a.b.c` split) reads from.
    /// Attributes come first, as Nova's `getattr` does before `stats`.
    pub fn of(path: &[&str]) -> Self {
        match path {
            [] => Source::Nothing,
            [name] => NumericAttribute::from_name(name)
                .map(Source::Numeric)
                .or_else(|| text_attribute(name).map(Source::Text))
                .unwrap_or_else(|| Source::Capability(vec![(*name).to_owned()])),
            ["service", "disabled"] => Source::ServiceDisabled,
            [first, ..] if NumericAttribute::from_name(first).is_some() => Source::Nothing,
            [first, ..] if text_attribute(first).is_some() => Source::Nothing,
            _ => Source::Capability(path.iter().map(|s| (*s).to_owned()).collect()),
        }
    }
}

/// True when host `row` is a disabled compute service.
pub fn service_disabled(hosts: &Hosts<'_>, row: usize) -> bool {
    hosts.statuses().get(row) == Some(&HostStatus::Disabled)
}

/// What a capability path found on one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// The capability stored under the whole path: value string id.
    Flat(u32),
    /// The capability stored under the path's first name, to be walked
    /// into with the rest of the path: value string id.
    Root(u32),
}

/// A capability path looked up in one call's `capabilities` column.
pub struct CapabilityPath<'a> {
    labels: &'a Labels,
    flat: Option<u32>,
    root: Option<u32>,
    rest: Vec<String>,
}

impl<'a> CapabilityPath<'a> {
    /// Prepares `path` (at least one name) against the column.
    pub fn new(hosts: &Hosts<'a>, path: &[String]) -> Self {
        let labels = hosts.labels(HostLabels::Capabilities);
        let flat = labels.id(&path.join(":"));
        let (root, rest) = match path {
            [root, rest @ ..] if !rest.is_empty() => (labels.id(root), rest.to_vec()),
            _ => (None, Vec::new()),
        };
        CapabilityPath {
            labels,
            flat,
            root,
            rest,
        }
    }

    /// Where host `row` keeps the capability, if anywhere.
    pub fn find(&self, row: u32) -> Option<Found> {
        let mut root = None;
        for (key, value) in self.labels.id_pairs(row as usize) {
            if Some(key) == self.flat {
                return Some(Found::Flat(value));
            }
            if root.is_none() && Some(key) == self.root {
                root = Some(value);
            }
        }
        root.map(Found::Root)
    }

    /// The text of a value string id.
    pub fn text(&self, id: u32) -> &'a str {
        self.labels.string(id)
    }

    /// Walks a [`Found::Root`] value along the rest of the path; `None`
    /// where Nova finds nothing. Units remember the answer per id: many
    /// hosts share one `cpu_info` text.
    pub fn walk(&self, root_id: u32) -> Option<Value> {
        walk(self.text(root_id), &self.rest)
    }
}

/// Nova's `_get_capabilities` from a string value: decode each string on
/// the way as JSON and index objects by name.
///
/// Each step builds only the member it indexes (`member`): a
/// `cpu_info` checked for its vendor does not build its features list.
pub fn walk(root: &str, rest: &[String]) -> Option<Value> {
    let Some((first, more)) = rest.split_first() else {
        return Some(Value::String(root.to_owned()));
    };
    let mut cap = member(root, first)?;
    for name in more {
        // A step that finds a `null` finds nothing (Nova's `None`).
        cap = match cap {
            Value::String(text) => member(&text, name)?,
            Value::Object(mut map) => map.remove(name).filter(|value| !value.is_null())?,
            _ => return None,
        };
    }
    Some(cap)
}

/// The member `name` of `text`, a JSON object, built alone: the rest of
/// the document is checked as JSON but not built (`IgnoredAny`), and keys
/// are compared where they lie. `None` when `text` is not JSON, not an
/// object, or has no such member, or it is `null`. As in serde_json's
/// `Value`, the last of duplicate members counts.
fn member(text: &str, name: &str) -> Option<Value> {
    let mut json = serde_json::Deserializer::from_str(text);
    let found = Member(name).deserialize(&mut json).ok()?;
    json.end().ok()?;
    found.filter(|value| !value.is_null())
}

/// Finds one member of a JSON object as it is read.
struct Member<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for Member<'_> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, json: D) -> Result<Self::Value, D::Error> {
        json.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Member<'_> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(wanted) = members.next_key_seed(KeyIs(self.0))? {
            if wanted {
                found = Some(members.next_value::<Value>()?);
            } else {
                members.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Whether a member's key is `name`, compared without building it.
struct KeyIs<'n>(&'n str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, json: D) -> Result<bool, D::Error> {
        json.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<bool, E> {
        Ok(key == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_attributes_first() {
        assert_eq!(
            Source::of(&["free_ram_mb"]),
            Source::Numeric(NumericAttribute::FreeRamMb)
        );
        assert_eq!(Source::of(&["host_ip"]), Source::Text(HostText::Address));
        assert_eq!(
            Source::of(&["service", "disabled"]),
            Source::ServiceDisabled
        );
        assert_eq!(Source::of(&["free_ram_mb", "x"]), Source::Nothing);
        assert_eq!(
            Source::of(&["cpu_info", "vendor"]),
            Source::Capability(vec!["cpu_info".into(), "vendor".into()])
        );
    }

    #[test]
    fn walks_json_strings_as_nova_does() {
        let cpu_info = r#" { "vendor": "Intel", "features": ["lahf_lm", "rdtscp"],
                            "maxphysaddr": {"bits": 42}, "none": null,
                            "topology": "{\"cores\": 8, \"sockets\": \"{\\\"n\\\": 2}\"}" } "#;
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            walk(cpu_info, &path(&["vendor"])),
            Some(Value::from("Intel"))
        );
        assert_eq!(
            walk(cpu_info, &path(&["maxphysaddr", "bits"])),
            Some(Value::from(42))
        );
        assert_eq!(
            walk(cpu_info, &path(&["topology", "cores"])),
            Some(Value::from(8)),
            "JSON inside a JSON string"
        );
        assert_eq!(
            walk(cpu_info, &path(&["topology", "sockets", "n"])),
            Some(Value::from(2)),
            "twice"
        );
        assert_eq!(walk(cpu_info, &path(&["none"])), None);
        assert_eq!(walk(cpu_info, &path(&["vendor", "x"])), None);
        assert_eq!(walk("cpu_info", &path(&["vendor"])), None, "not JSON");
        assert_eq!(walk(" { } ", &path(&["vendor"])), None);
        assert_eq!(
            walk(r#"{"a": {"b": null, "c": 1}}"#, &path(&["a", "b"])),
            None,
            "a null inside"
        );
        assert_eq!(walk("[1, 2]", &path(&["vendor"])), None, "not an object");
        assert_eq!(
            walk(
                r#"{"vendor": "AMD", "x": [1, {"vendor": "no"}], "vendor": "Intel"}"#,
                &path(&["vendor"])
            ),
            Some(Value::from("Intel")),
            "the last of duplicate members, not one inside another"
        );
        assert_eq!(
            walk(r#"{"ven\u0064or": "Intel"}"#, &path(&["vendor"])),
            Some(Value::from("Intel")),
            "a key written with an escape"
        );
        assert_eq!(
            walk(r#"{"vendor": "Intel", "x": [1, }"#, &path(&["vendor"])),
            None,
            "JSON broken after the member"
        );
    }

    /// Nova's walk as it reads: the whole text decoded, then indexed.
    fn walk_whole(root: &str, rest: &[String]) -> Option<Value> {
        let mut cap = Value::String(root.to_owned());
        for name in rest {
            if let Value::String(text) = &cap {
                cap = serde_json::from_str(text).ok()?;
            }
            cap = match cap {
                Value::Object(mut map) => map.remove(name)?,
                _ => return None,
            };
            if cap.is_null() {
                return None;
            }
        }
        Some(cap)
    }

    /// A JSON text of nested objects (keys `a`, `b`, `c`, repeated at
    /// times), lists, scalars, `null`s and JSON inside strings.
    fn document(next: &mut impl FnMut(u64) -> u64, depth: u32) -> String {
        const KEYS: [&str; 3] = ["a", "b", "c"];
        match next(if depth == 0 { 4 } else { 7 }) {
            0 => "null".to_owned(),
            1 => "1.5".to_owned(),
            2 => "\"x\"".to_owned(),
            3 => "true".to_owned(),
            4 => {
                let items: Vec<String> = (0..next(3)).map(|_| document(next, depth - 1)).collect();
                format!("[{}]", items.join(", "))
            }
            5 => serde_json::to_string(&document(next, depth - 1)).expect("a string"),
            _ => {
                let members: Vec<String> = (0..next(4))
                    .map(|_| {
                        let key = KEYS[next(3) as usize];
                        format!("\"{key}\": {}", document(next, depth - 1))
                    })
                    .collect();
                format!("{{{}}}", members.join(", "))
            }
        }
    }

    #[test]
    fn walking_member_by_member_finds_what_decoding_the_whole_text_finds() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut found = 0;
        for _ in 0..20_000 {
            let mut text = document(&mut next, 3);
            if next(10) == 0 {
                text.push('}');
            }
            let path: Vec<String> = (0..=next(3))
                .map(|_| ["a", "b", "c"][next(3) as usize].to_owned())
                .collect();
            let walked = walk(&text, &path);
            assert_eq!(walked, walk_whole(&text, &path), "{text} at {path:?}");
            found += usize::from(walked.is_some());
        }
        assert!(found > 100, "only {found} paths found anything");
    }
}
