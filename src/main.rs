//! The `subcontract` command line.
fn main() {}
