//! Scheduler hints as Nova's `RequestSpec.get_scheduler_hint` returns them.
//!
//! Nova stores every hint as a list and hands a filter the single element
//! of a one-element list, the whole list otherwise. Our requests carry a
//! list-valued hint as its key repeated, so [`Hint::of`] rebuilds Nova's
//! view: absent, one value, or several.

use sandpiper_guest::model::KeyValue;

/// One hint's value, as a Nova filter sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint<'a> {
    /// The request does not carry the hint.
    Absent,
    /// Exactly one value.
    One(&'a str),
    /// Two or more values, in request order.
    Many(Vec<&'a str>),
}

impl<'a> Hint<'a> {
    /// The hint `key` of `hints`.
    pub fn of(hints: &'a [KeyValue], key: &str) -> Self {
        let mut values = hints
            .iter()
            .filter(|kv| kv.key == key)
            .map(|kv| kv.value.as_str());
        match (values.next(), values.next()) {
            (None, _) => Hint::Absent,
            (Some(one), None) => Hint::One(one),
            (Some(first), Some(second)) => {
                let mut all = vec![first, second];
                all.extend(values);
                Hint::Many(all)
            }
        }
    }

    /// Python's truthiness of the value: false when absent or one empty
    /// string (Nova's `if hint:` then skips the filter).
    pub fn is_set(&self) -> bool {
        match self {
            Hint::Absent => false,
            Hint::One(value) => !value.is_empty(),
            Hint::Many(_) => true,
        }
    }

    /// Every value (none when absent).
    pub fn values(&self) -> Vec<&'a str> {
        match self {
            Hint::Absent => Vec::new(),
            Hint::One(value) => vec![value],
            Hint::Many(values) => values.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_is_unwrapped_and_several_stay_a_list() {
        let hints = [
            KeyValue::new("same_host", "a"),
            KeyValue::new("query", "[]"),
            KeyValue::new("same_host", "b"),
        ];
        assert_eq!(Hint::of(&hints, "query"), Hint::One("[]"));
        assert_eq!(Hint::of(&hints, "same_host"), Hint::Many(vec!["a", "b"]));
        assert_eq!(Hint::of(&hints, "cidr"), Hint::Absent);
        assert!(!Hint::One("").is_set());
    }
}
