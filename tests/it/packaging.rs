//! The library is a package of its own whose default features are what a library user needs:
//! depending on `subcontract` compiles no argument parser, log subscriber, OTLP exporter or MCP
//! SDK. Read from cargo's own resolution of the workspace (its lock file, offline).

use std::collections::BTreeSet;
use std::process::Command;

/// The crates a package's normal dependencies resolve to, with `features`.
fn resolved(package: &str, features: &[&str]) -> BTreeSet<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut c = Command::new(env!("CARGO"));
    c.args([
        "tree",
        "--offline",
        "--locked",
        "-e",
        "normal",
        "--prefix",
        "none",
    ])
    .args([
        "--manifest-path",
        &format!("{root}/Cargo.toml"),
        "-p",
        package,
    ]);
    if !features.is_empty() {
        c.args(["--features", &features.join(",")]);
    }
    let o = c.output().expect("cargo runs");
    assert!(
        o.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

const CLI_ONLY: [&str; 7] = [
    "clap",
    "tracing-subscriber",
    "rmcp",
    "opentelemetry",
    "opentelemetry_sdk",
    "opentelemetry-otlp",
    "tracing-opentelemetry",
];

#[test]
fn the_library_alone_builds_none_of_the_command_lines_crates() {
    let lib = resolved("subcontract", &[]);
    assert!(lib.contains("subcontract"), "{lib:?}");
    assert!(
        lib.contains("reqwest") && lib.contains("jsonschema"),
        "{lib:?}"
    );
    let found: Vec<&str> = CLI_ONLY.into_iter().filter(|c| lib.contains(*c)).collect();
    assert!(
        found.is_empty(),
        "the library's default build compiles {found:?}"
    );
    // The check sees them where they are: the command line has every one.
    let cli = resolved("subcontract-cli", &[]);
    for c in CLI_ONLY {
        assert!(
            cli.contains(c),
            "{c} missing from the command line: {cli:?}"
        );
    }
    // A feature brings in what it names, and only that.
    let with_client = resolved("subcontract", &["mcp-client"]);
    assert!(with_client.contains("rmcp"));
    assert!(!with_client.contains("clap"));
}
