//! `AggregateImagePropertiesIsolation`: rejects hosts whose aggregates pin
//! an image property to other values.
//!
//! Behaviour from Nova's
//! `nova/scheduler/filters/aggregate_image_properties_isolation.py`
//! (reference notes §1.1): for each metadata key of the host's aggregates
//! (restricted, when the namespace parameter is set, to keys starting with
//! namespace + separator), when the image has a non-empty property of that
//! name, its value must be one of the key's values (comma split, stripped,
//! union over aggregates). Keys the image does not have constrain nothing.
//!
//! Data: the VM's `image-properties` and the `aggregate-metadata` column;
//! parameters are Nova's (deprecated) namespace and separator options.
//!
//! Where we differ from Nova: Nova only compares keys that are fields of
//! its `ImageMetaProps` (so an aggregate key like `os` never matches a
//! property); our image properties are free-form, so any property the image
//! carries is compared.

use sandpiper_guest::prelude::*;
use sandpiper_nova_ops::aggregates;

/// Parameter: only keys starting with this (plus the separator) count.
pub const NAMESPACE: &str = "aggregate_image_properties_isolation_namespace";
/// Parameter: what separates the namespace from the rest of a key.
pub const SEPARATOR: &str = "aggregate_image_properties_isolation_separator";

/// The `AggregateImagePropertiesIsolation` filter.
pub struct AggregateImagePropertiesIsolation;

impl Unit for AggregateImagePropertiesIsolation {
    fn info() -> UnitInfo {
        UnitInfo::new(
            "AggregateImagePropertiesIsolation",
            "Rejects hosts whose aggregates set metadata for an image property the image has, \
             to values that do not include the image's (Nova's \
             AggregateImagePropertiesIsolation).",
        )
        .with_param(ParamSpec::new(
            NAMESPACE,
            "Only metadata keys in this namespace count; empty for every key (Nova's \
             aggregate_image_properties_isolation_namespace).",
            "",
            "^[^\\n]*$",
        ))
        .with_param(ParamSpec::new(
            SEPARATOR,
            "Separator between the namespace and the rest of a key (Nova's \
             aggregate_image_properties_isolation_separator).",
            ".",
            "^[^\\n]*$",
        ))
        .applies_to([RequestProperty::ImageProperty(String::new())])
        .per_host()
    }
}

impl Filter for AggregateImagePropertiesIsolation {
    fn filter(cx: &Context<'_>, candidates: &[u32]) -> Vec<Rejection> {
        let mut rejections = Rejections::new();
        let params = cx.params();
        let (namespace, separator) = match (params.str(NAMESPACE), params.str(SEPARATOR)) {
            (Ok(n), Ok(s)) => (n, s),
            (Err(error), _) | (_, Err(error)) => {
                rejections.reject_all(candidates, error.to_string());
                return rejections.into_vec();
            }
        };
        let prefix = format!("{namespace}{separator}");
        let props = &cx.vm().image_properties;
        let metadata = cx.hosts().labels(HostLabels::AggregateMetadata);
        // Per key string id: the image's value, when the key counts and the
        // image has a non-empty property of that name (`if prop and ...`).
        let wanted: Vec<Option<&str>> = metadata
            .strings
            .iter()
            .map(|key| {
                if !namespace.is_empty() && !key.starts_with(&prefix) {
                    return None;
                }
                props
                    .iter()
                    .find(|kv| kv.key == *key)
                    .map(|kv| kv.value.as_str())
                    .filter(|value| !value.is_empty())
            })
            .collect();
        if wanted.iter().all(Option::is_none) {
            return rejections.into_vec();
        }
        // Per (key, value text) pair seen: whether the value lists the
        // image's; per host, the keys seen and whether any value matched.
        let mut seen: Vec<(u32, bool)> = Vec::new();
        for &host in candidates {
            seen.clear();
            for (key, value) in metadata.id_pairs(host as usize) {
                let Some(Some(prop)) = wanted.get(key as usize) else {
                    continue;
                };
                let listed =
                    aggregates::split(metadata.string(value)).any(|option| option == *prop);
                match seen.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, ok)) => *ok |= listed,
                    None => seen.push((key, listed)),
                }
            }
            if let Some((key, _)) = seen.iter().find(|(_, ok)| !ok) {
                rejections.reject(
                    host,
                    format!(
                        "its aggregates restrict image property `{}` to other values",
                        metadata.string(*key)
                    ),
                );
            }
        }
        rejections.into_vec()
    }
}

sandpiper_guest::export_unit!(AggregateImagePropertiesIsolation: filter);
