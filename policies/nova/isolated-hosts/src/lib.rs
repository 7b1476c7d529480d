//! `IsolatedHostsFilter`: keeps isolated images on isolated hosts, and
//! (optionally) isolated hosts for isolated images.
//!
//! Behaviour from Nova's `nova/scheduler/filters/isolated_hosts_filter.py`
//! (reference notes §1.1):
//!
//! | `restrict_isolated_hosts_to_isolated_images` | isolated image | other image |
//! |---|---|---|
//! | true (default), isolated host | passes | fails |
//! | true, other host | fails | passes |
//! | false, isolated host | passes | passes |
//! | false, other host | fails | passes |
//!
//! With no isolated images configured, nothing is an isolated image: an
//! isolated host then fails only when the restriction is on.
//!
//! Data: a host is isolated when it carries the `isolated` host flag or its
//! name is in the `isolated_hosts` parameter (Nova's `[filter_scheduler]
//! isolated_hosts`, host names; a snapshot host without a name is named by
//! its id). The name column is read only when the parameter lists hosts. The image is isolated
//! when its id, the VM's image property `image_id`, is in `isolated_images`;
//! a VM without `image_id` (booted from a volume) uses no isolated image,
//! as in Nova. Lists are comma separated, items stripped.

use sandpiper_guest::collections::HashSet;

use sandpiper_guest::model::Interned;
use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::python;

/// Parameter: hosts reserved for isolated images (names or ids).
pub const ISOLATED_HOSTS: &str = "isolated_hosts";
/// Parameter: image ids that may only run on isolated hosts.
pub const ISOLATED_IMAGES: &str = "isolated_images";
/// Parameter: whether isolated hosts take only isolated images.
pub const RESTRICT: &str = "restrict_isolated_hosts_to_isolated_images";
/// Image property carrying the image's id.
pub const IMAGE_ID_PROPERTY: &str = "image_id";

/// The `IsolatedHostsFilter` filter.
pub struct IsolatedHostsFilter;

impl Unit for IsolatedHostsFilter {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "IsolatedHostsFilter",
            "Keeps the images listed in isolated_images on isolated hosts (the `isolated` flag \
             or isolated_hosts) and, when restrict_isolated_hosts_to_isolated_images is true, \
             other images off them (Nova's IsolatedHostsFilter).",
        )
        .with_param(ParamSpec::new(
            ISOLATED_HOSTS,
            "Names of isolated hosts, comma separated, besides hosts flagged isolated.",
            "",
            "^[^\\n]*$",
        ))
        .with_param(ParamSpec::new(
            ISOLATED_IMAGES,
            "Ids of images that may only run on isolated hosts, comma separated.",
            "",
            "^[^\\n]*$",
        ))
        .with_param(ParamSpec::new(
            RESTRICT,
            "Isolated hosts run only isolated images.",
            "true",
            "^(true|false)$",
        ))
        .per_host()
    }
}

/// An oslo.config list option: comma separated, items stripped, empty
/// items dropped.
fn list(text: &str) -> HashSet<&str> {
    text.split(',')
        .map(python::strip)
        .filter(|item| !item.is_empty())
        .collect()
}

impl Filter for IsolatedHostsFilter {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let params = cx.params();
        let settings = (|| {
            Ok::<_, ParamError>((
                params.str(ISOLATED_HOSTS)?,
                params.str(ISOLATED_IMAGES)?,
                params.bool(RESTRICT)?,
            ))
        })();
        let (isolated_hosts, isolated_images, restrict) = match settings {
            Ok(settings) => settings,
            Err(error) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let isolated_hosts = list(isolated_hosts);
        let isolated_images = list(isolated_images);
        let image_isolated = !isolated_images.is_empty()
            && cx
                .vm()
                .image_properties
                .iter()
                .find(|kv| kv.key == IMAGE_ID_PROPERTY)
                .is_some_and(|kv| isolated_images.contains(kv.value.as_str()));
        // Which host states fail, as Nova's table has it.
        let fails = |host_isolated: bool| {
            if restrict {
                image_isolated != host_isolated
            } else {
                image_isolated && !host_isolated
            }
        };
        let (fails_isolated, fails_other) = (fails(true), fails(false));
        if !fails_isolated && !fails_other {
            return rejections.into_vec();
        }
        let hosts = cx.hosts();
        let flags = hosts.flags(HostFlag::Isolated);
        // Names are only read when the parameter lists hosts; each distinct
        // one is looked up once.
        let listed = (!isolated_hosts.is_empty()).then(|| {
            let names = hosts.texts(HostText::Name);
            let marks: Vec<bool> = names.values().map(|v| isolated_hosts.contains(v)).collect();
            (marks, names)
        });
        let in_list = |(marks, names): &(Vec<bool>, &Interned), row: usize| {
            names
                .indices
                .get(row)
                .and_then(|&i| marks.get(i as usize))
                .copied()
                .unwrap_or(false)
        };
        for &host in candidates {
            let row = host as usize;
            let host_isolated = flags.get(row).copied().unwrap_or(false)
                || listed.as_ref().is_some_and(|listed| in_list(listed, row));
            if host_isolated && fails_isolated {
                rejections.reject(host, "isolated host, image is not isolated");
            } else if !host_isolated && fails_other {
                rejections.reject(host, "image is isolated, host is not");
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(IsolatedHostsFilter: filter);
