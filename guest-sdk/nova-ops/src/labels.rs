//! Reading a key/value host column ([`Labels`]) by string id, so a unit
//! compares `u32`s per host instead of strings.
//!
//! A labels column interns every key and value once in `strings`; looking a
//! key up once per call and then comparing ids keeps a loop over ten
//! thousand hosts free of string comparisons and allocations, and lets units
//! remember a verdict per distinct value.

use sandpiper_guest::model::Labels;

/// The id of `text` in the column's string table, if any host uses it.
pub fn find(labels: &Labels, text: &str) -> Option<u32> {
    labels
        .strings
        .iter()
        .position(|s| s == text)
        .and_then(|i| u32::try_from(i).ok())
}

/// The string with id `id` ("" for an id outside the table).
pub fn text(labels: &Labels, id: u32) -> &str {
    labels.strings.get(id as usize).map_or("", String::as_str)
}

/// Host `row`'s (key id, value id) pairs; none when the row is out of range
/// or malformed, as [`Labels::row`] does.
#[inline]
pub fn pairs(labels: &Labels, row: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let row = row as usize;
    let start = labels.offsets.get(row).copied().unwrap_or(0) as usize;
    let end = labels.offsets.get(row + 1).copied().unwrap_or(0) as usize;
    // The row's two slices, cut once: the loop over them then reads no
    // field of `labels` per pair (in the sandbox it did, through memory).
    let (keys, values) = match (labels.keys.get(start..end), labels.values.get(start..end)) {
        (Some(keys), Some(values)) => (keys, values),
        _ => (&[][..], &[][..]),
    };
    keys.iter().copied().zip(values.iter().copied())
}

/// The value ids host `row` has for key id `key`, in order.
#[inline]
pub fn values_of(labels: &Labels, row: u32, key: u32) -> impl Iterator<Item = u32> + '_ {
    pairs(labels, row).filter_map(move |(k, v)| (k == key).then_some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rows_by_id() {
        let labels = Labels::from_rows([vec![("k", "1"), ("x", "y"), ("k", "2")], vec![]]);
        let k = find(&labels, "k").unwrap();
        let values: Vec<&str> = values_of(&labels, 0, k).map(|v| text(&labels, v)).collect();
        assert_eq!(values, ["1", "2"]);
        assert_eq!(values_of(&labels, 1, k).count(), 0);
        assert_eq!(pairs(&labels, 9).count(), 0);
        assert_eq!(find(&labels, "nope"), None);
    }
}
