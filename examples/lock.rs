//! The contracts of specs declared in Rust, printed as a lock file, so CI can diff them like
//! TOML specs: commit the output, then `subcontract check specs/ --against contracts.lock.json`
//! (or `subcontract diff contracts.lock.json new.lock.json`) fails a breaking change.
//!
//! Run: `cargo run --example lock > contracts.lock.json`
//! (`subcontract lock specs/ rust.lock.json` merges TOML specs and this output into one file.)

use serde_json::json;
use subcontract::SubAgentSpec;

/// A spec declared with JSON Schemas (typed specs, `SubAgentSpec::builder`, lock the same way).
fn answer_question() -> SubAgentSpec<serde_json::Value, serde_json::Value> {
    SubAgentSpec::dynamic(
        "answer_question",
        json!({"type": "object", "required": ["question"], "additionalProperties": false,
               "properties": {"question": {"type": "string", "minLength": 5, "maxLength": 300}}}),
        json!({"type": "object", "required": ["answer"], "additionalProperties": false,
               "properties": {"answer": {"type": "string", "maxLength": 400}}}),
    )
    .description("Answer one question about this workspace.")
    .system("Answer briefly from the files; say when you do not know.")
    .tools(["grep", "read_file"])
    .build()
    .expect("a valid spec")
}

/// Another.
fn summarise() -> SubAgentSpec<serde_json::Value, serde_json::Value> {
    SubAgentSpec::dynamic(
        "summarise",
        json!({"type": "object", "required": ["text"], "additionalProperties": false,
               "properties": {"text": {"type": "string", "maxLength": 20000}}}),
        json!({"type": "string", "maxLength": 400}),
    )
    .description("Summarise one text in at most 400 characters.")
    .system("Summarise faithfully.")
    .build()
    .expect("a valid spec")
}

fn main() {
    let lock = subcontract::registry![answer_question(), summarise()];
    print!("{}", lock.to_json());
}
