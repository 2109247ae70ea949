//! Times `check_paths` over 1,000 generated, realistic spec files.
//!
//! ```text
//! cargo run --release --example check_bench
//! ```

use std::path::PathBuf;
use std::time::Instant;

use subcontract::check::{check_paths, CheckOptions};

const SPECS: usize = 1_000;

/// One realistic spec: a researcher-like contract with nested arrays of objects, limits,
/// examples, and calls to built-in tools and (for some) to another spec of the set.
fn spec(i: usize) -> String {
    let calls = if i.is_multiple_of(10) && i + 1 < SPECS {
        format!(", \"agent_{:04}\"", i + 1)
    } else {
        String::new()
    };
    format!(
        r#"name = "agent_{i:04}"
description = "Investigate topic {i} across the workspace and return findings with sources. Not for one lookup."
system = """
You are a focused researcher for area {i}. Read only what you need, cite every claim, and stop
when the question is answered or the budget is nearly spent.
"""
tools = ["read_file", "grep", "list_dir"{calls}]
model = "openai:gpt-4.1-mini"

[limits]
max_turns = 8
max_cost_usd = "0.20"
timeout_secs = 120
max_output_chars = 5000

[input]
type = "object"
required = ["question"]
additionalProperties = false
properties.question = {{ type = "string", minLength = 10, maxLength = 500 }}
properties.paths = {{ type = "array", maxItems = 20, items = {{ type = "string", maxLength = 200 }} }}

[output]
type = "object"
required = ["findings", "gaps"]
additionalProperties = false
properties.gaps = {{ type = "array", maxItems = 3, items = {{ type = "string", maxLength = 200 }} }}
properties.confidence = {{ enum = ["low", "medium", "high"] }}
[output.properties.findings]
type = "array"
maxItems = 6
items = {{ type = "object", additionalProperties = false, required = ["claim", "source_ids"], properties = {{ claim = {{ type = "string", maxLength = 300 }}, source_ids = {{ type = "array", minItems = 1, maxItems = 5, items = {{ type = "string", maxLength = 64 }} }} }} }}

[[examples]]
input = {{ question = "Which authentication library does module {i} use?" }}
output = {{ findings = [{{ claim = "It uses argon2 for password hashing.", source_ids = ["Cargo.toml"] }}], gaps = [], confidence = "high" }}

[[examples]]
name = "nothing found"
input = {{ question = "Where is the billing code for area {i}?", paths = ["src/"] }}
output = {{ findings = [], gaps = ["No billing code under src/."] }}
"#
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    for i in 0..SPECS {
        std::fs::write(dir.path().join(format!("agent_{i:04}.toml")), spec(i))?;
    }
    let paths: Vec<PathBuf> = vec![dir.path().to_path_buf()];
    let opts = CheckOptions::default();
    // One warm-up run (page cache, allocator), then the measured runs.
    let warm = check_paths(&paths, &opts)?;
    assert!(
        warm.diagnostics.is_empty(),
        "generated specs must be clean: {:?}",
        warm.diagnostics.first()
    );
    let runs = 5;
    let mut best = f64::MAX;
    let mut total = 0.0;
    for _ in 0..runs {
        let start = Instant::now();
        let report = check_paths(&paths, &opts)?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        assert_eq!(report.specs_checked, SPECS);
        best = best.min(ms);
        total += ms;
    }
    let mean = total / runs as f64;
    println!(
        "files: {SPECS}; total: {mean:.1} ms mean of {runs} runs (best {best:.1} ms); {:.0} µs per spec",
        mean * 1e3 / SPECS as f64
    );
    Ok(())
}
