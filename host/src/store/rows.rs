//! Rows read into plain structs, one field per column of the same name.
//!
//! What `#[derive(sqlx::FromRow)]` does for such structs, without sqlx's
//! `derive` feature: that feature turns on sqlx's proc-macro crate, with
//! which cargo compiles sqlx's SQLite and PostgreSQL drivers (SQLite's C
//! source included) a second time on every clean build (see `build.rs`).

/// Declares a struct whose fields are read from the columns named like
/// them, and its `sqlx::FromRow` for the `any` driver's rows.
macro_rules! row_struct {
    (
        $(#[$meta:meta])*
        struct $name:ident {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        struct $name {
            $($(#[$field_meta])* $field: $ty),*
        }

        impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for $name {
            fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
                use sqlx::Row as _;
                Ok($name {
                    $($field: row.try_get(stringify!($field))?),*
                })
            }
        }
    };
}

pub(crate) use row_struct;
