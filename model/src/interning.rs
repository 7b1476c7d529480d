//! Interned columns built one row at a time: [`Interner`] for an
//! [`Interned`] text column, [`LabelsBuilder`] for a [`Labels`] column.
//!
//! Why row by row: a 10,000-host body is read one host at a time and each
//! host is dropped as soon as its columns have it (the host's
//! `inputs::CheckedHosts`), so the rows are never all at hand at once. The
//! `from_rows` constructors are these builders fed from an iterator.
//!
//! Why these tables: each distinct string is kept once, in the column
//! itself, and the table holds only its position (hashbrown's
//! `HashTable`), so interning allocates nothing per string. The hasher is
//! foldhash's, seeded per table: SipHash over 10,000 host ids, 30,000 VM
//! ids and each host's capability texts was a tenth of an inline
//! decision's time (docs/performance.md, "Inline hosts read one at a
//! time").

use core::hash::BuildHasher;

use hashbrown::HashTable;

use crate::{Interned, Labels};

/// Where each distinct string of a column is, found by hashing the string:
/// the table holds only positions, and the strings stay in the column.
#[derive(Clone, Default)]
struct Positions {
    table: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

impl Positions {
    /// The position of `text` among the values of `store` (`value` reads
    /// one), or the position `add` gives it; and whether it was new.
    fn find_or_add<S>(
        &mut self,
        store: &mut S,
        text: &str,
        value: impl Fn(&S, u32) -> &str,
        add: impl FnOnce(&mut S, &str) -> u32,
    ) -> (u32, bool) {
        let hash = self.hasher.hash_one(text);
        if let Some(&i) = self.table.find(hash, |&i| value(store, i) == text) {
            return (i, false);
        }
        let i = add(store, text);
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, i, |&j| hasher.hash_one(value(store, j)));
        (i, true)
    }
}

/// Builds an [`Interned`] column row by row.
#[derive(Clone, Default)]
pub struct Interner {
    column: Interned,
    positions: Positions,
}

impl Interner {
    /// A builder with room for `rows` rows (and as many distinct values).
    pub fn with_capacity(rows: usize) -> Interner {
        let mut interner = Interner::default();
        interner.column.indices.reserve(rows);
        interner.positions.table.reserve(rows, |_| 0);
        interner
    }

    /// Appends a row whose string is `row`; whether that string was new
    /// (not among the values yet).
    pub fn push(&mut self, row: &str) -> bool {
        // The same string as the row before (a VM's host among the VMs
        // listed by host, a text no host sends) is known without hashing.
        if let Some(&last) = self.column.indices.last()
            && self.column.value(last as usize) == row
        {
            self.column.indices.push(last);
            return false;
        }
        let (position, new) = self.positions.find_or_add(
            &mut self.column,
            row,
            |column, i| column.value(i as usize),
            Interned::push_value,
        );
        self.column.indices.push(position);
        new
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.column.indices.len()
    }

    /// Row `row`'s string (empty when out of range).
    pub fn get(&self, row: usize) -> &str {
        self.column.get(row)
    }

    /// Whether no row was pushed.
    pub fn is_empty(&self) -> bool {
        self.column.indices.is_empty()
    }

    /// The column.
    pub fn finish(self) -> Interned {
        self.column
    }
}

/// Builds a [`Labels`] column row by row.
#[derive(Clone)]
pub struct LabelsBuilder {
    column: Labels,
    /// Keys and values share one table of strings, `column.strings`.
    positions: Positions,
}

impl Default for LabelsBuilder {
    fn default() -> Self {
        LabelsBuilder {
            column: Labels {
                offsets: vec![0],
                ..Labels::default()
            },
            positions: Positions::default(),
        }
    }
}

impl LabelsBuilder {
    /// Appends a row of `pairs`.
    pub fn push_row<K: AsRef<str>, V: AsRef<str>>(
        &mut self,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) {
        for (key, value) in pairs {
            let key = self.intern(key.as_ref());
            let value = self.intern(value.as_ref());
            self.push_pair(key, value);
        }
        self.end_row();
    }

    /// Appends a pair of strings given by their positions
    /// ([`LabelsBuilder::intern`]) to the row being built: for a caller
    /// that knows which of its strings repeat (a dictionary-encoded
    /// column) and interns each once.
    pub fn push_pair(&mut self, key: u32, value: u32) {
        self.column.keys.push(key);
        self.column.values.push(value);
    }

    /// Ends the row being built by [`LabelsBuilder::push_pair`].
    pub fn end_row(&mut self) {
        self.column.offsets.push(self.column.keys.len() as u32);
    }

    /// The position of `text` among the column's strings, added when new.
    pub fn intern(&mut self, text: &str) -> u32 {
        let (position, _) = self.positions.find_or_add(
            &mut self.column.strings,
            text,
            |strings, i| &strings[i as usize],
            |strings, text| {
                strings.push(text.to_owned());
                strings.len() as u32 - 1
            },
        );
        position
    }

    /// The column.
    pub fn finish(self) -> Labels {
        self.column
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each distinct string is kept once, in first-seen order, and every
    /// row reads back its own string, past the tables' growth (the
    /// builders start small and rehash by their positions' strings).
    #[test]
    fn rows_read_back_and_values_are_kept_once() {
        let rows: Vec<String> = (0..5_000).map(|i| format!("v{}", i % 1_700)).collect();
        for column in [Interned::from_rows(&rows), {
            let mut interner = Interner::default();
            let new = rows.iter().filter(|row| interner.push(row)).count();
            assert_eq!(new, 1_700);
            interner.finish()
        }] {
            assert_eq!(column.value_count(), 1_700);
            assert!(column.values().eq((0..1_700).map(|i| format!("v{i}"))));
            assert!((0..rows.len()).all(|row| column.get(row) == rows[row]));
        }

        let pairs = |i: usize| {
            [
                (format!("k{}", i % 3), format!("v{}", i % 900)),
                ("".to_owned(), format!("k{}", i % 3)),
            ]
        };
        let labels = Labels::from_rows((0..2_000).map(pairs));
        assert_eq!(labels.rows(), 2_000);
        // Keys and values share one table: k0..k2, v0..v899 and "".
        assert_eq!(labels.strings.len(), 3 + 900 + 1);
        for i in 0..2_000 {
            let want = pairs(i);
            assert!(
                labels
                    .row(i)
                    .eq(want.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
                "row {i}"
            );
        }
    }
}
