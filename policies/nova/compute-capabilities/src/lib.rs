//! `ComputeCapabilitiesFilter`: rejects hosts whose capabilities do not
//! satisfy the flavor's extra specs.
//!
//! Behaviour from Nova's
//! `nova/scheduler/filters/compute_capabilities_filter.py` (reference notes
//! §1.1, §2.2). For each extra spec of the VM (Nova's flavor extra specs):
//!
//! * `capabilities:a:b:c` — look the path up on the host (see below) and
//!   require [`Requirement::matches`] of Python's `str()` of what was found;
//!   nothing found fails the host;
//! * an unscoped key (`free_ram_mb`, `opt1`) — used only when the host has
//!   it, as a `HostState` attribute or a capability; otherwise ignored;
//! * any other scope (`hw:`, `trait:`, `aggregate_instance_extra_specs:`,
//!   even `opt1:a`) — ignored;
//! * `hw:maxphysaddr_bits = N` is first rewritten to
//!   `capabilities:cpu_info:maxphysaddr:bits = ">= N"`, as Nova does.
//!
//! The first spec a host fails is its reason. The operator grammar, its
//! quirks and Python's number rules are `sandpiper_nova_ops::extra_specs`;
//! the lookup of a path is `sandpiper_nova_ops::host_state`: Nova's
//! attribute names read our columns (`free_ram_mb` is `memory-free-mib`,
//! `hypervisor_version` is `hypervisor-version`, …), everything else the
//! host's `capabilities` column, either under the whole path
//! (`cpu_info:vendor`) or walked into a JSON capability (`cpu_info` holding
//! `{"vendor": "Intel", ...}`), so the compute node's JSON `cpu_info` works
//! unchanged.
//!
//! Where we differ from Nova, and why:
//! * a numeric operator over a value `float()` rejects makes Nova raise
//!   `ValueError` and abort the whole request; here that host fails, with
//!   the error as its reason;
//! * a JSON object printed by `str()` lists its keys sorted, where Python
//!   keeps document order (only matters to `<in>` on a whole object).
//!
//! Cost: one pass over the candidates per spec; each distinct capability
//! text is read and matched once per spec, however many hosts share it
//! (only the member the spec names is built, `host_state::walk`), and so
//! is each of a spec's first 16 distinct numbers; a spec's mismatch and
//! missing reasons are formatted once, not per rejected host.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::extra_specs::{MatchError, Requirement};
use sandpiper_nova_ops::host_state::{CapabilityPath, Found, Source, service_disabled};
use sandpiper_nova_ops::python;

/// The only extra-spec scope this filter reads.
pub const SCOPE: &str = "capabilities";
/// The extra spec Nova rewrites into a capability requirement.
pub const MAXPHYSADDR_BITS_SPEC: &str = "hw:maxphysaddr_bits";
/// What it is rewritten to.
pub const MAXPHYSADDR_BITS_CAPABILITY: &str = "capabilities:cpu_info:maxphysaddr:bits";

/// The `ComputeCapabilitiesFilter` filter.
pub struct ComputeCapabilitiesFilter;

impl Unit for ComputeCapabilitiesFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "ComputeCapabilitiesFilter",
            "Rejects hosts whose capabilities do not satisfy the flavor's `capabilities:` (and \
             unscoped) extra specs, with Nova's operator grammar (Nova's \
             ComputeCapabilitiesFilter).",
        )
        .applies_to([RequestProperty::ExtraSpec(String::new())])
        .per_host()
    }
}

/// The extra specs after Nova's `hw:maxphysaddr_bits` rewrite, in order.
fn effective_specs(specs: &[KeyValue]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = specs
        .iter()
        .filter(|kv| kv.key != MAXPHYSADDR_BITS_SPEC)
        .map(|kv| (kv.key.clone(), kv.value.clone()))
        .collect();
    if let Some(bits) = specs.iter().find(|kv| kv.key == MAXPHYSADDR_BITS_SPEC) {
        let req = format!(">= {}", bits.value);
        match out
            .iter_mut()
            .find(|(k, _)| k == MAXPHYSADDR_BITS_CAPABILITY)
        {
            Some(existing) => existing.1 = req,
            None => out.push((MAXPHYSADDR_BITS_CAPABILITY.to_owned(), req)),
        }
    }
    out
}

/// A host's verdict on one spec.
#[derive(Clone, Debug, PartialEq)]
enum Verdict {
    Pass,
    Mismatch,
    /// The host has nothing at the path.
    Missing,
    /// An unscoped key the host does not have: the spec does not apply.
    Skip,
    Error(MatchError),
}

fn verdict(result: Result<bool, MatchError>) -> Verdict {
    match result {
        Ok(true) => Verdict::Pass,
        Ok(false) => Verdict::Mismatch,
        Err(error) => Verdict::Error(error),
    }
}

/// One spec, prepared for the whole call.
struct Check<'a> {
    key: &'a str,
    req: &'a str,
    requirement: Requirement<'a>,
    source: Source,
    /// Unscoped: only applies to hosts that have the key.
    unscoped: bool,
}

impl Filter for ComputeCapabilitiesFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let specs = effective_specs(&cx.vm().extra_specs);
        let checks: Vec<Check<'_>> = specs
            .iter()
            .filter_map(|(key, req)| {
                let scope: Vec<&str> = key.split(':').collect();
                let (path, unscoped) = match scope.as_slice() {
                    [_] => (scope.as_slice(), true),
                    [SCOPE, rest @ ..] => (rest, false),
                    _ => return None,
                };
                Some(Check {
                    key,
                    req,
                    requirement: Requirement::parse(req),
                    source: Source::of(path),
                    unscoped,
                })
            })
            .collect();
        let mut rejections = Rejections::new();
        if checks.is_empty() {
            return rejections.into_vec();
        }
        let hosts = cx.hosts();
        // Per check: which hosts are still undecided, in candidate order.
        let mut pending: Vec<u32> = candidates.to_vec();
        for check in &checks {
            let mut judge = Judge::new(&hosts, check);
            // Most rejected hosts share one of two reasons per check:
            // written once, not once per host.
            let mismatch = rejections.reason(reason(check, &Verdict::Mismatch));
            let missing = rejections.reason(reason(check, &Verdict::Missing));
            pending.retain(|&host| match judge.judge(host) {
                Verdict::Pass | Verdict::Skip => true,
                Verdict::Mismatch => {
                    rejections.reject_for(host, mismatch);
                    false
                }
                Verdict::Missing => {
                    rejections.reject_for(host, missing);
                    false
                }
                failed @ Verdict::Error(_) => {
                    rejections.reject(host, reason(check, &failed));
                    false
                }
            });
        }
        rejections.into_vec()
    }
}

/// Judges hosts on one check, remembering the verdict per distinct
/// capability text.
struct Judge<'a, 'c> {
    hosts: &'c Hosts<'a>,
    check: &'c Check<'c>,
    path: Option<CapabilityPath<'a>>,
    /// Verdicts by value string id, for capabilities stored under the
    /// whole path.
    flat: Vec<Option<Verdict>>,
    /// Verdicts by value string id, for capabilities walked into.
    walked: Vec<Option<Verdict>>,
    /// Verdicts by numeric value (its bits), the first `NUMERIC_MEMO`
    /// distinct ones.
    numeric: Vec<(u64, Verdict)>,
}

/// Distinct numeric values a check remembers verdicts for: a linear search
/// beats hashing at this size, and free-memory-like attributes, where every
/// host differs, stop being remembered once it is full.
const NUMERIC_MEMO: usize = 16;

impl<'a, 'c> Judge<'a, 'c> {
    fn new(hosts: &'c Hosts<'a>, check: &'c Check<'c>) -> Self {
        let path = match &check.source {
            Source::Capability(path) => Some(CapabilityPath::new(hosts, path)),
            _ => None,
        };
        let strings = if path.is_some() {
            hosts.labels(HostLabels::Capabilities).strings.len()
        } else {
            0
        };
        Judge {
            hosts,
            check,
            path,
            flat: vec![None; strings],
            walked: vec![None; strings],
            numeric: Vec::new(),
        }
    }

    fn judge(&mut self, host: u32) -> Verdict {
        let row = host as usize;
        let requirement = &self.check.requirement;
        match &self.check.source {
            Source::Numeric(attribute) => {
                // A cluster has few distinct values (hypervisor versions,
                // memory sizes): each is matched once.
                let value = attribute.value(self.hosts, row);
                match self
                    .numeric
                    .iter()
                    .find(|(bits, _)| *bits == value.to_bits())
                {
                    Some((_, known)) => known.clone(),
                    None => {
                        let judged = verdict(requirement.matches_number(value));
                        if self.numeric.len() < NUMERIC_MEMO {
                            self.numeric.push((value.to_bits(), judged.clone()));
                        }
                        judged
                    }
                }
            }
            Source::Text(text) => verdict(requirement.matches(self.hosts.texts(*text).get(row))),
            Source::ServiceDisabled => {
                let disabled = service_disabled(self.hosts, row);
                verdict(requirement.matches(if disabled { "True" } else { "False" }))
            }
            Source::Nothing => Verdict::Missing,
            Source::Capability(_) => {
                let Some(path) = &self.path else {
                    return Verdict::Missing;
                };
                match path.find(host) {
                    None if self.check.unscoped => Verdict::Skip,
                    None => Verdict::Missing,
                    Some(Found::Flat(id)) => {
                        let Some(slot) = self.flat.get_mut(id as usize) else {
                            return Verdict::Missing;
                        };
                        slot.get_or_insert_with(|| verdict(requirement.matches(path.text(id))))
                            .clone()
                    }
                    Some(Found::Root(id)) => {
                        let Some(slot) = self.walked.get_mut(id as usize) else {
                            return Verdict::Missing;
                        };
                        slot.get_or_insert_with(|| match path.walk(id) {
                            None => Verdict::Missing,
                            Some(value) => {
                                verdict(requirement.matches(&python::str_of_json(&value)))
                            }
                        })
                        .clone()
                    }
                }
            }
        }
    }
}

/// Why a host failed `check`; one string per spec and kind of failure
/// (errors name the offending value).
fn reason(check: &Check<'_>, verdict: &Verdict) -> String {
    let Check { key, req, .. } = check;
    match verdict {
        Verdict::Missing => format!("has no capability for extra spec `{key}`"),
        Verdict::Error(error) => format!("extra spec `{key}` = `{req}`: {error}"),
        _ => format!("does not satisfy extra spec `{key}` = `{req}`"),
    }
}

sandpiper_guest::export_unit!(ComputeCapabilitiesFilter: filter);
