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
        ..CheckOptions::default()
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

fn one(src: &str, opts: &CheckOptions) -> CheckReport {
    check_sources(&[(PathBuf::from("s.toml"), src.to_string())], opts)
}

#[test]
fn contracts_that_can_never_hold_are_errors_at_their_place() {
    let src = r#"name = "s"
description = "d"
system = "p"
[input]
type = "object"
required = ["claim"]
additionalProperties = false
properties.claim = { type = "string", maxLenght = 300 }
[output]
type = "object"
required = ["verdict", "evidence"]
additionalProperties = false
properties.verdict = { enum = ["yes", "no"] }
[[examples]]
input = { claim = "x" }
output = { verdict = "yes" }
"#;
    let r = one(src, &CheckOptions::default());
    let lint: Vec<&Diagnostic> = r
        .diagnostics
        .iter()
        .filter(|d| d.code == "unknown-keyword" || d.code == "unsatisfiable-required")
        .collect();
    let at: Vec<(&str, u32, u32)> = lint
        .iter()
        .map(|d| (d.code.as_str(), d.line, d.column))
        .collect();
    assert_eq!(
        at,
        [
            ("unknown-keyword", 8, 39),
            ("unsatisfiable-required", 11, 24)
        ],
        "{:#?}",
        r.diagnostics
    );
    assert!(lint
        .iter()
        .all(|d| d.is_error() && d.spec.as_deref() == Some("s")));
    assert_eq!(
        lint[0].message,
        "input/properties/claim: unknown keyword `maxLenght`: JSON Schema ignores it, so it \
         constrains nothing; did you mean `maxLength`?"
    );
    assert!(
        lint[1].message.starts_with(
            "output: `required` names `evidence`, which `properties` does not declare, and \
             additionalProperties = false forbids any other property"
        ),
        "{}",
        lint[1].message
    );
    assert!(r.failed());
    // The example that no output could satisfy is reported as invalid as well.
    assert!(r.diagnostics.iter().any(|d| d.code == "example-invalid"));
}

#[test]
fn valid_keywords_data_and_open_objects_are_not_findings() {
    let src = r##"name = "s"
description = "d"
system = "p"
[input]
"$schema" = "https://json-schema.org/draft/2020-12/schema"
"$comment" = "annotations and extensions are fine"
title = "Input"
type = "object"
required = ["a", "x1", "later"]
additionalProperties = false
"x-order" = ["a"]
properties.a = { type = "string", format = "email", description = "d", default = "a@b.c", examples = ["a@b.c"], deprecated = false }
properties.later = { "$ref" = "#/$defs/T" }
patternProperties."^x[0-9]$" = { type = "integer" }
"$defs".T = { type = "object", properties = { v = { const = { maxLenght = 1 } } }, default = { notAKeyword = 1 } }
[output]
type = "object"
required = ["anything"]
properties.answer = { type = "string", maxLength = 10 }
additionalProperties = false
unevaluatedProperties = false
allOf = [{ properties = { anything = { type = "string", maxLength = 5 } }, required = ["anything"] }]
[[examples]]
input = { a = "a@b.c", x1 = 1, later = {} }
output = {}
"##;
    let r = one(src, &CheckOptions::default());
    let lint: Vec<&Diagnostic> = r
        .diagnostics
        .iter()
        .filter(|d| d.code == "unknown-keyword" || d.code == "unsatisfiable-required")
        .collect();
    // The output's `anything` is declared only under allOf, but additionalProperties = false
    // looks at its own `properties` alone: that one is a true finding.
    let at: Vec<(&str, u32)> = lint.iter().map(|d| (d.code.as_str(), d.line)).collect();
    assert_eq!(at, [("unsatisfiable-required", 18)], "{:#?}", r.diagnostics);

    // Without additionalProperties the allOf beside unevaluatedProperties may allow it.
    let open = src.replace(
        "additionalProperties = false\nunevaluatedProperties",
        "unevaluatedProperties",
    );
    let r = one(&open, &CheckOptions::default());
    assert!(
        !r.diagnostics
            .iter()
            .any(|d| d.code == "unsatisfiable-required"),
        "{:#?}",
        r.diagnostics
    );
}

#[test]
fn lint_reaches_every_subschema_and_names_renamed_keywords() {
    let src = r#"name = "s"
description = "d"
system = "p"
[input]
type = "object"
properties.list = { type = "array", items = { type = "string", maxlength = 3 }, prefixItems = [{ typ = "string" }] }
properties.either = { anyOf = [{ type = "string", maxLength = 2 }, { type = "null", nullable = true }] }
properties.closed = { type = "object", additionalProperties = false, required = ["gone"], properties = { gone = false } }
dependencies = { list = ["either"] }
[output]
type = "string"
maxLength = 10
[[examples]]
input = {}
output = "x"
"#;
    let r = one(src, &CheckOptions::default());
    let got: Vec<(&str, u32, u32, &str)> = r
        .diagnostics
        .iter()
        .filter(|d| d.code == "unknown-keyword" || d.code == "unsatisfiable-required")
        .map(|d| (d.code.as_str(), d.line, d.column, d.message.as_str()))
        .collect();
    let summary: Vec<(&str, u32, u32)> = got.iter().map(|g| (g.0, g.1, g.2)).collect();
    assert_eq!(
        summary,
        [
            ("unknown-keyword", 6, 64),
            ("unknown-keyword", 6, 98),
            ("unknown-keyword", 7, 85),
            ("unsatisfiable-required", 8, 82),
            ("unknown-keyword", 9, 1),
        ],
        "{got:#?}"
    );
    assert!(
        got[0].3.ends_with("did you mean `maxLength`?"),
        "{}",
        got[0].3
    );
    assert!(got[1].3.ends_with("did you mean `type`?"), "{}", got[1].3);
    assert!(
        got[2].3.ends_with("(extension keywords start with `x-`)"),
        "{}",
        got[2].3
    );
    assert!(
        got[3].3.contains("whose schema in `properties` is `false`"),
        "{}",
        got[3].3
    );
    assert!(
        got[4]
            .3
            .ends_with("draft 2020-12 calls it `dependentRequired` or `dependentSchemas`"),
        "{}",
        got[4].3
    );
}

#[test]
fn a_rust_spec_gets_the_same_contract_findings() {
    let spec = SubAgentSpec::dynamic(
        "typo",
        json!({"type": "object", "properties": {"q": {"type": "string", "maxLenght": 5}}}),
        json!({"type": "object", "additionalProperties": false, "required": ["a"], "properties": {}}),
    )
    .description("d")
    .system("p")
    .build()
    .unwrap();
    let mut codes: Vec<&str> = Vec::new();
    let d = spec.check();
    codes.extend(d.iter().map(|d| d.code.as_str()));
    codes.sort();
    assert_eq!(
        codes,
        ["no-examples", "unknown-keyword", "unsatisfiable-required"],
        "{d:#?}"
    );
}

/// A spec with a cap, a bounded input and `max_tokens_per_turn` left to the caller.
const CAPPED: &str = r#"name = "capped"
description = "d"
system = "p"
tools = ["grep"]
[limits]
max_cost_usd = "0.05"
[input]
type = "object"
additionalProperties = false
properties.q = { type = "string", maxLength = 300 }
[output]
type = "object"
additionalProperties = false
properties.a = { type = "string", maxLength = 100 }
[[examples]]
input = {}
output = {}
"#;

fn over_budget(r: &CheckReport) -> Vec<&Diagnostic> {
    r.diagnostics
        .iter()
        .filter(|d| d.code == "call-over-budget")
        .collect()
}

fn on(models: &[&str]) -> CheckOptions {
    CheckOptions {
        models: models.iter().map(|m| m.to_string()).collect(),
        ..CheckOptions::default()
    }
}

#[test]
fn a_call_that_cannot_fit_the_cap_is_warned_with_the_fix() {
    // Without a model to price on, nothing is said.
    assert!(over_budget(&one(CAPPED, &CheckOptions::default())).is_empty());

    let r = one(
        CAPPED,
        &on(&["anthropic:claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"]),
    );
    let w = over_budget(&r);
    assert_eq!(w.len(), 1, "one per model: {:#?}", r.diagnostics);
    let w = w[0];
    assert_eq!((w.line, w.column, w.severity), (6, 16, Severity::Warning));
    assert!(!r.failed(), "a warning");
    assert!(
        w.message.starts_with(
            "for an input of the largest valid size (308 characters), one model call on \
             anthropic:claude-sonnet-4-5 reserves up to "
        ),
        "{}",
        w.message
    );
    assert!(w.message.contains("4096 output tokens"), "{}", w.message);
    // The fix it names works, and is the largest that does.
    let n: u32 = w
        .message
        .split("lower max_tokens_per_turn to ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no fix in {}", w.message));
    let with = |n: u32| {
        CAPPED.replace(
            "[limits]\n",
            &format!("[limits]\nmax_tokens_per_turn = {n}\n"),
        )
    };
    let sonnet = on(&["anthropic:claude-sonnet-4-5"]);
    assert!(over_budget(&one(&with(n), &sonnet)).is_empty());
    assert_eq!(over_budget(&one(&with(n + 1), &sonnet)).len(), 1);
    // So does the raised cap it names.
    let cap = w.message.rsplit(' ').next().unwrap();
    let raised = CAPPED.replace("\"0.05\"", &format!("\"{cap}\""));
    assert!(over_budget(&one(&raised, &sonnet)).is_empty(), "{cap}");

    // A cheap model fits; an unpriced one is counted as free; `--deny-warnings` fails.
    assert!(over_budget(&one(CAPPED, &on(&["openai:gpt-4.1-nano", "local:llama"]))).is_empty());
    let deny = CheckOptions {
        deny_warnings: true,
        ..sonnet.clone()
    };
    assert!(one(CAPPED, &deny).failed());
}

#[test]
fn the_spec_s_own_model_is_checked_and_an_unbounded_input_is_counted_as_none() {
    let own = CAPPED.replace(
        "tools = [\"grep\"]",
        "tools = [\"grep\"]\nmodel = \"anthropic:claude-opus-4-1\"",
    );
    // Checked on its own model even with none given, and only on it.
    let r = one(&own, &on(&["openai:gpt-4.1-nano"]));
    let w = over_budget(&r);
    assert_eq!(w.len(), 1, "{:#?}", r.diagnostics);
    assert!(
        w[0].message.contains("anthropic:claude-opus-4-1"),
        "{}",
        w[0].message
    );

    let unbounded = CAPPED.replace(", maxLength = 300", "");
    let r = one(&unbounded, &on(&["anthropic:claude-sonnet-4-5"]));
    let w = over_budget(&r);
    assert_eq!(w.len(), 1, "{:#?}", r.diagnostics);
    assert!(
        w[0].message
            .starts_with("even before its (unbounded) input is counted, "),
        "{}",
        w[0].message
    );
    // No cap, no warning.
    let uncapped = CAPPED.replace("max_cost_usd = \"0.05\"\n", "");
    assert!(over_budget(&one(&uncapped, &on(&["anthropic:claude-opus-4-1"]))).is_empty());
}

#[test]
fn a_user_price_file_prices_a_local_model() {
    let mut prices = crate::model::PriceTable::builtin();
    prices.insert(
        "openai:local",
        crate::model::Price::per_mtok(
            rust_decimal::Decimal::from(100),
            rust_decimal::Decimal::from(100),
        ),
    );
    let opts = CheckOptions {
        prices,
        ..on(&["openai:local"])
    };
    assert_eq!(over_budget(&one(CAPPED, &opts)).len(), 1);
}

#[test]
fn mcp_tools_without_a_server_listing_are_unchecked_not_unknown() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.toml"),
        "name = \"a\"\ndescription = \"d\"\nsystem = \"s\"\ntools = [\"mcp__fs__read_text_file\"]\n[input]\ntype = \"string\"\nmaxLength = 5\n[output]\ntype = \"string\"\nmaxLength = 5\n",
    )
    .unwrap();
    let report = check_paths(&[dir.path().to_path_buf()], &CheckOptions::default()).unwrap();
    let codes: Vec<(&str, Severity)> = report
        .diagnostics
        .iter()
        .filter(|d| d.code != "no-examples")
        .map(|d| (d.code.as_str(), d.severity))
        .collect();
    assert_eq!(
        codes,
        [("mcp-unchecked", Severity::Warning)],
        "{:?}",
        report.diagnostics
    );
    assert!(!report.failed());
}

fn listing() -> McpListing {
    McpListing {
        file: ".mcp.json".into(),
        groups: vec!["mcp__fs".into(), "mcp__time".into()],
        tools: vec![
            ("mcp__fs__read_text_file".into(), "mcp__fs".into()),
            ("mcp__fs__write_file".into(), "mcp__fs".into()),
            ("mcp__time__get_current_time".into(), "mcp__time".into()),
        ],
    }
}

fn with_listing() -> CheckOptions {
    CheckOptions {
        mcp: Some(listing()),
        ..CheckOptions::default()
    }
}

fn messages(r: &CheckReport, code: &str) -> Vec<String> {
    r.diagnostics
        .iter()
        .filter(|d| d.code == code)
        .map(|d| d.message.clone())
        .collect()
}

#[test]
fn with_a_listing_mcp_tools_are_known_or_unknown_with_did_you_mean() {
    let r = check_sources(
        &[
            spec("ok", &["mcp__fs__read_text_file", "mcp__time"]),
            spec("typo", &["mcp__fs__read_txt_file"]),
            spec("nosrv", &["mcp__fss"]),
        ],
        &with_listing(),
    );
    assert!(messages(&r, codes::MCP_UNCHECKED).is_empty(), "{r:?}");
    let unknown = messages(&r, codes::UNKNOWN_TOOL);
    assert_eq!(unknown.len(), 2, "{unknown:?}");
    // Sorted by file: nosrv.toml, then typo.toml.
    assert!(
        unknown[0].contains("`mcp__fss`") && unknown[0].contains("did you mean `mcp__fs`?"),
        "{}",
        unknown[0]
    );
    assert!(
        unknown[1].contains("`mcp__fs__read_txt_file`")
            && unknown[1].contains("did you mean `mcp__fs__read_text_file`?")
            && unknown[1].contains(".mcp.json"),
        "{}",
        unknown[1]
    );
    // A config with no servers still lists: nothing is unchecked, everything is unknown.
    let none = CheckOptions {
        mcp: Some(McpListing::default()),
        ..CheckOptions::default()
    };
    let r = check_sources(&[spec("ok", &["mcp__fs__read_text_file"])], &none);
    assert_eq!(messages(&r, codes::UNKNOWN_TOOL).len(), 1, "{r:?}");
}

#[test]
fn a_parent_naming_a_server_holds_each_of_its_tools() {
    let set = [
        spec("parent", &["mcp__fs", "child"]),
        spec("child", &["mcp__fs__read_text_file"]),
        spec("narrow", &["mcp__time", "child"]),
    ];
    for opts in [with_listing(), CheckOptions::default()] {
        let r = check_sources(&set, &opts);
        let not_held = messages(&r, codes::TOOL_NOT_HELD);
        // `parent` holds the child's tool through its server; `narrow` holds another server.
        assert_eq!(not_held.len(), 1, "{not_held:?}");
        assert!(
            not_held[0].starts_with("`narrow` calls `child`"),
            "{}",
            not_held[0]
        );
    }
    // Without a listing a name only looks like a group when it is one whole prefix.
    let r = check_sources(
        &[
            spec("parent", &["mcp__f", "child"]),
            spec("child", &["mcp__fs__read_text_file"]),
        ],
        &CheckOptions::default(),
    );
    assert_eq!(messages(&r, codes::TOOL_NOT_HELD).len(), 1, "{r:?}");
}
