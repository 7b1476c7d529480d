//! Every integration test, in one binary (one link, one set of guests): a
//! module per area.

mod languages;
mod placement_model;
mod sandbox;
