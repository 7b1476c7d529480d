//! Small JSON shapes shared by several resources: oVirt's `property`
//! (name/value) and references to other resources. (The error body lives
//! with the error, in `error.rs`.)

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::pipeline::ParamValues;

/// A parameter value (oVirt's `property`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Property {
    /// The parameter's key, as a unit declares it (e.g. `HighUtilization`).
    pub name: String,
    /// Must match the pattern of every unit of the policy that declares the key.
    pub value: String,
}

/// Turns a list of properties into values by key; a key given twice is an
/// error naming it.
pub fn properties_to_values(
    properties: Vec<Property>,
    field: &str,
) -> Result<ParamValues, super::error::ApiError> {
    let mut values = ParamValues::new();
    for p in properties {
        if values.contains_key(&p.name) {
            return Err(super::error::ApiError::InvalidValue {
                field: field.to_owned(),
                message: format!("parameter `{}` is given twice", p.name),
            });
        }
        values.insert(p.name, p.value);
    }
    Ok(values)
}

pub fn values_to_properties(values: &ParamValues) -> Vec<Property> {
    values
        .iter()
        .map(|(name, value)| Property {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

/// A reference to another resource by id, as a request names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IdRef {
    pub id: Uuid,
}

/// A reference to another resource as a response shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct NamedRef {
    pub id: Uuid,
    pub name: String,
    /// Where the resource lives.
    pub href: String,
}

/// Checks a resource name by the one name policy (`crate::names`),
/// naming `field` when it is refused.
pub fn check_name(field: &str, name: &str) -> Result<(), super::error::ApiError> {
    crate::names::check_name(name).map_err(|e| match e {
        crate::names::NameError::NotNfc => super::error::ApiError::not_nfc(field, &e.to_string()),
        _ => super::error::ApiError::InvalidValue {
            field: field.to_owned(),
            message: e.to_string(),
        },
    })
}

/// Longest name of a unit, policy, cluster or token; see `crate::names`.
pub use crate::names::MAX_NAME_CHARS;
