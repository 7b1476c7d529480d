//! Sandpiper's guest SDK: write a policy unit as ordinary Rust, export it as
//! a WebAssembly component with one macro.

pub mod inventory;
pub mod model;

pub use inventory::Inventory;
