//! Which requests a unit has something to say about (`types.applies-to`,
//! new in WIT 0.2.0), and the one place that decides whether a request has
//! a property ([`RequestProperty::present_in`]).
//!
//! Why: most units of a default policy answer "nothing to say" for most
//! requests (no affinity group, no pinned host, no hint); a unit that
//! declares so is not called for them at all, as kube-scheduler's PreFilter
//! `Skip` does (issue #17).

use crate::{PageSize, Request};

/// A property a request may have. See `types.request-property`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum RequestProperty {
    CurrentHost,
    DedicatedHosts,
    Groups,
    Networks,
    HighlyAvailable,
    HostedEngine,
    /// A scheduler hint with this key.
    Hint(String),
    /// An extra spec whose key starts with this prefix ("" for any).
    ExtraSpec(String),
    /// An image property with this key ("" for any).
    ImageProperty(String),
    NumaTopology,
    CpuPinning,
    PageSize,
    CpuModel,
    CpuFlags,
    PciDevices,
    MdevTypes,
    CompatibilityVersion,
    MachineType,
    TscFrequency,
    /// The unit's parameter with this name is set to something other
    /// than zero (new in WIT 0.3.0).
    Param(String),
}

impl RequestProperty {
    /// Whether `request` has this property.
    pub fn present_in(&self, request: &Request) -> bool {
        let vm = &request.vm;
        let hw = &vm.hardware;
        match self {
            RequestProperty::CurrentHost => vm.current_host.is_some(),
            RequestProperty::DedicatedHosts => !vm.dedicated_hosts.is_empty(),
            RequestProperty::Groups => !vm.groups.is_empty(),
            RequestProperty::Networks => !vm.networks.is_empty(),
            RequestProperty::HighlyAvailable => vm.highly_available,
            RequestProperty::HostedEngine => vm.hosted_engine,
            RequestProperty::Hint(key) => request.hints.iter().any(|kv| kv.key == *key),
            RequestProperty::ExtraSpec(prefix) => {
                vm.extra_specs.iter().any(|kv| kv.key.starts_with(prefix))
            }
            RequestProperty::ImageProperty(key) => vm
                .image_properties
                .iter()
                .any(|kv| key.is_empty() || kv.key == *key),
            RequestProperty::NumaTopology => !hw.numa_cells.is_empty(),
            RequestProperty::CpuPinning => hw.cpu_policy != crate::CpuPolicy::Shared,
            RequestProperty::PageSize => hw.page_size != PageSize::Unspecified,
            RequestProperty::CpuModel => !hw.cpu_model.is_empty(),
            RequestProperty::CpuFlags => {
                !hw.required_cpu_flags.is_empty() || !hw.forbidden_cpu_flags.is_empty()
            }
            RequestProperty::PciDevices => !hw.pci_requests.is_empty(),
            RequestProperty::MdevTypes => !hw.mdev_types.is_empty(),
            RequestProperty::CompatibilityVersion => !hw.compatibility_version.is_empty(),
            RequestProperty::MachineType => !hw.machine_type.is_empty(),
            RequestProperty::TscFrequency => hw.keeps_tsc_frequency,
            RequestProperty::Param(name) => request
                .params
                .iter()
                .find(|kv| kv.key == *name)
                .is_some_and(|kv| !is_zero(&kv.value)),
        }
    }

    /// A short name for explain records: the WIT case, with its key.
    pub fn describe(&self) -> String {
        let (case, key) = match self {
            RequestProperty::CurrentHost => ("current-host", None),
            RequestProperty::DedicatedHosts => ("dedicated-hosts", None),
            RequestProperty::Groups => ("groups", None),
            RequestProperty::Networks => ("networks", None),
            RequestProperty::HighlyAvailable => ("highly-available", None),
            RequestProperty::HostedEngine => ("hosted-engine", None),
            RequestProperty::Hint(key) => ("hint", Some(key)),
            RequestProperty::ExtraSpec(prefix) => ("extra-spec", Some(prefix)),
            RequestProperty::ImageProperty(key) => ("image-property", Some(key)),
            RequestProperty::NumaTopology => ("numa-topology", None),
            RequestProperty::CpuPinning => ("cpu-pinning", None),
            RequestProperty::PageSize => ("page-size", None),
            RequestProperty::CpuModel => ("cpu-model", None),
            RequestProperty::CpuFlags => ("cpu-flags", None),
            RequestProperty::PciDevices => ("pci-devices", None),
            RequestProperty::MdevTypes => ("mdev-types", None),
            RequestProperty::CompatibilityVersion => ("compatibility-version", None),
            RequestProperty::MachineType => ("machine-type", None),
            RequestProperty::TscFrequency => ("tsc-frequency", None),
            RequestProperty::Param(name) => ("param", Some(name)),
        };
        match key {
            Some(key) => format!("{case}({key:?})"),
            None => case.to_owned(),
        }
    }
}

/// A parameter's value that means "nothing to do": empty, or a number
/// equal to 0 (`0`, `0.0`, ` 0 `). Anything else, `abc` included, is
/// present, so a unit given a bad value still runs and reports it.
fn is_zero(value: &str) -> bool {
    let value = value.trim();
    value.is_empty() || value.parse::<f64>() == Ok(0.0)
}

/// Which requests a unit has something to say about. See `types.applies-to`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum AppliesTo {
    /// Every request: the unit always runs.
    #[default]
    EveryRequest,
    /// Only requests with at least one of these properties; never empty
    /// (the host refuses a unit declaring an empty list).
    RequestsWith(Vec<RequestProperty>),
}

impl AppliesTo {
    /// Whether the unit has something to say about `request`.
    pub fn applies(&self, request: &Request) -> bool {
        match self {
            AppliesTo::EveryRequest => true,
            AppliesTo::RequestsWith(properties) => properties.iter().any(|p| p.present_in(request)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KeyValue, Vm, VmGroup};

    #[test]
    fn a_request_has_a_property_exactly_when_its_field_is_set() {
        let mut request = Request::default();
        let groups = AppliesTo::RequestsWith(vec![RequestProperty::Groups]);
        assert!(!groups.applies(&request));
        assert!(AppliesTo::EveryRequest.applies(&request));
        request.vm = Vm {
            groups: vec![VmGroup::default()],
            ..Vm::default()
        };
        assert!(groups.applies(&request));

        let hint = RequestProperty::Hint("same_host".to_owned());
        assert!(!hint.present_in(&request));
        request.hints.push(KeyValue::new("same_host", "x"));
        assert!(hint.present_in(&request));

        let scoped = RequestProperty::ExtraSpec("capabilities:".to_owned());
        let any = RequestProperty::ExtraSpec(String::new());
        request
            .vm
            .extra_specs
            .push(KeyValue::new("hw:cpu_policy", "x"));
        assert!(!scoped.present_in(&request));
        assert!(any.present_in(&request));

        assert!(!RequestProperty::NumaTopology.present_in(&request));
        request.vm.hardware.page_size = PageSize::Kib(2048);
        assert!(RequestProperty::PageSize.present_in(&request));
        assert_eq!(
            RequestProperty::Hint("same_host".to_owned()).describe(),
            "hint(\"same_host\")"
        );
    }

    #[test]
    fn a_param_is_present_unless_missing_empty_or_zero() {
        let spares = RequestProperty::Param("HeSparesCount".to_owned());
        let with = |value: &str| Request {
            params: vec![KeyValue::new("HeSparesCount", value)],
            ..Request::default()
        };
        assert!(!spares.present_in(&Request::default()));
        for zero in ["", " ", "0", "0.0", " 0 ", "-0"] {
            assert!(!spares.present_in(&with(zero)), "{zero:?}");
        }
        for set in ["1", "0.5", "abc", "NaN"] {
            assert!(spares.present_in(&with(set)), "{set:?}");
        }
        assert_eq!(spares.describe(), "param(\"HeSparesCount\")");
    }
}
