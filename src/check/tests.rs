use std::path::PathBuf;

use serde_json::json;

use super::*;

const GOOD: &str = r#"name = "NAME"
description = "d"
system = "p"
tools = [TOOLS]
[input]
type = "object"
[output]
type = "object"
additionalProperties = false
properties.answer = { type = "string", maxLength = 100 }
[[examples]]
input = {}
output = { answer = "yes" }
"#;

fn spec(name: &str, tools: &[&str]) -> (PathBuf, String) {
    let tools: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
    (
        PathBuf::from(format!("specs/{name}.toml")),
        GOOD.replace("NAME", name)
            .replace("TOOLS", &tools.join(", ")),
    )
}

fn codes_of(r: &CheckReport) -> Vec<(String, String, u32, u32)> {
    r.diagnostics
        .iter()
        .map(|d| (d.code.clone(), d.file.clone(), d.line, d.column))
        .collect()
}

#[test]
fn a_clean_set_passes() {
    let r = check_sources(
        &[spec("a", &["b", "read_file"]), spec("b", &["read_file"])],
        &CheckOptions::default(),
    );
    assert!(r.diagnostics.is_empty(), "{:#?}", r.diagnostics);
    assert_eq!(r.specs_checked, 2);
    assert!(!r.failed());
}

#[test]
fn cycles_depth_and_unknown_tools() {
    let r = check_sources(
        &[
            spec("a", &["b"]),
            spec("b", &["a"]),
            spec("c", &["d", "e", "nope"]),
            spec("d", &["e", "nope"]),
            spec("e", &["nope"]),
        ],
        &CheckOptions::default(),
    );
    let c = codes_of(&r);
    assert!(
        c.contains(&("call-cycle".into(), "specs/a.toml".into(), 4, 10)),
        "{c:?}"
    );
    assert!(
        c.contains(&("call-cycle".into(), "specs/b.toml".into(), 4, 10)),
        "{c:?}"
    );
    assert!(
        c.contains(&("too-deep".into(), "specs/c.toml".into(), 4, 10)),
        "{c:?}"
    );
    assert!(
        c.contains(&("unknown-tool".into(), "specs/e.toml".into(), 4, 10)),
        "{c:?}"
    );
    assert_eq!(c.iter().filter(|x| x.0 == "too-deep").count(), 1, "{c:?}");
    let opts = CheckOptions {
        catalogue: vec![CatalogueTool {
            name: "nope".into(),
            description: String::new(),
            input: None,
        }],
        max_depth: 3,
        deny_warnings: false,
    };
    let r = check_sources(
        &[
            spec("c", &["d", "e", "nope"]),
            spec("d", &["e", "nope"]),
            spec("e", &["nope"]),
        ],
        &opts,
    );
    assert!(r.diagnostics.is_empty(), "{:#?}", r.diagnostics);
}

#[test]
fn self_call_is_a_cycle_and_duplicates_are_both_reported() {
    let (_, a) = spec("a", &["a"]);
    let r = check_sources(
        &[
            (PathBuf::from("x.toml"), a.clone()),
            (PathBuf::from("y.toml"), a),
        ],
        &CheckOptions::default(),
    );
    let c = codes_of(&r);
    assert!(
        c.contains(&("duplicate-name".into(), "x.toml".into(), 1, 8)),
        "{c:?}"
    );
    assert!(
        c.contains(&("duplicate-name".into(), "y.toml".into(), 1, 8)),
        "{c:?}"
    );
    assert!(
        c.contains(&("call-cycle".into(), "x.toml".into(), 4, 10)),
        "{c:?}"
    );
}

#[test]
fn every_contract_problem_in_one_file() {
    let src = r#"name = "s"
description = "d"
system = "p"
[limits]
max_output_chars = 50
[input]
type = "object"
properties.q = { type = "string", minLength = 3 }
[output]
type = "object"
properties.free = { type = "string" }
properties.list = { type = "array", items = { type = "integer" } }
[[examples]]
input = { q = "x" }
output = { free = 3 }
"#;
    let r = check_sources(
        &[(PathBuf::from("s.toml"), src.into())],
        &Default::default(),
    );
    let c: Vec<(String, u32)> = r
        .diagnostics
        .iter()
        .map(|d| (d.code.clone(), d.line))
        .collect();
    assert!(c.contains(&("open-object".into(), 9)), "{c:?}");
    assert!(c.contains(&("unbounded-string".into(), 11)), "{c:?}");
    assert!(c.contains(&("unbounded-array".into(), 12)), "{c:?}");
    assert!(c.contains(&("example-invalid".into(), 14)), "{c:?}");
    assert!(c.contains(&("example-invalid".into(), 15)), "{c:?}");
    let ex = r
        .diagnostics
        .iter()
        .find(|d| d.code == "example-invalid" && d.line == 14)
        .unwrap();
    assert!(ex.message.contains("/q"), "{}", ex.message);
}

#[test]
fn rust_declared_spec_check() {
    let spec = SubAgentSpec::dynamic(
        "loose",
        json!({"type": "object"}),
        json!({"type": "object", "properties": {"s": {"type": "string"}}}),
    )
    .description("d")
    .system("p")
    .allow_unbounded_output()
    .build()
    .unwrap();
    let d = spec.check();
    let mut codes: Vec<&str> = d.iter().map(|d| d.code.as_str()).collect();
    codes.sort();
    assert_eq!(
        codes,
        ["no-examples", "open-object", "unbounded-string"],
        "{d:#?}"
    );
    assert!(d.iter().all(|d| d.file == "<spec loose>"));
    assert_eq!(d.iter().filter(|d| !d.is_error()).count(), 1);

    let spec = SubAgentSpec::dynamic(
        "big",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 500}),
    )
    .description("d")
    .system("p")
    .max_output_chars(100)
    .allow_unbounded_output()
    .build()
    .unwrap();
    let d = spec.check();
    assert_eq!(d[0].code, "output-too-large");
    assert!(d[0].message.contains("502"), "{}", d[0].message);
}

#[test]
fn a_caller_must_hold_its_callees_tools() {
    let r = check_sources(
        &[spec("a", &["b"]), spec("b", &["grep", "list_dir"])],
        &CheckOptions::default(),
    );
    let c = codes_of(&r);
    assert_eq!(c, [("tool-not-held".into(), "specs/a.toml".into(), 4, 10)]);
    assert!(r.diagnostics[0].message.contains("`grep`, `list_dir`"));
}

#[test]
fn unknown_tool_suggests_a_close_name() {
    let r = check_sources(&[spec("a", &["gerp"])], &CheckOptions::default());
    assert!(
        r.diagnostics[0].message.ends_with("did you mean `grep`?"),
        "{}",
        r.diagnostics[0].message
    );
}

#[test]
fn the_builder_s_problems_are_all_reported_once_each_at_their_place() {
    // An invalid name (found by the file layer and the builder: reported once), a tool listed
    // twice and a zero limit (found only by the builder), and an unbounded output.
    let src = r#"name = "bad name"
description = "d"
system = "p"
tools = ["grep", "grep"]
[limits]
max_turns = 0
[input]
type = "object"
[output]
type = "object"
additionalProperties = false
properties.a = { type = "string" }
[[examples]]
input = {}
output = { a = "x" }
"#;
    let r = check_sources(
        &[(PathBuf::from("s.toml"), src.to_string())],
        &CheckOptions::default(),
    );
    let c = codes_of(&r);
    let at = |code: &str, line, col| (code.to_string(), "s.toml".to_string(), line, col);
    assert_eq!(
        c,
        [
            at("invalid-name", 1, 8),
            at("invalid-name", 4, 18),
            at("bad-limits", 6, 13),
            at("unbounded-string", 12, 12),
        ],
        "{:#?}",
        r.diagnostics
    );
    assert_eq!(r.diagnostics[1].message, "tool `grep` is listed twice");
}
