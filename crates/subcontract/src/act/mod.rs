//! Sub-agents that act: commands run in a run's working copy.

pub mod sandbox;
