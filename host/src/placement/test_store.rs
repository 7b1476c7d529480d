//! For the placement tests: the store's fixture, a real SQLite store
//! holding one cluster, as the placement state's rows refer to it.

pub use crate::store::test_support::store_with_cluster;
