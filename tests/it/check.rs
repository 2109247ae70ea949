//! `subcontract check` and `subcontract schema`, run as the real binary over fixture sets.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_subcontract");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/check")
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(fixtures())
        .output()
        .expect("the subcontract binary runs")
}

/// (code, file, line) of every diagnostic, from `--format json`.
fn diags(set: &str, extra: &[&str]) -> (i32, Vec<(String, String, u64)>) {
    let mut args = vec!["check", set, "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json output parses");
    let list = v
        .as_array()
        .expect("an array")
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default().to_string(),
                d["file"].as_str().unwrap_or_default().to_string(),
                d["line"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    (out.status.code().unwrap_or(-1), list)
}

fn d(code: &str, file: &str, line: u64) -> (String, String, u64) {
    (code.to_string(), file.to_string(), line)
}

#[test]
fn clean_set_passes() {
    let out = run(&["check", "clean"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim(), "0 errors, 0 warnings in 2 specs");
}

/// (code, file, line) expected from one fixture set.
type Expected = (&'static str, &'static str, u64);

#[test]
fn one_broken_set_per_code() {
    let cases: &[(&str, &[Expected])] = &[
        ("unknown_key", &[("unknown-key", "unknown_key/s.toml", 7)]),
        (
            "duplicate_name",
            &[
                ("duplicate-name", "duplicate_name/one.toml", 1),
                ("duplicate-name", "duplicate_name/two.toml", 1),
            ],
        ),
        (
            "call_cycle",
            &[
                ("call-cycle", "call_cycle/a.toml", 4),
                ("call-cycle", "call_cycle/b.toml", 4),
            ],
        ),
        ("too_deep", &[("too-deep", "too_deep/a.toml", 4)]),
        (
            "tool_not_held",
            &[("tool-not-held", "tool_not_held/caller.toml", 4)],
        ),
        (
            "unknown_tool",
            &[("unknown-tool", "unknown_tool/s.toml", 4)],
        ),
        (
            "output_too_large",
            &[("output-too-large", "output_too_large/s.toml", 8)],
        ),
        (
            "example_invalid",
            &[("example-invalid", "example_invalid/s.toml", 22)],
        ),
        (
            "unbounded_string",
            &[("unbounded-string", "unbounded_string/s.toml", 18)],
        ),
        (
            "unbounded_array",
            &[("unbounded-array", "unbounded_array/s.toml", 19)],
        ),
        ("open_object", &[("open-object", "open_object/s.toml", 14)]),
        (
            "recursive_ref",
            &[("recursive-ref", "recursive_ref/s.toml", 20)],
        ),
        (
            "bad_limits",
            &[
                ("bad-limits", "bad_limits/s.toml", 7),
                ("bad-limits", "bad_limits/s.toml", 8),
                ("bad-limits", "bad_limits/s.toml", 9),
            ],
        ),
        ("toml_syntax", &[("toml-syntax", "toml_syntax/s.toml", 9)]),
        (
            "invalid_name",
            &[("invalid-name", "invalid_name/s.toml", 1)],
        ),
        (
            "invalid_schema",
            &[("invalid-schema", "invalid_schema/s.toml", 12)],
        ),
    ];
    for (set, expected) in cases {
        let (code, got) = diags(set, &[]);
        let expected: Vec<_> = expected.iter().map(|(c, f, l)| d(c, f, *l)).collect();
        assert_eq!(got, expected, "set {set}");
        assert_eq!(code, 1, "set {set}");
    }
}

#[test]
fn messages_say_what_to_fix() {
    let out = run(&["check", "output_too_large", "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = v[0]["message"].as_str().unwrap();
    assert!(m.contains("213") && m.contains("100"), "{m}");
    let out = run(&["check", "example_invalid", "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = v[0]["message"].as_str().unwrap();
    assert!(m.contains("/answer") && m.contains("string"), "{m}");
    let out = run(&["check", "unknown_key", "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v[0]["message"].as_str().unwrap().contains("max_turns"));
}

#[test]
fn catalogue_makes_a_tool_known() {
    let (code, got) = diags("unknown_tool", &["--tools", "catalogue.toml"]);
    assert_eq!((code, got), (0, vec![]));
    let out = run(&["check", "unknown_tool", "--tools", "absent.toml"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn max_depth_is_configurable() {
    assert_eq!(diags("too_deep", &["--max-depth", "3"]), (0, vec![]));
}

#[test]
fn warnings_fail_only_when_denied() {
    let (code, got) = diags("no_examples", &[]);
    assert_eq!(
        (code, got),
        (0, vec![d("no-examples", "no_examples/s.toml", 1)])
    );
    assert_eq!(diags("no_examples", &["--deny-warnings"]).0, 1);
}

#[test]
fn usage_and_io_errors_exit_2() {
    assert_eq!(run(&["check", "does/not/exist"]).status.code(), Some(2));
    assert_eq!(
        run(&["check", "clean", "--format", "xml"]).status.code(),
        Some(2)
    );
    assert_eq!(run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(run(&["schema", "nope.toml"]).status.code(), Some(2));
}

#[test]
fn human_output_reads_like_rustc() {
    let out = run(&["check", "unknown_key"]);
    let s = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(
        lines[0],
        "unknown_key/s.toml:7:1: error[unknown-key]: unknown key `max_turn` in [limits]; did you mean `max_turns`?"
    );
    assert_eq!(lines[2], "7 | max_turn = 8");
    assert_eq!(lines[3], "  | ^");
    assert_eq!(lines.last(), Some(&"1 error, 0 warnings in 1 spec"));
}

#[test]
fn json_has_the_required_fields() {
    let out = run(&["check", "bad_limits", "unknown_key", "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 4);
    for d in arr {
        for (k, kind) in [
            ("file", "string"),
            ("line", "number"),
            ("column", "number"),
            ("severity", "string"),
            ("code", "string"),
            ("spec", "string"),
            ("message", "string"),
        ] {
            let ok = match kind {
                "string" => d[k].is_string(),
                _ => d[k].is_u64(),
            };
            assert!(ok, "{k} in {d}");
        }
        assert_eq!(d["severity"], "error");
    }
}

#[test]
fn github_lines_are_annotations() {
    let out = run(&["check", "bad_limits", "no_examples", "--format", "github"]);
    let s = String::from_utf8_lossy(&out.stdout);
    let re = regex::Regex::new(
        r"^::(error|warning) file=[^,:]+,line=\d+,col=\d+,title=[a-z-]+::[^\r\n]+$",
    )
    .unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 4, "{s}");
    for l in &lines {
        assert!(re.is_match(l), "{l}");
    }
    assert!(lines[0].starts_with("::error file=bad_limits/s.toml,line=7,col=13,title=bad-limits::"));
    assert!(
        lines[3].starts_with("::warning file=no_examples/s.toml,line=1,col=1,title=no-examples::")
    );
}

#[test]
fn malformed_input_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("input = {}", "[".repeat(10_000));
    let huge = format!(
        "name = \"huge\"\ndescription = \"{}\"\ncolour = 1\n",
        "y".repeat(5_000_000)
    );
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage.toml", garbage),
        ("empty.toml", Vec::new()),
        ("huge.toml", huge.into_bytes()),
        ("deep.toml", deep.into_bytes()),
        (
            "deep_tables.toml",
            format!("[{}]\n", vec!["k"; 10_000].join(".")).into_bytes(),
        ),
    ];
    for (name, bytes) in cases {
        let sub = dir.path().join(name.trim_end_matches(".toml"));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(name), bytes).unwrap();
        for format in ["human", "json", "github"] {
            let out = Command::new(BIN)
                .args(["check", "--format", format])
                .arg(&sub)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{name} {format}: {out:?}");
            assert!(!out.stdout.is_empty(), "{name}");
            if format == "json" {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert!(!v.as_array().unwrap().is_empty(), "{name}");
            }
        }
    }
}

#[test]
fn project_specs_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(BIN)
        .args(["check", "specs/"])
        .current_dir(root)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn schema_formats() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema = |format: &str| -> Value {
        let out = Command::new(BIN)
            .args(["schema", "specs/research_topic.toml", "--format", format])
            .current_dir(root)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let j = schema("json-schema");
    assert_eq!(j["name"], "research_topic");
    assert_eq!(
        j["input_schema"]["properties"]["question"]["maxLength"],
        500
    );
    assert!(j["output_schema"].is_object());
    let o = schema("openai");
    assert_eq!(o["type"], "function");
    assert_eq!(o["function"]["strict"], true);
    let q = &o["function"]["parameters"]["properties"]["question"];
    assert!(q.get("maxLength").is_none());
    assert!(q["description"]
        .as_str()
        .unwrap()
        .contains("at most 500 characters"));
    let a = schema("anthropic");
    assert_eq!(a["input_schema"]["additionalProperties"], false);
    assert!(a.get("output_schema").is_none());
    let m = schema("mcp");
    assert!(m["inputSchema"].is_object() && m["outputSchema"].is_object());
    // A broken spec is a violation, not a crash.
    let out = run(&["schema", "unknown_key/s.toml"]);
    assert_eq!(out.status.code(), Some(1));
}

/// Writes `files` (name, text) into a fresh directory and checks it, as JSON.
fn check_files(files: &[(&str, &str)]) -> (i32, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let path = dir.path().to_str().unwrap();
    let out = run(&["check", path, "--format", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json output parses");
    (
        out.status.code().unwrap_or(-1),
        v.as_array().cloned().unwrap_or_default(),
    )
}

const ENUM_SPEC: &str = r#"name = "colour"
description = "Names a colour."
system = "Name one."
[input]
type = "object"
additionalProperties = false
[output]
type = "string"
enum = ["red", "green", "blue", "cyan", "magenta"]
[[examples]]
input = {}
output = "yellow"
"#;

#[test]
fn an_invalid_enum_value_lists_the_valid_ones() {
    let (code, diags) = check_files(&[("colour.toml", ENUM_SPEC)]);
    assert_eq!(code, 1);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    let m = diags[0]["message"].as_str().unwrap();
    assert_eq!(diags[0]["code"], "example-invalid");
    assert!(
        m.ends_with(r#"/: the value is not one of "red", "green", "blue", "cyan" or "magenta""#),
        "{m}"
    );
    // A long enum is still summarised rather than flooding the message.
    let many: Vec<String> = (0..30).map(|i| format!("\"v{i}\"")).collect();
    let long = ENUM_SPEC.replace(
        r#"["red", "green", "blue", "cyan", "magenta"]"#,
        &format!("[{}]", many.join(", ")),
    );
    let (_, diags) = check_files(&[("colour.toml", &long)]);
    let m = diags[0]["message"].as_str().unwrap();
    assert!(m.contains("other candidates"), "{m}");
}

#[test]
fn a_misspelt_key_gives_one_diagnostic() {
    let spec = ENUM_SPEC
        .replace("description =", "descripton =")
        .replace("\"yellow\"", "\"red\"");
    let (code, diags) = check_files(&[("colour.toml", &spec)]);
    assert_eq!(code, 1);
    assert_eq!(diags.len(), 1, "{diags:#?}");
    assert_eq!(diags[0]["code"], "unknown-key");
    assert_eq!(diags[0]["line"], 2);
}

/// `--model` prices each spec's first call; the warning points at `max_cost_usd`, fails only
/// under `--deny-warnings`, and a price file that cannot be read is a usage error.
#[test]
fn check_model_warns_when_a_call_cannot_fit_the_cap() {
    let dir = tempfile::tempdir().expect("temp dir");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/check_claim.toml");
    let text = std::fs::read_to_string(shipped).expect("spec");
    // As the spec was before it set max_tokens_per_turn and raised its cap.
    let old: String = text
        .lines()
        .filter(|l| !l.starts_with("max_tokens_per_turn"))
        .map(|l| l.replace("max_cost_usd = \"0.35\"", "max_cost_usd = \"0.05\""))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(old, text);
    std::fs::write(dir.path().join("check_claim.toml"), &old).expect("write");
    let at = |args: &[&str]| {
        Command::new(BIN)
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("the subcontract binary runs")
    };
    let out = at(&["check", ".", "--model", "anthropic:claude-sonnet-4-5"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let line = old
        .lines()
        .position(|l| l.starts_with("max_cost_usd"))
        .expect("a cap")
        + 1;
    assert!(
        stdout.contains(&format!(
            "check_claim.toml:{line}:16: warning[call-over-budget]: for an input of the largest valid size"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("lower max_tokens_per_turn to "), "{stdout}");
    let out = at(&[
        "check",
        ".",
        "--model",
        "anthropic:claude-sonnet-4-5",
        "--deny-warnings",
    ]);
    assert_eq!(out.status.code(), Some(1));
    // Without a model, nothing to price; with an unpriced one, nothing to warn about.
    for extra in [&[][..], &["--model", "openai:my-local-model"][..]] {
        let mut args = vec!["check", ".", "--deny-warnings"];
        args.extend_from_slice(extra);
        assert_eq!(at(&args).status.code(), Some(0), "{extra:?}");
    }
    // A price file makes the local model dear enough to warn about.
    std::fs::write(
        dir.path().join("prices.toml"),
        "[prices.\"openai:my-local-model\"]\ninput_per_mtok = \"100\"\noutput_per_mtok = \"100\"\n",
    )
    .expect("write");
    let out = at(&[
        "check",
        "check_claim.toml",
        "--model",
        "openai:my-local-model",
        "--prices",
        "prices.toml",
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("call-over-budget"));
    let out = at(&["check", ".", "--prices", "absent.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("absent.toml"));
}
