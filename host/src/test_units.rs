//! The built-in units compiled natively from their own source, for the
//! library's unit tests (placement, service): through `sandpiper-builtins`'
//! one list, so no test names a unit crate in a manifest.

use std::sync::Arc;

use crate::unit::Unit;

/// The built-in unit of `package` (e.g. `sandpiper-policy-memory`), native.
pub fn native(package: &str) -> Arc<dyn Unit> {
    let unit = sandpiper_builtins::unit(package)
        .unwrap_or_else(|| panic!("`{package}` is not a built-in unit"));
    Arc::new(unit.native())
}
