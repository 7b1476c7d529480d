//! `ImagePropertiesFilter`: rejects hosts that cannot run the image's
//! architecture, hypervisor type, VM mode or hypervisor version.
//!
//! Behaviour from Nova's `nova/scheduler/filters/image_props_filter.py`
//! (reference notes §1.1). The image asks for up to three things, each
//! canonicalised as Nova does (lower case; `i386`/`i486`/`i586`/`x86_32`
//! are `i686`, `amd64` is `x86_64`; hypervisor `xapi` is `xen`; VM mode
//! `pv` is `xen`, `hv` and `baremetal` are `hvm`):
//!
//! * `hw_architecture` (legacy `architecture`), else the
//!   `image_properties_default_architecture` parameter;
//! * `img_hv_type` (legacy `hypervisor_type`);
//! * `hw_vm_mode` (legacy `vm_mode`).
//!
//! When it asks for none, every host passes. Otherwise a host passes when
//! one of its supported instances contains every requested value (Nova
//! tests membership in the tuple, not position), **and** the image's
//! `img_hv_requested_version` (legacy `hypervisor_version_requires`, e.g.
//! `>=6.0,<6.2`) accepts the host's hypervisor version (skipped when either
//! is missing), **and** the host's `cpu_info.maxphysaddr.bits` is at least
//! the image's `hw_maxphysaddr_bits` (skipped when either is missing).
//!
//! Data: the host capability `supported_instances`, a JSON list of
//! `[architecture, hypervisor type, VM mode]` lists as Nova's compute
//! nodes report it (`[["x86_64", "kvm", "hvm"]]`); the `hypervisor-version`
//! column in Nova's integer form (6.0.0 is 6000000); `cpu_info` as in
//! `ComputeCapabilitiesFilter` (a JSON capability or the flat
//! `cpu_info:maxphysaddr:bits`).
//!
//! Where we differ from Nova, and why: an invalid architecture, hypervisor
//! type, VM mode, `hw_maxphysaddr_bits` or version predicate makes Nova
//! raise while building the request; here every host is rejected with the
//! reason. Versions are compared as dotted release numbers (`6.0` equals
//! `6.0.0`); pre-release and local version suffixes, which Nova's
//! `packaging` would accept, are refused the same way.

use sandpiper_guest::collections::HashMap;
use std::cmp::Ordering;

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::host_state::{CapabilityPath, Found};
use sandpiper_nova_ops::python;
use serde_json::Value;

/// Parameter: the architecture assumed for images that do not say.
pub const DEFAULT_ARCHITECTURE: &str = "image_properties_default_architecture";
/// Host capability listing the supported (architecture, hypervisor type,
/// VM mode) triples.
pub const SUPPORTED_INSTANCES: &str = "supported_instances";

/// Nova's `nova.virt.arch.ALL`.
const ARCHITECTURES: &[&str] = &[
    "alpha",
    "armv6",
    "armv7l",
    "armv7b",
    "aarch64",
    "cris",
    "i686",
    "ia64",
    "lm32",
    "m68k",
    "microblaze",
    "microblazeel",
    "mips",
    "mipsel",
    "mips64",
    "mips64el",
    "openrisc",
    "parisc",
    "parisc64",
    "ppc",
    "ppcle",
    "ppc64",
    "ppc64le",
    "ppcemb",
    "s390",
    "s390x",
    "sh4",
    "sh4eb",
    "sparc",
    "sparc64",
    "unicore32",
    "x86_64",
    "xtensa",
    "xtensaeb",
];

/// Nova's `HVType.ALL`.
const HYPERVISOR_TYPES: &[&str] = &[
    "baremetal",
    "bhyve",
    "docker",
    "fake",
    "hyperv",
    "ironic",
    "kqemu",
    "kvm",
    "lxc",
    "lxd",
    "openvz",
    "parallels",
    "phyp",
    "qemu",
    "test",
    "uml",
    "vbox",
    "vz",
    "vmware",
    "xen",
    "zvm",
    "prsm",
];

/// Nova's `VMMode.ALL`.
const VM_MODES: &[&str] = &["hvm", "xen", "uml", "exe"];

/// The `ImagePropertiesFilter` filter.
pub struct ImagePropertiesFilter;

impl Unit for ImagePropertiesFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ImagePropertiesFilter",
            "Rejects hosts whose supported instances, hypervisor version or physical address \
             bits cannot run the image's hw_architecture, img_hv_type, hw_vm_mode, \
             img_hv_requested_version and hw_maxphysaddr_bits (Nova's ImagePropertiesFilter).",
        )
        .with_param(ParamSpec::new(
            DEFAULT_ARCHITECTURE,
            "Architecture assumed for images without hw_architecture; empty for none (Nova's \
             [filter_scheduler] image_properties_default_architecture).",
            "",
            "^[a-zA-Z0-9_]*$",
        ))
        .per_host()
    }
}

/// An image property by its current name, else its legacy name (Nova's
/// `ImageMetaProps.from_dict` lets the current name win).
fn property<'a>(props: &'a [KeyValue], current: &str, legacy: &str) -> Option<&'a str> {
    let find = |key: &str| {
        props
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| kv.value.as_str())
    };
    find(current).or_else(|| find(legacy))
}

/// Nova's `Architecture.canonicalize`.
fn canonical_architecture(name: &str) -> Result<String, String> {
    let lower = name.to_lowercase();
    let canonical = match lower.as_str() {
        "i386" | "i486" | "i586" | "x86_32" | "x86_32p" => "i686".to_owned(),
        "amd64" => "x86_64".to_owned(),
        _ => lower,
    };
    if ARCHITECTURES.contains(&canonical.as_str()) {
        Ok(canonical)
    } else {
        Err(format!("architecture {name:?} is not valid"))
    }
}

/// Nova's `HVType.canonicalize`.
fn canonical_hypervisor_type(name: &str) -> Result<String, String> {
    let lower = name.to_lowercase();
    let canonical = if lower == "xapi" {
        "xen".to_owned()
    } else {
        lower
    };
    if HYPERVISOR_TYPES.contains(&canonical.as_str()) {
        Ok(canonical)
    } else {
        Err(format!("hypervisor type {name:?} is not valid"))
    }
}

/// Nova's `VMMode.canonicalize`.
fn canonical_vm_mode(name: &str) -> Result<String, String> {
    let lower = name.to_lowercase();
    let canonical = match lower.as_str() {
        "pv" => "xen".to_owned(),
        "hv" | "baremetal" => "hvm".to_owned(),
        _ => lower,
    };
    if VM_MODES.contains(&canonical.as_str()) {
        Ok(canonical)
    } else {
        Err(format!("VM mode {name:?} is not valid"))
    }
}

/// A release version, trailing zeros dropped so that `6.0` equals `6.0.0`
/// as `packaging.version.Version` has it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Version(Vec<u64>);

impl Version {
    fn parse(text: &str) -> Option<Self> {
        let mut parts: Vec<u64> = text
            .split('.')
            .map(|part| {
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    part.parse().ok()
                }
            })
            .collect::<Option<_>>()?;
        while parts.last() == Some(&0) {
            parts.pop();
        }
        Some(Version(parts))
    }

    /// oslo's `convert_version_to_str` of Nova's integer form: groups of
    /// three decimal digits (6000000 is 6.0.0).
    fn from_int(mut value: u64) -> Self {
        /// Nova packs each version part into three decimal digits.
        const PART: u64 = 1000;
        let mut parts = Vec::new();
        while value != 0 {
            parts.insert(0, value % PART);
            value /= PART;
        }
        while parts.last() == Some(&0) {
            parts.pop();
        }
        Version(parts)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        // Missing parts are zeros, so compare padded.
        let n = self.0.len().max(other.0.len());
        let part = |v: &Version, i: usize| v.0.get(i).copied().unwrap_or(0);
        (0..n)
            .map(|i| part(self, i).cmp(&part(other, i)))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or(Ordering::Equal)
    }
}

/// oslo's `VersionPredicate`: comma-separated `op version` terms, all of
/// which must hold.
#[derive(Clone, Debug, PartialEq)]
struct Predicate(Vec<(Ordering, bool, Version)>);

impl Predicate {
    /// Each term as (ordering that satisfies it, whether equality also
    /// does, version); `!=` is (Equal, false) inverted below.
    fn parse(text: &str) -> Result<Self, String> {
        let terms = text
            .split(',')
            .map(|term| {
                let term = python::strip(term);
                let (op, rest) = ["<=", ">=", "!=", "==", "<", ">"]
                    .iter()
                    .find_map(|op| term.strip_prefix(op).map(|rest| (*op, rest)))
                    .ok_or_else(|| format!("bad version restriction {term:?}"))?;
                let version_text = python::strip(rest);
                if version_text.is_empty() || version_text.contains(python::is_space) {
                    return Err(format!("bad version restriction {term:?}"));
                }
                let version = Version::parse(version_text)
                    .ok_or_else(|| format!("unsupported version {version_text:?}"))?;
                let term = match op {
                    "<" => (Ordering::Less, false, version),
                    "<=" => (Ordering::Less, true, version),
                    ">" => (Ordering::Greater, false, version),
                    ">=" => (Ordering::Greater, true, version),
                    "==" => (Ordering::Equal, true, version),
                    // `!=`: encoded as "Equal, not allowed".
                    _ => (Ordering::Equal, false, version),
                };
                Ok(term)
            })
            .collect::<Result<_, String>>()?;
        Ok(Predicate(terms))
    }

    fn satisfied_by(&self, version: &Version) -> bool {
        self.0.iter().all(|(ordering, or_equal, wanted)| {
            let actual = version.cmp(wanted);
            match (ordering, or_equal) {
                (Ordering::Equal, true) => actual == Ordering::Equal,
                (Ordering::Equal, false) => actual != Ordering::Equal,
                (o, true) => actual == *o || actual == Ordering::Equal,
                (o, false) => actual == *o,
            }
        })
    }
}

/// What the image asks of a host, prepared once per call.
struct Wanted {
    /// Canonical architecture, hypervisor type and VM mode, when asked.
    props: Vec<String>,
    version: Option<Predicate>,
    maxphysaddr_bits: Option<f64>,
}

fn wanted(cx: &Context<'_>) -> Result<Wanted, String> {
    let props = &cx.vm().image_properties;
    let default_arch = cx
        .params()
        .str(DEFAULT_ARCHITECTURE)
        .map_err(|e| e.to_string())?;
    let arch = property(props, "hw_architecture", "architecture")
        .or((!default_arch.is_empty()).then_some(default_arch));
    let mut wanted = Vec::new();
    if let Some(arch) = arch {
        wanted.push(canonical_architecture(arch)?);
    }
    if let Some(hv) = property(props, "img_hv_type", "hypervisor_type") {
        wanted.push(canonical_hypervisor_type(hv)?);
    }
    if let Some(mode) = property(props, "hw_vm_mode", "vm_mode") {
        wanted.push(canonical_vm_mode(mode)?);
    }
    let version = property(
        props,
        "img_hv_requested_version",
        "hypervisor_version_requires",
    )
    .filter(|text| !text.is_empty())
    .map(Predicate::parse)
    .transpose()?;
    let maxphysaddr_bits = property(props, "hw_maxphysaddr_bits", "hw_maxphysaddr_bits")
        .map(|text| {
            python::int(text)
                .ok_or_else(|| format!("hw_maxphysaddr_bits {text:?} is not an integer"))
        })
        .transpose()?
        .filter(|bits| *bits != 0.0);
    Ok(Wanted {
        props: wanted,
        version,
        maxphysaddr_bits,
    })
}

/// Whether one of the supported instances in `text` holds every wanted
/// value (Nova's `_compare_props`: membership anywhere in the triple).
fn supports(text: &str, props: &[String]) -> bool {
    let Ok(Value::Array(instances)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    instances.iter().any(|instance| {
        let Value::Array(fields) = instance else {
            return false;
        };
        props.iter().all(|prop| {
            fields
                .iter()
                .any(|field| field.as_str() == Some(prop.as_str()))
        })
    })
}

/// The host's physical address bits from `cpu_info`, when it reports them.
fn maxphysaddr_bits(found: &Option<Value>) -> Option<f64> {
    match found {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(text)) => python::float(text),
        _ => None,
    }
}

impl Filter for ImagePropertiesFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let wanted = match wanted(cx) {
            Ok(wanted) => wanted,
            Err(error) => {
                rejections.reject_all(candidates, format!("image properties: {error}"));
                return rejections.into_vec();
            }
        };
        // Nova: supported if no compute-related property is requested.
        if wanted.props.is_empty() {
            return rejections.into_vec();
        }
        let hosts = cx.hosts();
        let capabilities = hosts.labels(HostLabels::Capabilities);
        let supported_key = capabilities.id(SUPPORTED_INSTANCES);
        let mut supported: Vec<Option<bool>> = vec![None; capabilities.strings.len()];
        let versions = wanted
            .version
            .as_ref()
            .map(|_| hosts.metric(HostMetric::HypervisorVersion));
        let bits_path = wanted.maxphysaddr_bits.map(|_| {
            let path: Vec<String> = ["cpu_info", "maxphysaddr", "bits"]
                .iter()
                .map(|s| (*s).to_owned())
                .collect();
            CapabilityPath::new(&hosts, &path)
        });
        let mut walked_bits: HashMap<u32, Option<f64>> = HashMap::default();
        let mut version_ok: HashMap<u64, bool> = HashMap::default();
        let unsupported = rejections.reason(format!(
            "supports no instance of {}",
            wanted.props.join("/")
        ));
        for &host in candidates {
            let text =
                supported_key.and_then(|key| capabilities.values_of(host as usize, key).next());
            let Some(text) = text else {
                rejections.reject(host, "advertises no supported instances");
                continue;
            };
            let ok = match supported.get_mut(text as usize) {
                Some(slot) => {
                    *slot.get_or_insert_with(|| supports(capabilities.string(text), &wanted.props))
                }
                None => false,
            };
            if !ok {
                rejections.reject_for(host, unsupported);
                continue;
            }
            if let (Some(predicate), Some(versions)) = (&wanted.version, versions) {
                let version = versions.get(host as usize).copied().unwrap_or(0.0);
                // `if not (hypervisor_version and version_required)`: pass.
                // Hosts share a handful of versions: judge each once.
                let satisfied = version <= 0.0
                    || *version_ok.entry(version as u64).or_insert_with(|| {
                        predicate.satisfied_by(&Version::from_int(version as u64))
                    });
                if !satisfied {
                    rejections.reject(
                        host,
                        "hypervisor version does not satisfy img_hv_requested_version",
                    );
                    continue;
                }
            }
            if let (Some(required), Some(path)) = (wanted.maxphysaddr_bits, &bits_path) {
                let bits = match path.find(host) {
                    None => None,
                    Some(Found::Flat(id)) => python::float(path.text(id)),
                    Some(Found::Root(id)) => *walked_bits
                        .entry(id)
                        .or_insert_with(|| maxphysaddr_bits(&path.walk(id))),
                };
                // `if not bits: return True`.
                if let Some(bits) = bits.filter(|b| *b != 0.0)
                    && bits < required
                {
                    rejections.reject(
                        host,
                        "cpu_info maxphysaddr bits are fewer than hw_maxphysaddr_bits",
                    );
                }
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(ImagePropertiesFilter: filter);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_predicates_compare_release_numbers() {
        let p = Predicate::parse(">=6.0,<6.2").unwrap();
        assert!(p.satisfied_by(&Version::from_int(6_000_000)));
        assert!(p.satisfied_by(&Version::from_int(6_001_009)));
        assert!(!p.satisfied_by(&Version::from_int(6_002_000)));
        assert!(!p.satisfied_by(&Version::from_int(5_000)));
        assert!(
            Predicate::parse("== 6")
                .unwrap()
                .satisfied_by(&Version::from_int(6_000_000))
        );
        assert!(
            Predicate::parse("!=6.0.1")
                .unwrap()
                .satisfied_by(&Version::from_int(6_000_000))
        );
        assert!(Predicate::parse("6.0").is_err());
        assert!(Predicate::parse(">=6.0rc1").is_err());
        assert!(Predicate::parse(">= 6 .0").is_err());
    }

    #[test]
    fn canonical_names_follow_nova() {
        assert_eq!(canonical_architecture("AMD64").as_deref(), Ok("x86_64"));
        assert_eq!(canonical_architecture("x86_32").as_deref(), Ok("i686"));
        assert!(canonical_architecture("z80").is_err());
        assert_eq!(canonical_hypervisor_type("XAPI").as_deref(), Ok("xen"));
        assert_eq!(canonical_vm_mode("baremetal").as_deref(), Ok("hvm"));
        assert_eq!(canonical_vm_mode("pv").as_deref(), Ok("xen"));
    }
}
