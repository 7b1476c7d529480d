//! What a request asks to place: its instance ids, checked, and the held
//! rows it may go to.

use std::collections::HashSet;

use super::PlaceError;
use crate::inputs::MAX_INSTANCES_PER_REQUEST;
use crate::placement::columns::Columns;
use crate::placement::request::PlaceRequest;

/// The instance ids of a request, checked.
pub(super) fn instance_ids(request: &PlaceRequest) -> Result<Vec<String>, PlaceError> {
    let count = request.count;
    if count == 0 || count > MAX_INSTANCES_PER_REQUEST {
        return Err(PlaceError::BadRequest(format!(
            "count {count} is outside 1 to {MAX_INSTANCES_PER_REQUEST} instances per request"
        )));
    }
    let ids: Vec<String> = if !request.instance_ids.is_empty() {
        if request.instance_ids.len() != count as usize {
            return Err(PlaceError::Instances {
                field: "instance_ids",
                message: format!(
                    "{} instance ids for count {count}",
                    request.instance_ids.len()
                ),
            });
        }
        request.instance_ids.clone()
    } else if count == 1 {
        vec![request.vm.id.clone()]
    } else {
        (0..count)
            .map(|i| format!("{}-{i}", request.vm.id))
            .collect()
    };
    let mut seen = HashSet::new();
    for id in &ids {
        let field = if request.instance_ids.is_empty() {
            "vm.id"
        } else {
            "instance_ids"
        };
        if id.is_empty() {
            return Err(PlaceError::Instances {
                field,
                message: "a VM to place needs an id: its claim is keyed by it".to_owned(),
            });
        }
        if !seen.insert(id.as_str()) {
            return Err(PlaceError::Instances {
                field,
                message: format!("instance id `{id}` is given twice"),
            });
        }
    }
    Ok(ids)
}

/// The candidate rows: the whitelist (or every host) minus the blacklist.
pub(super) fn candidate_rows(
    columns: &Columns,
    request: &PlaceRequest,
) -> Result<Option<Vec<u32>>, PlaceError> {
    let hosts = columns.hosts();
    let excluded: HashSet<u32> = request
        .exclude
        .iter()
        .filter_map(|id| hosts.index(id))
        .collect();
    let listed = match &request.candidates {
        Some(ids) => Some(hosts.resolve_all(ids, "candidates")?),
        None if excluded.is_empty() => None,
        None => Some((0..columns.host_count() as u32).collect()),
    };
    Ok(listed.map(|rows| {
        let mut seen = HashSet::new();
        rows.into_iter()
            .filter(|h| !excluded.contains(h) && seen.insert(*h))
            .collect()
    }))
}
