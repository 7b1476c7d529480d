//! Compiles guest crates to components from a build script.
