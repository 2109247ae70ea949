//! TOML specs load exactly as the spec reference (`src/docs/specs.md`) describes, and the
//! project's own specs hold.

use std::path::Path;

use serde_json::json;
use subcontract::spec::{load_spec, load_spec_str, spec_files};

#[test]
fn project_specs_load() {
    let files = spec_files(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/specs"))).unwrap();
    assert!(files.len() >= 3, "{files:?}");
    for f in files {
        let spec = load_spec(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(!spec.examples().is_empty(), "{} has examples", f.display());
    }
}

#[test]
fn design_example_loads_with_its_values() {
    let spec = load_spec(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/specs/research_topic.toml"
    ))
    .unwrap();
    assert_eq!(spec.name(), "research_topic");
    assert_eq!(spec.tools(), ["read_file", "grep"]);
    assert_eq!(spec.limits().max_turns, 8);
    assert_eq!(
        spec.limits().max_cost_usd,
        Some(rust_decimal::Decimal::new(50, 2))
    );
    assert_eq!(
        spec.output_contract().analysis().worst_case_chars,
        Some(3947)
    );
    assert!(spec
        .input_contract()
        .is_valid(&json!({"question": "Which library does it use?"})));
    assert!(!spec
        .input_contract()
        .is_valid(&json!({"question": "short"})));
}

#[test]
fn typos_and_bad_values_point_at_file_line_col() {
    let src = "name = \"x\"\ndescription = \"d\"\nsystem = \"s\"\n[limits]\nmax_turn = 8\n[input]\ntype = \"object\"\n[output]\ntype = \"string\"\nmaxLength = 10\n";
    let err = load_spec_str(Path::new("specs/x.toml"), src).unwrap_err();
    let d = err
        .diagnostics
        .iter()
        .find(|d| d.code == "unknown-key")
        .expect("unknown-key");
    assert_eq!((d.line, d.column), (5, 1));
    assert!(d.message.contains("max_turns"), "{}", d.message);
    assert!(
        err.to_string()
            .starts_with("specs/x.toml:5:1: error[unknown-key]"),
        "{err}"
    );

    let unbounded = "name = \"x\"\ndescription = \"d\"\nsystem = \"s\"\n[input]\ntype = \"object\"\n[output]\ntype = \"object\"\nadditionalProperties = false\nproperties.answer = { type = \"string\" }\n[[examples]]\ninput = {}\noutput = { answer = \"a\" }\n";
    let err = load_spec_str(Path::new("u.toml"), unbounded).unwrap_err();
    let d = err
        .diagnostics
        .iter()
        .find(|d| d.code == "unbounded-string")
        .expect("unbounded-string");
    assert_eq!(d.line, 9, "points at the property: {d:?}");

    for garbage in ["", "\u{0}\u{1}\u{2}", "[[[[[[[[[[", "name = "] {
        assert!(load_spec_str(Path::new("g.toml"), garbage).is_err());
    }
}

#[test]
fn per_turn_tool_limits_load_with_defaults() {
    let spec_with = |limits: &str| {
        format!("name = \"x\"\ndescription = \"d\"\nsystem = \"s\"\n[limits]\n{limits}\n[input]\ntype = \"object\"\n[output]\ntype = \"string\"\nmaxLength = 10\n")
    };
    let spec = load_spec_str(Path::new("x.toml"), &spec_with("max_turns = 2")).unwrap();
    assert_eq!(spec.limits().max_tool_calls_per_turn, 64);
    assert_eq!(spec.limits().max_tool_result_chars_per_turn, 200_000);

    let src = spec_with("max_tool_calls_per_turn = 8\nmax_tool_result_chars_per_turn = 5000");
    let spec = load_spec_str(Path::new("x.toml"), &src).unwrap();
    assert_eq!(spec.limits().max_tool_calls_per_turn, 8);
    assert_eq!(spec.limits().max_tool_result_chars_per_turn, 5000);

    let err = load_spec_str(
        Path::new("x.toml"),
        &spec_with("max_tool_calls_per_turn = 0"),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("`max_tool_calls_per_turn` must be at least 1"),
        "{err}"
    );
    // The builder refuses the same.
    let built = subcontract::SubAgentSpec::dynamic(
        "x",
        json!({"type": "object"}),
        json!({"type": "string", "maxLength": 10}),
    )
    .description("d")
    .system("s")
    .max_tool_result_chars_per_turn(0)
    .build();
    let err = built.unwrap_err();
    assert_eq!(
        err.problems,
        [subcontract::SpecProblem {
            code: "bad-limits",
            message: "`max_tool_result_chars_per_turn` must be at least 1, found 0".into(),
            at: subcontract::spec::SpecLocation::Limit("max_tool_result_chars_per_turn"),
        }]
    );
}

/// The ```toml blocks of a Markdown document, in order.
fn toml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// Every TOML snippet of the spec reference (`src/docs/specs.md`) loads as what it documents:
/// the spec, the `--tools` catalogue and the `--prices` file, and so do the shipped files the
/// README's commands use.
#[test]
fn the_spec_reference_snippets_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("crates/subcontract/src/docs/specs.md")).unwrap();
    let blocks = toml_blocks(&doc);
    assert_eq!(
        blocks.len(),
        5,
        "spec, [model], [workspace], catalogue, prices"
    );

    let spec = subcontract::spec::load_spec_str(Path::new("specs/doc.toml"), &blocks[0])
        .unwrap_or_else(|e| panic!("the documented spec loads:\n{e}"));
    assert_eq!(spec.name(), "research_topic");
    assert_eq!(spec.model(), Some("openai:gpt-4.1-mini"));
    assert_eq!(spec.sampling().temperature, Some(0.2));
    assert_eq!(spec.limits().max_tokens_per_turn, 2048);

    // The `[model]` table, in place of the complete spec's own.
    // The `[workspace]` table, added to the complete spec, makes it one that acts.
    let acting = format!("{}\n{}", blocks[0], blocks[2]);
    let acting = subcontract::spec::load_spec_str(Path::new("specs/acting.toml"), &acting)
        .unwrap_or_else(|e| panic!("the documented [workspace] loads:\n{e}"));
    assert_eq!(acting.workspace().commands, ["python3"]);

    let (before, after) = blocks[0].split_once("[model]").expect("a [model] table");
    let after = &after[after.find("\n[").expect("a table after [model]")..];
    let with = format!("{before}{}{after}", blocks[1]);
    let spec = subcontract::spec::load_spec_str(Path::new("specs/doc.toml"), &with)
        .unwrap_or_else(|e| panic!("the documented [model] table loads:\n{e}"));
    assert_eq!(spec.sampling().seed, Some(7));
    assert_eq!(spec.sampling().top_p, Some(0.9));

    let dir = tempfile::tempdir().unwrap();
    let catalogue = dir.path().join("catalogue.toml");
    std::fs::write(&catalogue, &blocks[3]).unwrap();
    let tools = subcontract::check::load_catalogue(&catalogue).expect("documented catalogue");
    assert_eq!(tools[0].name, "web_search");
    let shipped = subcontract::check::load_catalogue(&root.join("examples/catalogue.toml"))
        .expect("shipped catalogue");
    assert_eq!(shipped[0].name, "web_search");

    let prices = subcontract::model::PriceTable::from_toml_str(&blocks[4]).expect("prices");
    let local = prices.get("openai:llama3.1").expect("documented price");
    assert_eq!(local.input_per_mtok.to_string(), "0.10");
    // The format the reference warns about is refused, naming the key it expects.
    let wrong = "[models.\"openai:x\"]\ninput_per_mtok = \"1\"\noutput_per_mtok = \"1\"\n";
    let err = subcontract::model::PriceTable::from_toml_str(wrong).unwrap_err();
    assert!(err.to_string().contains("unknown field"), "{err}");

    // The README's input files match their specs' input contracts.
    for (spec, input) in [
        ("specs/research_topic.toml", "examples/question.json"),
        ("specs/review_diff.toml", "examples/diff.json"),
    ] {
        let spec = subcontract::spec::load_spec(root.join(spec)).unwrap();
        let text = std::fs::read_to_string(root.join(input)).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(
            spec.input_contract().validate(&value).is_ok(),
            "{input} does not fit {}",
            spec.name()
        );
    }
}
