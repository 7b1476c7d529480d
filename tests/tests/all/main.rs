//! Every integration test, in one binary (one link, one set of guests): a
//! module per area.

mod default_policies;
mod languages;
mod pipeline;
mod placement_model;
mod reuse;
mod sandbox;
mod unit_cases;
mod units_doc;
mod versions;
