//! `subcontract trace FILE`: a JSON Lines trace rendered as a run tree.

use std::path::PathBuf;

use super::{emit, OK, USAGE};

/// Arguments of `trace`.
#[derive(clap::Args)]
pub struct TraceArgs {
    /// The trace file.
    file: PathBuf,
}

/// Runs `trace`; returns the exit code.
pub fn main(args: &TraceArgs) -> u8 {
    let file = &args.file;
    match subcontract::events::read_jsonl(file) {
        Ok(events) => {
            let tree = subcontract::events::tree::build_tree(&events);
            if tree.is_empty() {
                eprintln!("error: {}: no events", file.display());
                return USAGE;
            }
            emit(&subcontract::events::tree::render_tree(&tree));
            OK
        }
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            USAGE
        }
    }
}
