//! For the placement tests: the store's fixture, a real store on each
//! backend holding one cluster, as the placement state's rows refer to it.

pub use crate::store::test_support::{TestDb, backends, store_with_cluster};
