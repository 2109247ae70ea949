use super::keys::{edit_distance, WORKSPACE_KEYS};
use super::*;
use crate::diag::Severity;
use rust_decimal::Decimal;
use serde_json::json;

/// A full spec file with positions the tests below pin: the flagship example as an earlier
/// design wrote it (a `model` line, tighter bounds). The README's own block is checked by
/// `the_readmes_spec_parses_cleanly`.
const DESIGN_EXAMPLE: &str = r#"name = "research_topic"            # the tool name a host sees: [A-Za-z0-9_-]{1,64}
description = "Investigate a topic across the workspace and return findings. Not for one lookup."
system = "You are a focused researcher. ..."   # or: system_file = "prompts/research.md"
tools = ["read_file", "grep"]      # narrower than the host's
model = "openai:gpt-4.1-mini"      # optional; default: the host's model

[limits]
max_turns = 8
max_cost_usd = "0.20"              # decimal string; a TOML number is accepted too
timeout_secs = 120
max_output_chars = 4000

[input]                            # JSON Schema, written as TOML
type = "object"
required = ["question"]
additionalProperties = false
properties.question = { type = "string", minLength = 10, maxLength = 500 }

[output]
type = "object"
required = ["findings", "gaps"]
additionalProperties = false
properties.gaps = { type = "array", maxItems = 3, items = { type = "string", maxLength = 200 } }
[output.properties.findings]
type = "array"
maxItems = 6
items = { type = "object", additionalProperties = false, required = ["claim", "source_ids"], properties = { claim = { type = "string", maxLength = 300 }, source_ids = { type = "array", minItems = 1, maxItems = 5, items = { type = "string", maxLength = 64 } } } }

[[examples]]                       # contract examples: both sides must validate
input = { question = "Which authentication library does this project use?" }
output = { findings = [{ claim = "It uses argon2 for password hashing.", source_ids = ["Cargo.toml"] }], gaps = [] }
"#;

/// A minimal valid spec, to which tests append or in which they replace lines.
const MINIMAL: &str = r#"name = "s"
description = "d"
system = "p"
[input]
type = "object"
[output]
type = "object"
[[examples]]
input = {}
output = {}
"#;

fn p(line: u32, column: u32) -> Pos {
    Pos { line, column }
}

fn parse(src: &str) -> (Option<RawSpec>, Vec<Diagnostic>) {
    parse_spec(Path::new("specs/t.toml"), src)
}

/// (code, line, column) of every diagnostic, for exact comparisons.
fn summary(diags: &[Diagnostic]) -> Vec<(&str, u32, u32)> {
    diags
        .iter()
        .map(|d| (d.code.as_str(), d.line, d.column))
        .collect()
}

#[test]
fn the_readmes_spec_parses_cleanly() {
    let readme = include_str!("../../../../../README.md");
    let at = readme
        .find("## Specs as TOML")
        .expect("the README has its spec section");
    let block = readme[at..]
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the section shows a spec");
    let (spec, diags) = parse(block);
    assert!(diags.is_empty(), "{diags:#?}");
    assert_eq!(spec.expect("spec").def.name, "research_topic");
}

#[test]
fn design_example_parses_cleanly() {
    let (spec, diags) = parse(DESIGN_EXAMPLE);
    assert!(diags.is_empty(), "{diags:#?}");
    let spec = spec.expect("spec");
    assert_eq!(spec.path, Path::new("specs/t.toml"));
    assert_eq!(spec.def.name, "research_topic");
    assert_eq!(spec.at.name, p(1, 8));
    assert!(spec.def.description.starts_with("Investigate a topic"));
    assert_eq!(spec.at.description, p(2, 15));
    assert_eq!(spec.def.system, "You are a focused researcher. ...");
    let tools: Vec<_> = spec
        .def
        .tools
        .iter()
        .zip(&spec.at.tools)
        .map(|(t, &pos)| (t.as_str(), pos))
        .collect();
    assert_eq!(tools, [("read_file", p(4, 10)), ("grep", p(4, 23))]);
    assert_eq!(spec.def.model.as_deref(), Some("openai:gpt-4.1-mini"));

    let l = &spec.def.limits;
    assert_eq!((l.max_turns, spec.at.pos("max_turns")), (8, Some(p(8, 13))));
    assert_eq!(l.max_cost_usd, Some(Decimal::new(20, 2)));
    assert_eq!(spec.at.pos("max_cost_usd"), Some(p(9, 16)));
    assert_eq!(l.timeout, std::time::Duration::from_secs(120));
    assert_eq!(l.max_output_chars, 4000);

    assert_eq!(
        spec.input.value,
        json!({"type": "object", "required": ["question"], "additionalProperties": false,
               "properties": {"question": {"type": "string", "minLength": 10, "maxLength": 500}}})
    );
    assert_eq!(spec.input.pos, p(13, 1));
    let out = &spec.output.value;
    // preserve_order: properties keep file order (gaps was written first).
    let props: Vec<_> = out["properties"].as_object().unwrap().keys().collect();
    assert_eq!(props, ["gaps", "findings"]);
    assert_eq!(out["properties"]["findings"]["maxItems"], json!(6));
    assert_eq!(
        out["properties"]["findings"]["items"]["properties"]["source_ids"]["items"],
        json!({"type": "string", "maxLength": 64})
    );

    assert_eq!(spec.examples.len(), 1);
    let ex = &spec.examples[0];
    assert_eq!((ex.index, ex.pos), (0, p(29, 1)));
    assert_eq!(ex.name, None);
    assert_eq!(
        ex.input.value,
        json!({"question": "Which authentication library does this project use?"})
    );
    assert_eq!(
        ex.output.value["findings"][0]["source_ids"],
        json!(["Cargo.toml"])
    );
    assert_eq!(ex.output.pos, p(31, 10));
}

#[test]
fn positions_cover_dotted_keys_inline_tables_headers_and_arrays() {
    let (spec, _) = parse(DESIGN_EXAMPLE);
    let m = &spec.unwrap().positions;
    assert_eq!(m.locate(&[]), Some(Pos::START));
    // Dotted key: points at `question` in `properties.question = ...`.
    assert_eq!(
        m.locate(&["input", "properties", "question"]),
        Some(p(17, 12))
    );
    // The implicit `properties` table: its first dotted mention.
    assert_eq!(m.locate(&["input", "properties"]), Some(p(17, 1)));
    assert_eq!(
        m.locate(&["input", "properties", "question", "maxLength"]),
        Some(p(17, 58))
    );
    assert_eq!(
        m.locate(&["output", "properties", "gaps", "items", "maxLength"]),
        Some(p(23, 78))
    );
    // A [table.header]: the name in the header; its keys on their own lines.
    assert_eq!(
        m.locate(&["output", "properties", "findings"]),
        Some(p(24, 20))
    );
    assert_eq!(
        m.locate(&["output", "properties", "findings", "maxItems"]),
        Some(p(26, 1))
    );
    // Deep inline tables on one line.
    let claim = [
        "output",
        "properties",
        "findings",
        "items",
        "properties",
        "claim",
    ];
    assert_eq!(m.locate(&claim), Some(p(27, 109)));
    // Array elements and arrays of tables.
    assert_eq!(m.locate(&["tools", "1"]), Some(p(4, 23)));
    assert_eq!(m.locate(&["examples", "0"]), Some(p(29, 1)));
    assert_eq!(m.locate(&["examples", "0", "output"]), Some(p(31, 1)));
    assert_eq!(m.locate(&["examples", "1"]), None);
    assert_eq!(m.locate(&["output", "nope"]), None);

    assert_eq!(m.locate_pointer("input", "/properties/question"), p(17, 12));
    assert_eq!(
        m.locate_pointer("input", "#/properties/question"),
        p(17, 12)
    );
    assert_eq!(
        m.locate_pointer("output", "/properties/findings/items/properties/claim"),
        p(27, 109)
    );
    assert_eq!(
        m.locate_pointer("output", "/properties/gaps/items/maxLength"),
        p(23, 78)
    );
    // Falls back to the nearest ancestor that exists.
    assert_eq!(
        m.locate_pointer("output", "/properties/findings/nope/deeper"),
        p(24, 20)
    );
    assert_eq!(m.locate_pointer("output", ""), p(19, 2));
    assert_eq!(m.locate_pointer("missing", "/x"), Pos::START);
}

#[test]
fn pointer_segments_are_unescaped() {
    let src = MINIMAL.replace(
        "[output]\ntype = \"object\"\n",
        "[output]\ntype = \"object\"\nproperties.\"a/b\" = {}\nproperties.\"c~d\" = {}\n",
    );
    let (spec, diags) = parse(&src);
    assert!(diags.is_empty(), "{diags:#?}");
    let m = spec.unwrap().positions;
    assert_eq!(m.locate_pointer("output", "/properties/a~1b"), p(8, 12));
    assert_eq!(m.locate_pointer("output", "/properties/c~0d"), p(9, 12));
}

#[test]
fn toml_syntax_errors_are_all_reported_at_their_spans() {
    let src = "name = \"s\"\ndescription = = \"d\"\n[input\ntype = 'object'\n";
    let (spec, diags) = parse(src);
    assert!(spec.is_none());
    assert_eq!(
        summary(&diags),
        [
            ("toml-syntax", 2, 15),
            ("toml-syntax", 2, 17),
            ("toml-syntax", 3, 7)
        ],
        "{diags:#?}"
    );
    assert!(diags.iter().all(|d| d.severity == Severity::Error));
    assert_eq!(diags[0].spec.as_deref(), Some("s"));
    assert_eq!(diags[0].file, "specs/t.toml");
}

#[test]
fn shape_errors_before_the_first_syntax_error_are_kept() {
    let src = "name = \"s\"\nmodle = \"m\"\ntools = 3\n[input\ntype = 'object'\nfoo = 1\n";
    let (spec, diags) = parse(src);
    assert!(spec.is_none());
    assert_eq!(
        summary(&diags),
        [
            ("unknown-key", 2, 1),
            ("invalid-value", 3, 9),
            ("toml-syntax", 4, 7)
        ],
        "{diags:#?}"
    );
}

#[test]
fn duplicate_keys_are_syntax_errors() {
    let src = MINIMAL.replace("description", "name = \"again\"\ndescription");
    let (spec, diags) = parse(&src);
    assert!(spec.is_none());
    assert_eq!(summary(&diags), [("toml-syntax", 2, 1)]);
}

#[test]
fn unknown_keys_with_did_you_mean() {
    let src = MINIMAL.replace("[input]", "[limits]\nmax_turn = 8\n[input]");
    let (spec, diags) = parse(&src);
    assert_eq!(summary(&diags), [("unknown-key", 5, 1)]);
    assert_eq!(
        diags[0].message,
        "unknown key `max_turn` in [limits]; did you mean `max_turns`?"
    );
    // Unknown keys do not stop the spec from being built.
    assert!(spec.is_some());
}

#[test]
fn unknown_keys_everywhere_but_inside_schemas() {
    let src = r#"name = "s"
descripton = "d"
description = "d"
system = "p"
max_turns = 3
zzzzzz = 1
[input]
type = "object"
notAKeyword = "schemas are not checked here"
[output]
type = "object"
[[examples]]
nmae = "first"
input = {}
output = {}
"#;
    let (_, diags) = parse(src);
    assert_eq!(
        summary(&diags),
        [
            ("unknown-key", 2, 1),
            ("unknown-key", 5, 1),
            ("unknown-key", 6, 1),
            ("unknown-key", 13, 1)
        ],
        "{diags:#?}"
    );
    assert!(diags[0].message.ends_with("did you mean `description`?"));
    assert!(diags[1].message.contains("belongs in the [limits] table"));
    assert!(diags[2]
        .message
        .contains("expected one of: name, description"));
    assert!(diags[3]
        .message
        .contains("in [[examples]]; did you mean `name`?"));
}

#[test]
fn a_misspelt_key_is_not_also_reported_missing() {
    for (from, to, line) in [
        ("description = \"d\"", "descripton = \"d\"", 2),
        ("name = \"s\"", "nmae = \"s\"", 1),
        ("system = \"p\"", "sytem = \"p\"", 3),
        ("input = {}", "inptu = {}", 9),
    ] {
        let src = MINIMAL.replace(from, to);
        let (_, diags) = parse(&src);
        assert_eq!(
            summary(&diags),
            [("unknown-key", line, 1)],
            "{to}: {diags:#?}"
        );
        assert!(diags[0].message.contains("did you mean"), "{diags:#?}");
    }
    // A key that is missing outright (no near miss) is still reported.
    let (_, diags) = parse(&MINIMAL.replace("description = \"d\"\n", "zzzzzz = 1\n"));
    assert_eq!(
        summary(&diags),
        [("invalid-value", 1, 1), ("unknown-key", 2, 1)],
        "{diags:#?}"
    );
}

#[test]
fn invalid_names() {
    let src = MINIMAL.replace(
        "name = \"s\"",
        "name = \"bad name!\"\ntools = [\"ok\", \"no/slash\", \"\"]",
    );
    let (spec, diags) = parse(&src);
    assert_eq!(
        summary(&diags),
        [
            ("invalid-name", 1, 8),
            ("invalid-name", 2, 16),
            ("invalid-name", 2, 28)
        ],
        "{diags:#?}"
    );
    // An invalid name is not a "known" name for the spec field.
    assert!(diags.iter().all(|d| d.spec.is_none()));
    let spec = spec.unwrap();
    let tools: Vec<_> = spec.def.tools.iter().map(String::as_str).collect();
    assert_eq!(tools, ["ok"]);

    let long = "x".repeat(65);
    let (_, diags) = parse(&MINIMAL.replace("name = \"s\"", &format!("name = \"{long}\"")));
    assert_eq!(summary(&diags), [("invalid-name", 1, 8)]);
    assert!(is_valid_name(&"x".repeat(64)));
    assert!(is_valid_name("a-b_C9"));
    assert!(!is_valid_name("é"));

    let (spec, diags) = parse(&MINIMAL.replace("name = \"s\"\n", ""));
    assert!(spec.is_none());
    assert_eq!(summary(&diags), [("invalid-name", 1, 1)]);
    assert!(diags[0].message.starts_with("missing `name`"));
}

#[test]
fn invalid_values() {
    let src = r#"name = "s"
description = 5
system = "p"
tools = "read_file"
model = 4
limits = 3
input = "object"
examples = {}
[output]
type = "object"
"#;
    let (spec, diags) = parse(src);
    assert!(spec.is_none());
    assert_eq!(
        summary(&diags),
        [
            ("invalid-value", 2, 15),
            ("invalid-value", 4, 9),
            ("invalid-value", 5, 9),
            ("invalid-value", 6, 10),
            ("invalid-value", 7, 9),
            ("invalid-value", 8, 12)
        ],
        "{diags:#?}"
    );
    assert_eq!(
        diags[0].message,
        "`description` must be a string, found integer"
    );
    assert!(diags[1]
        .message
        .starts_with("`tools` must be an array of tool names"));
    assert!(diags.iter().all(|d| d.spec.as_deref() == Some("s")));
}

#[test]
fn empty_description_and_missing_required_keys() {
    let (spec, diags) = parse("name = \"s\"\ndescription = \"  \"\n[[examples]]\ninput = 1\n");
    assert!(spec.is_none());
    assert_eq!(
        summary(&diags),
        [
            ("invalid-value", 1, 1), // no system
            ("invalid-value", 1, 1), // no input
            ("invalid-value", 1, 1), // no output
            ("invalid-value", 2, 15),
            ("invalid-value", 3, 1) // example without output
        ],
        "{diags:#?}"
    );
    assert!(diags[0].message.contains("`system_file`"));
    assert!(diags[4].message.contains("example 1 is missing `output`"));
}

#[test]
fn system_and_system_file_are_exclusive() {
    let src = MINIMAL.replace("system = \"p\"", "system = \"p\"\nsystem_file = \"p.md\"");
    let (spec, diags) = parse(&src);
    assert_eq!(summary(&diags), [("invalid-value", 4, 1)]);
    // The inline prompt is kept so later checks can still run.
    assert_eq!(spec.unwrap().def.system, "p");
}

#[test]
fn system_file_is_resolved_relative_to_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("specs/prompts")).unwrap();
    std::fs::write(dir.path().join("specs/prompts/r.md"), "You research.\n").unwrap();
    let spec_path = dir.path().join("specs/r.toml");
    let src = MINIMAL.replace("system = \"p\"", "system_file = \"prompts/r.md\"");
    std::fs::write(&spec_path, &src).unwrap();

    let (spec, diags) = parse_spec_file(&spec_path).unwrap();
    assert!(diags.is_empty(), "{diags:#?}");
    let spec = spec.unwrap();
    assert_eq!(spec.def.system, "You research.\n");
    assert_eq!(spec.at.system, p(3, 15));

    let missing = MINIMAL.replace("system = \"p\"", "system_file = \"prompts/nope.md\"");
    let (spec, diags) = parse_spec(&spec_path, &missing);
    assert!(spec.is_none());
    assert_eq!(summary(&diags), [("invalid-value", 3, 15)]);
    assert!(
        diags[0].message.contains("prompts/nope.md"),
        "{}",
        diags[0].message
    );
}

#[test]
fn bad_limits() {
    let src = r#"[limits]
max_turns = 0
max_cost_usd = "0"
timeout_secs = 0
max_output_chars = 0
"#;
    // Values of the right type pass this layer; the builder checks them, once, and every
    // problem lands on its value.
    let (spec, diags) = parse(&format!("{MINIMAL}{src}"));
    assert!(diags.is_empty(), "{diags:#?}");
    assert_eq!(spec.as_ref().unwrap().def.limits.max_turns, 0);
    let diags = crate::spec::load_spec_str(Path::new("specs/t.toml"), &format!("{MINIMAL}{src}"))
        .unwrap_err()
        .diagnostics
        .into_iter()
        .filter(|d| d.code == codes::BAD_LIMITS)
        .collect::<Vec<_>>();
    assert_eq!(
        summary(&diags),
        [
            ("bad-limits", 12, 13),
            ("bad-limits", 13, 16),
            ("bad-limits", 14, 16),
            ("bad-limits", 15, 20)
        ],
        "{diags:#?}"
    );
    assert_eq!(diags[0].message, "`max_turns` must be at least 1, found 0");

    let src = r#"[limits]
max_turns = -3
max_cost_usd = -1.5
timeout_secs = "120"
max_output_chars = 1.5
"#;
    // Wrong types are this layer's; a negative decimal is a decimal, so the builder's.
    let (spec, diags) = parse(&format!("{MINIMAL}{src}"));
    assert_eq!(
        summary(&diags),
        [
            ("bad-limits", 12, 13),
            ("bad-limits", 14, 16),
            ("bad-limits", 15, 20)
        ],
        "{diags:#?}"
    );
    assert_eq!(
        diags[0].message,
        "`max_turns` must be a positive integer, found -3"
    );
    assert_eq!(
        diags[1].message,
        "`timeout_secs` must be a positive integer, found string"
    );
    let spec = spec.unwrap();
    assert_eq!(spec.def.limits.max_cost_usd, Some(Decimal::new(-15, 1)));
    assert_eq!(spec.at.pos("max_turns"), None);

    let src = "[limits]\nmax_turns = 4294967296\nmax_cost_usd = \"twenty cents\"\n";
    let (_, diags) = parse(&format!("{MINIMAL}{src}"));
    assert_eq!(
        summary(&diags),
        [("bad-limits", 12, 13), ("bad-limits", 13, 16)]
    );
    assert!(diags[0].message.contains("too large"));
    assert!(diags[1].message.contains("\"twenty cents\""));
}

#[test]
fn cost_as_decimal_string_and_as_number() {
    let cost = |v: &str| {
        let (spec, diags) = parse(&format!("{MINIMAL}[limits]\nmax_cost_usd = {v}\n"));
        assert!(diags.is_empty(), "{v}: {diags:#?}");
        spec.unwrap().def.limits.max_cost_usd.unwrap()
    };
    let d = cost("\"0.20\"");
    assert_eq!((d, d.scale()), (Decimal::new(20, 2), 2));
    let d = cost("0.2");
    assert_eq!((d, d.to_string().as_str()), (Decimal::new(2, 1), "0.2"));
    assert_eq!(cost("0.1").to_string(), "0.1");
    assert_eq!(cost("1e-2"), Decimal::new(1, 2));
    assert_eq!(cost("3"), Decimal::from(3));
    assert_eq!(cost("\"12.345\""), Decimal::new(12345, 3));
}

#[test]
fn no_examples_is_a_warning() {
    let src = MINIMAL.replace("[[examples]]\ninput = {}\noutput = {}\n", "");
    let (spec, diags) = parse(&src);
    assert!(spec.is_some());
    assert_eq!(summary(&diags), [("no-examples", 1, 1)]);
    assert_eq!(diags[0].severity, Severity::Warning);
    assert_eq!(diags[0].spec.as_deref(), Some("s"));

    let (spec, diags) = parse(&format!("examples = []\n{src}"));
    assert!(spec.unwrap().examples.is_empty());
    assert_eq!(summary(&diags), [("no-examples", 1, 1)]);
}

#[test]
fn several_errors_in_one_file_are_all_reported() {
    let src = r#"name = "has space"
description = ""
system = "p"
tools = ["grep", 7]
colour = "blue"
[limits]
max_turns = 0
timeout_sec = 5
[input]
type = "object"
[output]
type = "object"
minimum = nan
[[examples]]
input = {}
"#;
    let (spec, diags) = parse(src);
    assert!(spec.is_none()); // output has a NaN, so no output contract
    assert_eq!(
        summary(&diags),
        [
            ("invalid-name", 1, 8),
            ("invalid-value", 2, 15),
            ("invalid-value", 4, 18),
            ("unknown-key", 5, 1),
            ("bad-limits", 7, 13),
            ("unknown-key", 8, 1),
            ("invalid-value", 13, 11),
            ("invalid-value", 14, 1)
        ],
        "{diags:#?}"
    );
    assert!(diags[5].message.contains("did you mean `timeout_secs`?"));
}

#[test]
fn toml_values_map_to_json() {
    let src = MINIMAL.replace(
        "[[examples]]\ninput = {}",
        "[[examples]]\nname = \"typed\"\ninput = { i = 0x10, f = 1.5, big = 9223372036854775807, b = true, \
         d = 1979-05-27T07:32:00Z, ld = 1979-05-27, a = [1, 2.0, \"x\"] }",
    );
    let (spec, diags) = parse(&src);
    assert!(diags.is_empty(), "{diags:#?}");
    let ex = &spec.unwrap().examples[0];
    assert_eq!(ex.name.as_ref().unwrap().value, "typed");
    let v = &ex.input.value;
    assert_eq!(v["i"], json!(16));
    assert!(v["i"].is_i64());
    assert!(v["f"].is_f64());
    assert_eq!(v["big"], json!(i64::MAX));
    assert_eq!(v["b"], json!(true));
    assert_eq!(v["d"], json!("1979-05-27T07:32:00Z"));
    assert_eq!(v["ld"], json!("1979-05-27"));
    assert_eq!(v["a"], json!([1, 2.0, "x"]));
    assert!(v["a"][1].is_f64());

    let src = MINIMAL.replace(
        "output = {}",
        "output = { x = inf, y = 99999999999999999999 }",
    );
    let (spec, diags) = parse(&src);
    assert!(spec.unwrap().examples.is_empty());
    assert_eq!(
        summary(&diags),
        [("invalid-value", 10, 16), ("invalid-value", 10, 25)]
    );
}

#[test]
fn empty_file() {
    let (spec, diags) = parse("");
    assert!(spec.is_none());
    assert_eq!(
        summary(&diags),
        [
            ("invalid-name", 1, 1),
            ("invalid-value", 1, 1),
            ("invalid-value", 1, 1),
            ("invalid-value", 1, 1),
            ("invalid-value", 1, 1),
            ("no-examples", 1, 1)
        ]
    );
}

#[test]
fn garbage_never_panics() {
    // A small deterministic generator: no need for a real RNG here.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const ALPHABET: &[u8] = b"[]{}=\"'.,#\n \t\\abcxyz019-_:+eE\r";
    for round in 0..300 {
        let len = (next() % 200) as usize;
        let text: String = if round % 2 == 0 {
            (0..len)
                .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize] as char)
                .collect()
        } else {
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let (_, diags) = parse(&text);
        assert!(!diags.is_empty(), "{text:?}");
        for d in &diags {
            assert!(d.line >= 1 && d.column >= 1);
        }
    }
    // Valid spec text cut at every point.
    for cut in 0..DESIGN_EXAMPLE.len() {
        if DESIGN_EXAMPLE.is_char_boundary(cut) {
            let _ = parse(&DESIGN_EXAMPLE[..cut]);
        }
    }
}

#[test]
fn syntax_errors_are_capped_for_huge_garbage() {
    let src = "= = =\n".repeat(100_000);
    let (spec, diags) = parse(&src);
    assert!(spec.is_none());
    assert_eq!(
        diags
            .iter()
            .filter(|d| d.code == codes::TOML_SYNTAX)
            .count(),
        MAX_SYNTAX_DIAGNOSTICS + 1
    );
    assert!(diags
        .iter()
        .any(|d| d.message.ends_with("more syntax errors not shown")));
}

#[test]
fn huge_file() {
    // ~10 MB: a long description and a wide schema.
    let mut src = MINIMAL.replace(
        "description = \"d\"",
        &format!("description = \"{}\"", "y".repeat(5_000_000)),
    );
    src.push_str("[output.properties]\n");
    for i in 0..200_000 {
        src.push_str(&format!("p{i} = {{ type = \"string\" }}\n"));
    }
    let (spec, diags) = parse(&src);
    assert!(diags.is_empty(), "{:?}", summary(&diags));
    let spec = spec.unwrap();
    assert_eq!(spec.def.description.len(), 5_000_000);
    assert_eq!(
        spec.positions.locate(&["output", "properties", "p199999"]),
        Some(p(200_011, 1))
    );
    // One 10 MB line of garbage.
    let (_, diags) = parse(&"x=1 ".repeat(2_500_000));
    assert!(!diags.is_empty());
}

#[test]
fn deep_nesting_is_a_diagnostic_not_a_crash() {
    for src in [
        format!("input = {}", "[".repeat(10_000)),
        format!("input = {}", "{a=".repeat(10_000)),
        format!("{} = 1", vec!["k"; 10_000].join(".")),
        format!("[{}]\n", vec!["k"; 10_000].join(".")),
        format!("[[{}]]\n", vec!["k"; 10_000].join(".")),
        format!("input = {}1{}", "[".repeat(10_000), "]".repeat(10_000)),
    ] {
        let (spec, diags) = parse(&src);
        assert!(spec.is_none());
        assert!(
            diags.iter().any(|d| d.code == codes::TOML_SYNTAX),
            "{:?}",
            summary(&diags)
        );
    }
    // As deep as toml allows is still fine, and converts.
    let nested = format!("{}1{}", "[".repeat(70), "]".repeat(70));
    let src = MINIMAL.replace("output = {}", &format!("output = {nested}"));
    let (spec, diags) = parse(&src);
    assert!(diags.is_empty(), "{diags:#?}");
    assert!(spec.unwrap().examples[0].output.value.is_array());
}

#[test]
fn non_utf8_file_is_a_syntax_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, b"name = \"ok\"\ndesc\xFFription = 1\n").unwrap();
    let (spec, diags) = parse_spec_file(&path).unwrap();
    assert!(spec.is_none());
    assert_eq!(summary(&diags), [("toml-syntax", 2, 5)]);
    assert!(diags[0].message.contains("UTF-8"));
    assert!(parse_spec_file(&dir.path().join("absent.toml")).is_err());
}

#[test]
fn byte_order_mark_does_not_shift_columns() {
    let (_, diags) = parse(&format!("\u{feff}{}", MINIMAL.replace("name", "nmae")));
    assert!(
        summary(&diags).contains(&("unknown-key", 1, 1)),
        "{diags:#?}"
    );
}

#[test]
fn edit_distance_basics() {
    assert_eq!(edit_distance("max_turn", "max_turns", 2), Some(1));
    assert_eq!(edit_distance("tiemout_secs", "timeout_secs", 2), Some(2));
    assert_eq!(edit_distance("kitten", "sitting", 2), None);
    assert_eq!(edit_distance("", "ab", 2), Some(2));
    assert_eq!(edit_distance(&"x".repeat(1_000_000), "name", 2), None);
    assert_eq!(suggest("tols", TOP_KEYS), Some("tools"));
    assert_eq!(suggest("x", TOP_KEYS), None);
    assert_eq!(shown(&"é".repeat(100)).chars().count(), 61);
}

/// [`MINIMAL`] with a bounded output, so that it loads; the same lines.
const LOADABLE: &str = r#"name = "s"
description = "d"
system = "p"
[input]
type = "object"
[output]
type = "boolean"
[[examples]]
input = {}
output = true
"#;

/// Diagnostics of loading `src` (file and builder), in file order.
fn load_diags(src: &str) -> Vec<Diagnostic> {
    match crate::spec::load_spec_str(Path::new("specs/t.toml"), src) {
        Ok(_) => Vec::new(),
        Err(e) => e.diagnostics,
    }
}

#[test]
fn model_as_a_string_or_a_table_with_sampling_settings() {
    use crate::model::Sampling;
    // As before: the name alone.
    let src = format!("model = \"openai:gpt-4.1-mini\"\n{LOADABLE}");
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
    assert_eq!(spec.model(), Some("openai:gpt-4.1-mini"));
    assert_eq!(spec.sampling(), Sampling::default());

    // A table: the name and the sampling settings, each with its position.
    let table =
        "[model]\nname = \"anthropic:claude-sonnet-4-5\"\ntemperature = 0.2\ntop_p = 1\nseed = 7\n";
    let src = format!("{LOADABLE}{table}");
    let (raw, diags) = parse(&src);
    assert!(diags.is_empty(), "{diags:#?}");
    let raw = raw.unwrap();
    assert_eq!(raw.at.pos("model"), Some(p(12, 8)));
    assert_eq!(raw.at.pos("temperature"), Some(p(13, 15)));
    assert_eq!(raw.def.sampling.top_p, Some(1.0));
    assert_eq!(raw.at.pos("seed"), Some(p(15, 8)));
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
    assert_eq!(spec.model(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(
        spec.sampling(),
        Sampling {
            temperature: Some(0.2),
            top_p: Some(1.0),
            seed: Some(7)
        }
    );

    // Without a name the caller's model is used, with these settings.
    let src = format!("{LOADABLE}[model]\ntemperature = 0\n");
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
    assert_eq!(spec.model(), None);
    assert_eq!(spec.sampling().temperature, Some(0.0));

    // Inline table, same thing.
    let src = format!("model = {{ name = \"m:x\", seed = 0 }}\n{LOADABLE}");
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
    assert_eq!((spec.model(), spec.sampling().seed), (Some("m:x"), Some(0)));
}

#[test]
fn sampling_settings_are_range_checked_at_their_values() {
    let src = format!("{LOADABLE}[model]\ntemperature = 2.5\ntop_p = 0\n");
    let diags = load_diags(&src);
    assert_eq!(
        summary(&diags),
        [("invalid-value", 12, 15), ("invalid-value", 13, 9)],
        "{diags:#?}"
    );
    assert_eq!(
        diags[0].message,
        "`temperature` must be a number from 0 to 2, found 2.5"
    );
    assert!(
        diags[1].message.contains("above 0 and at most 1"),
        "{}",
        diags[1].message
    );
    for bad in ["-0.1", "nan", "inf", "1e300"] {
        let diags = load_diags(&format!("{LOADABLE}[model]\ntemperature = {bad}\n"));
        assert_eq!(
            summary(&diags),
            [("invalid-value", 12, 15)],
            "{bad}: {diags:#?}"
        );
    }
    for bad in ["1.5", "-1", "nan"] {
        let diags = load_diags(&format!("{LOADABLE}[model]\ntop_p = {bad}\n"));
        assert_eq!(
            summary(&diags),
            [("invalid-value", 12, 9)],
            "{bad}: {diags:#?}"
        );
    }
    for good in [
        "temperature = 0",
        "temperature = 2",
        "temperature = 0.7",
        "top_p = 1",
        "top_p = 0.01",
    ] {
        let diags = load_diags(&format!("{LOADABLE}[model]\n{good}\n"));
        assert!(diags.is_empty(), "{good}: {diags:#?}");
    }
    // Wrong types are this layer's, at the value.
    let src = format!("{LOADABLE}[model]\ntemperature = \"0.2\"\nseed = -1\nname = \"\"\n");
    let (_, diags) = parse(&src);
    assert_eq!(
        summary(&diags),
        [
            ("invalid-value", 12, 15),
            ("invalid-value", 13, 8),
            ("invalid-value", 14, 8)
        ],
        "{diags:#?}"
    );
    assert_eq!(
        diags[0].message,
        "`temperature` must be a number, found string"
    );
    assert_eq!(
        diags[1].message,
        "`seed` must be a positive integer, found -1"
    );
    let (_, diags) = parse(&format!("model = 4\n{LOADABLE}"));
    assert!(
        diags[0].message.contains("or a [model] table"),
        "{diags:#?}"
    );
    // A spec too broken to build still has its settings checked.
    let src = "name = \"s\"\ndescription = \"d\"\nsystem = \"p\"\n[model]\ntemperature = 9\n";
    let (spec, diags) = parse(src);
    assert!(spec.is_none());
    assert!(
        summary(&diags).contains(&("invalid-value", 5, 15)),
        "{diags:#?}"
    );
}

#[test]
fn a_key_in_the_wrong_table_is_pointed_home() {
    let src = format!(
        "temperature = 0\n{LOADABLE}[limits]\nseed = 1\n[model]\nmax_tokens_per_turn = 9\ntemprature = 1\nnmae = \"x\"\n"
    );
    let (_, diags) = parse(&src);
    assert_eq!(
        summary(&diags),
        [
            ("unknown-key", 1, 1),
            ("unknown-key", 13, 1),
            ("unknown-key", 15, 1),
            ("unknown-key", 16, 1),
            ("unknown-key", 17, 1)
        ],
        "{diags:#?}"
    );
    let m: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        m,
        [
            "unknown key `temperature` at the top level; `temperature` belongs in the [model] table",
            "unknown key `seed` in [limits]; `seed` belongs in the [model] table",
            "unknown key `max_tokens_per_turn` in [model]; `max_tokens_per_turn` belongs in the [limits] table",
            "unknown key `temprature` in [model]; did you mean `temperature`?",
            "unknown key `nmae` in [model]; did you mean `name`?",
        ]
    );
}

#[test]
fn output_mode_takes_the_four_modes() {
    use crate::spec::OutputMode;
    for mode in OutputMode::ALL {
        let src = format!("output_mode = \"{mode}\"\n{LOADABLE}");
        let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
        assert_eq!(spec.output_mode(), mode);
    }
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), LOADABLE).expect("valid");
    assert_eq!(spec.output_mode(), OutputMode::Auto);
    let (_, diags) = parse(&format!("output_mode = \"nativ\"\n{LOADABLE}"));
    assert_eq!(summary(&diags), [("invalid-value", 1, 15)]);
    assert_eq!(
        diags[0].message,
        "`output_mode` must be one of \"auto\", \"tool\", \"native\", \"prompted\", found \"nativ\"; did you mean \"native\"?"
    );
    let (_, diags) = parse(&format!("output_mode = true\n{LOADABLE}"));
    assert_eq!(summary(&diags), [("invalid-value", 1, 15)]);
    let (_, diags) = parse(&format!("output_mod = \"tool\"\n{LOADABLE}"));
    assert!(
        diags[0].message.ends_with("did you mean `output_mode`?"),
        "{diags:#?}"
    );
}

#[test]
fn require_tool_first_is_a_boolean_off_by_default() {
    let load = |src: &str| crate::spec::load_spec_str(Path::new("t.toml"), src);
    assert!(!load(LOADABLE).expect("valid").require_tool_first());
    let on = load(&format!("require_tool_first = true\n{LOADABLE}")).expect("valid");
    assert!(on.require_tool_first());
    let (_, diags) = parse(&format!("require_tool_first = \"yes\"\n{LOADABLE}"));
    assert_eq!(summary(&diags), [("invalid-value", 1, 22)], "{diags:#?}");
}

#[test]
fn prompt_cache_takes_off_5m_and_1h() {
    use crate::model::PromptCache;
    for (text, cache) in [
        ("off", PromptCache::Off),
        ("5m", PromptCache::FiveMinutes),
        ("1h", PromptCache::OneHour),
    ] {
        let src = format!("prompt_cache = \"{text}\"\n{LOADABLE}");
        let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
        assert_eq!(spec.prompt_cache(), Some(cache));
    }
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), LOADABLE).expect("valid");
    assert_eq!(spec.prompt_cache(), None);
    let (_, diags) = parse(&format!("prompt_cache = \"10m\"\n{LOADABLE}"));
    assert_eq!(summary(&diags), [("invalid-value", 1, 16)]);
    assert_eq!(
        diags[0].message,
        "`prompt_cache` must be one of \"off\", \"5m\", \"1h\", found \"10m\""
    );
    let (_, diags) = parse(&format!("prompt_cache = false\n{LOADABLE}"));
    assert_eq!(summary(&diags), [("invalid-value", 1, 16)]);
}

#[test]
fn max_tokens_per_turn_is_a_limit() {
    let src = format!("{LOADABLE}[limits]\nmax_tokens_per_turn = 1024\n");
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), &src).expect("valid");
    assert_eq!(spec.limits().max_tokens_per_turn, 1024);
    let spec = crate::spec::load_spec_str(Path::new("t.toml"), LOADABLE).expect("valid");
    assert_eq!(
        spec.limits().max_tokens_per_turn,
        crate::spec::DEFAULT_MAX_TOKENS
    );
    for (bad, message) in [
        ("0", "`max_tokens_per_turn` must be at least 1, found 0"),
        (
            "1000001",
            "`max_tokens_per_turn` must be at most 1000000 (no model writes more in one call, \
             and each call reserves this much), found 1000001",
        ),
        (
            "-5",
            "`max_tokens_per_turn` must be a positive integer, found -5",
        ),
        (
            "4294967296",
            "`max_tokens_per_turn` is too large (at most 4294967295), found 4294967296",
        ),
        (
            "1.5",
            "`max_tokens_per_turn` must be a positive integer, found float",
        ),
    ] {
        let diags = load_diags(&format!(
            "{LOADABLE}[limits]\nmax_tokens_per_turn = {bad}\n"
        ));
        assert_eq!(
            summary(&diags),
            [("bad-limits", 12, 23)],
            "{bad}: {diags:#?}"
        );
        assert_eq!(diags[0].message, message);
    }
    assert!(load_diags(&format!(
        "{LOADABLE}[limits]\nmax_tokens_per_turn = 1000000\n"
    ))
    .is_empty());
}

/// The keys of the table under `heading` in `src/docs/specs.md`: the first column of each row,
/// unquoted and unbracketed (`[limits]` → `limits`), with the default column non-empty.
fn documented_keys(heading: &str) -> Vec<String> {
    let doc = include_str!("../../docs/specs.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("no section `## {heading}` in specs.md"));
    // The first table of the section, up to its first blank line.
    let table = section
        .split("\n\n")
        .find(|block| block.starts_with("| key | default |"))
        .unwrap_or_else(|| panic!("no `| key | default |` table under `## {heading}`"));
    table
        .lines()
        .skip(2)
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            assert!(
                cells.len() >= 4 && !cells[2].is_empty(),
                "row without a default: {row}"
            );
            cells[1]
                .trim_matches('`')
                .trim_matches(|c| c == '[' || c == ']')
                .to_owned()
        })
        .collect()
}

#[test]
fn the_documented_keys_are_the_keys_the_loader_accepts() {
    for (heading, keys) in [
        ("Top-level keys", TOP_KEYS),
        ("`[model]`", MODEL_KEYS),
        ("`[limits]`", LIMIT_KEYS),
        ("`[workspace]`", WORKSPACE_KEYS),
        ("`[[examples]]`", EXAMPLE_KEYS),
    ] {
        let mut documented = documented_keys(heading);
        let mut accepted: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        documented.sort();
        accepted.sort();
        assert_eq!(documented, accepted, "specs.md, `## {heading}`");
    }
    // And each accepted key really is read: a spec using every one loads without an
    // unknown-key diagnostic.
    let src = format!(
        "output_mode = \"tool\"\nprompt_cache = \"1h\"\nrequire_tool_first = true\ntools = []\n{LOADABLE}[model]\nname = \"m:x\"\ntemperature = 0\ntop_p = 1\nseed = 1\n\
         [limits]\nmax_turns = 1\nmax_cost_usd = \"1\"\ntimeout_secs = 1\nmax_output_chars = 10\n\
         max_tokens_per_turn = 1\nmax_tool_calls_per_turn = 1\nmax_tool_result_chars_per_turn = 1\n\
         answer_reserve = false\n\n\
         [workspace]\nisolation = \"copy\"\nwrites = [\"src/**\"]\ncommands = [\"python3\"]\n\
         network = false\nchecks = [\"python3 -V\"]\nmax_changed_files = 1\nmax_diff_lines = 1\n\
         max_command_secs = 1\nsandbox = \"os\"\n"
    );
    let src = src.replace("[[examples]]\n", "[[examples]]\nname = \"e\"\n");
    let (spec, diags) = parse(&src);
    assert!(diags.is_empty(), "{diags:#?}");
    let raw = spec.unwrap();
    assert_eq!(raw.def.limits.max_tool_result_chars_per_turn, 1);
    assert!(!raw.def.limits.answer_reserve);
    assert!(crate::spec::load_spec_str(Path::new("t.toml"), &src).is_ok());
    let exclusive = ["system_file"]; // with `system`, an error of its own (tested above)
    for key in LIMIT_KEYS
        .iter()
        .chain(WORKSPACE_KEYS)
        .chain(MODEL_KEYS)
        .chain(TOP_KEYS)
        .filter(|k| !exclusive.contains(k))
    {
        assert!(
            src.contains(&format!("{key} ="))
                || src.contains(&format!("[{key}]"))
                || src.contains(&format!("[[{key}]]")),
            "{key} is not exercised"
        );
    }
}
