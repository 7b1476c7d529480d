//! What a command prints: a table (or a list of fields) for people, the
//! API's own JSON for scripts (`-o json`).

use serde_json::Value;

/// How a command prints its answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns, for people.
    #[default]
    Table,
    /// The API's answer as it came, pretty-printed, for scripts.
    Json,
}

/// A table: a header and rows of cells, printed with columns aligned.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, every column as wide as its widest cell, two
    /// spaces apart, no trailing spaces.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
            let mut out = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                out.push_str(cell);
                let width = widths.get(i).copied().unwrap_or(0);
                out.extend(std::iter::repeat_n(
                    ' ',
                    width.saturating_sub(cell.chars().count()),
                ));
            }
            out.trim_end().to_owned() + "\n"
        };
        let mut out = line(&mut self.header.iter().map(String::as_str));
        for row in &self.rows {
            out.push_str(&line(&mut row.iter().map(String::as_str)));
        }
        out
    }
}

/// `name: value` lines, names aligned.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}

/// A JSON value as a table cell: strings bare, `null` as `-`.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Prints `value` as JSON, or `human` as it is.
pub fn print(format: Format, value: &Value, human: impl FnOnce() -> String) {
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
        ),
        Format::Table => print!("{}", human()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut t = Table::new(["NAME", "ROLES"]);
        t.row(vec!["Memory".to_owned(), "filter".to_owned()]);
        t.row(vec!["Cpu".to_owned(), "filter,score".to_owned()]);
        assert_eq!(
            t.render(),
            "NAME    ROLES\nMemory  filter\nCpu     filter,score\n"
        );
    }
}
