use serde_json::{json, Value};

use super::*;

fn plan(schema: Value) -> Grounding {
    Grounding::of_schema(&schema)
        .expect("a valid use of the keyword")
        .expect("something grounded")
}

fn errors(schema: Value) -> Vec<GroundingError> {
    Grounding::of_schema(&schema).expect_err("a misuse")
}

fn read(ev: &mut Evidence, path: &str, text: &str) {
    let prov = Provenance {
        sources: vec![],
        body: Body::Excerpts(vec![(Some(path.to_owned()), text.to_owned())]),
    };
    ev.add_result("(presentation)", None, &prov);
}

fn manifest() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["name", "version", "source"],
        "properties": {
            "name": {"type": "string", "maxLength": 40, "x-grounded": "text"},
            "version": {"type": "string", "maxLength": 20, "x-grounded": "text"},
            "source": {"type": "string", "maxLength": 80, "x-grounded": "source"},
            "port": {"type": "integer", "x-grounded": "number"}
        }
    })
}

#[test]
fn a_schema_without_the_keyword_grounds_nothing() {
    let s = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}});
    assert_eq!(Grounding::of_schema(&s), Ok(None));
}

#[test]
fn each_kind_holds_only_with_evidence() {
    let g = plan(manifest());
    let mut ev = Evidence::new(g.grounds(GroundKind::Number));
    read(
        &mut ev,
        "Cargo.toml",
        "[package]\nname = \"tidepool\"\nversion = \"0.7.3\"\nport = 8080",
    );
    let good =
        json!({"name": "TidePool", "version": "0.7.3", "source": "./Cargo.toml", "port": 8080});
    assert!(g.check(&good, &ev).is_ok());

    let bad =
        json!({"name": "Cargo.toml", "version": "1.63.0", "source": "src/main.rs", "port": 80});
    let u = g.check(&bad, &ev).unwrap_err();
    let paths: Vec<&str> = u.iter().map(|x| x.violation.path.as_str()).collect();
    assert_eq!(paths, ["/name", "/port", "/source", "/version"]);
    let version = u.iter().find(|x| x.violation.path == "/version").unwrap();
    assert_eq!(
        version.repair,
        "`/version` = \"1.63.0\" occurs in nothing this run has read; read the file that holds it, or correct the value"
    );
    // What may go up to a parent never holds the value.
    for x in &u {
        assert!(
            !x.violation.message.contains("1.63.0"),
            "{}",
            x.violation.message
        );
        assert!(
            !x.violation.message.contains("src/main.rs"),
            "{}",
            x.violation.message
        );
    }
    let source = u.iter().find(|x| x.violation.path == "/source").unwrap();
    assert!(source.repair.contains("`Cargo.toml`"), "{}", source.repair);
}

#[test]
fn a_value_split_across_two_results_is_not_grounded() {
    let g = plan(manifest());
    let mut ev = Evidence::new(true);
    read(&mut ev, "a.txt", "name = tide");
    read(&mut ev, "b.txt", "pool 0.7.3");
    let out = json!({"name": "tidepool", "version": "0.7.3", "source": "b.txt"});
    let u = g.check(&out, &ev).unwrap_err();
    assert_eq!(u.len(), 1, "{u:?}");
    assert_eq!(u[0].violation.path, "/name");
}

#[test]
fn a_planted_value_is_evidence() {
    // A tool result that says the value the model wanted to invent grounds it: grounding
    // proves the value came from what the run read, not that what it read is true.
    let g = plan(manifest());
    let mut ev = Evidence::new(true);
    read(&mut ev, "notes.md", "tidepool: the version is 1.63.0");
    let out = json!({"name": "tidepool", "version": "1.63.0", "source": "notes.md"});
    assert!(g.check(&out, &ev).is_ok());
}

#[test]
fn look_alikes_fold_or_stay_distinct() {
    let g = plan(manifest());
    let mut ev = Evidence::new(true);
    read(&mut ev, "a", "ＴＩＤＥＰＯＯＬ version １４");
    assert!(g
        .check(
            &json!({"name": "tidepool", "version": "14", "source": "a", "port": 14}),
            &ev
        )
        .is_ok());
    // A Cyrillic `о` in place of the Latin one is another word.
    let u = g
        .check(
            &json!({"name": "tidepоol", "version": "14", "source": "a"}),
            &ev,
        )
        .unwrap_err();
    assert_eq!(u[0].violation.path, "/name");
}

#[test]
fn numbers_compare_as_numbers_and_stand_alone() {
    let g = plan(json!({"type": "object", "properties": {
        "n": {"type": "number", "x-grounded": "number"},
        "s": {"type": "string", "maxLength": 10, "x-grounded": "number"}
    }}));
    let mut ev = Evidence::new(true);
    read(&mut ev, "a", "timeout = 1.4e1, retries = 140");
    assert!(g.check(&json!({"n": 14, "s": "14.0"}), &ev).is_ok());
    assert!(g.check(&json!({"n": 14.0}), &ev).is_ok());
    assert!(g.check(&json!({"n": 40}), &ev).is_err(), "140 holds no 40");
    assert!(g.check(&json!({"n": 1}), &ev).is_err());
    let u = g.check(&json!({"s": "fourteen"}), &ev).unwrap_err();
    assert!(u[0].violation.message.contains("not a number"));
}

#[test]
fn a_quote_must_come_from_the_source_it_cites() {
    let g = plan(json!({"type": "object", "properties": {
        "findings": {"type": "array", "maxItems": 3, "items": {
            "type": "object", "properties": {
                "quote": {"type": "string", "maxLength": 100, "x-grounded": "text"},
                "source_ids": {"type": "array", "maxItems": 3,
                    "items": {"type": "string", "maxLength": 64, "x-grounded": "source"}}
            }
        }}
    }}));
    let mut ev = Evidence::new(false);
    read(&mut ev, "README.md", "Tidepool stores tides.");
    read(&mut ev, "LICENSE", "MIT License");
    let ok =
        json!({"findings": [{"quote": "stores tides", "source_ids": ["LICENSE", "README.md"]}]});
    assert!(g.check(&ok, &ev).is_ok());
    let wrong = json!({"findings": [{"quote": "stores tides", "source_ids": ["LICENSE"]}]});
    let u = g.check(&wrong, &ev).unwrap_err();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].violation.path, "/findings/0/quote");
    assert!(u[0].repair.contains("`LICENSE`"), "{}", u[0].repair);
    let unread =
        json!({"findings": [{"quote": "stores tides", "source_ids": ["src/../README.md"]}]});
    let u = g.check(&unread, &ev).unwrap_err();
    assert_eq!(u[0].violation.path, "/findings/0/source_ids/0");
    assert!(u[0].violation.message.contains("`..`"));
}

#[test]
fn refs_and_options_are_followed() {
    // What schemars writes for `Option<Finding>` inside a list.
    let g = plan(json!({
        "type": "object",
        "properties": {"best": {"anyOf": [{"$ref": "#/$defs/F"}, {"type": "null"}]}},
        "$defs": {"F": {"type": "object", "properties": {
            "path": {"type": "string", "maxLength": 50, "x-grounded": "source"}
        }}}
    }));
    let mut ev = Evidence::new(false);
    read(&mut ev, "a.rs", "fn main() {}");
    assert!(g.check(&json!({"best": {"path": "a.rs"}}), &ev).is_ok());
    assert!(g.check(&json!({"best": null}), &ev).is_ok());
    assert!(g.check(&json!({"best": {"path": "b.rs"}}), &ev).is_err());
}

#[test]
fn misuses_are_errors_at_their_pointer() {
    let e = errors(
        json!({"type": "object", "properties": {"a": {"type": "string", "x-grounded": "txt"}}}),
    );
    assert_eq!(e[0].pointer, "/properties/a/x-grounded");
    assert!(
        e[0].message.contains("did you mean `text`"),
        "{}",
        e[0].message
    );
    let e = errors(
        json!({"type": "object", "properties": {"a": {"type": "boolean", "x-grounded": "text"}}}),
    );
    assert!(e[0].message.contains("on a boolean"), "{}", e[0].message);
    let e = errors(
        json!({"type": "object", "properties": {"a": {"type": "object", "x-grounded": "text"}}}),
    );
    assert!(e[0].message.contains("on a object"), "{}", e[0].message);
    let e = errors(
        json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "x-grounded": "text"}}}),
    );
    assert!(e[0].message.contains("enum"), "{}", e[0].message);
    let e = errors(
        json!({"type": "object", "properties": {"a": {"type": "integer", "x-grounded": "source"}}}),
    );
    assert!(
        e[0].message.contains("source id is a string"),
        "{}",
        e[0].message
    );
    let e = errors(json!({"type": "object", "properties": {"a": {"x-grounded": 3}}}));
    assert!(
        e[0].message.contains("unknown grounding kind 3"),
        "{}",
        e[0].message
    );
    let e = errors(
        json!({"$defs": {"B": {"type": "boolean", "x-grounded": "text"}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/B"}}}),
    );
    assert_eq!(e[0].pointer, "/$defs/B/x-grounded");
}

#[test]
fn every_absent_value_is_reported_against_much_evidence() {
    // 1 MB of evidence in 64 results; 20 grounded values, none of which occurs.
    let g = plan(
        json!({"type": "object", "properties": {"v": {"type": "array", "maxItems": 20,
        "items": {"type": "string", "maxLength": 50, "x-grounded": "text"}}}}),
    );
    let mut ev = Evidence::new(false);
    let chunk = "lorem ipsum dolor sit amet ".repeat(16 * 1024 / 27);
    for i in 0..64 {
        read(&mut ev, &format!("f{i}"), &chunk);
    }
    // Lower-cased ASCII keeps its length: one normalized copy, with two marks per word and
    // the end of each piece, no more.
    let words = chunk.split_whitespace().count();
    assert_eq!(
        ev.held_bytes(),
        64 * (chunk.trim_end().len() + 2 * words + 1)
    );
    let vals: Vec<String> = (0..20).map(|i| format!("absent value {i}")).collect();
    let u = g.check(&json!({"v": vals}), &ev).unwrap_err();
    assert_eq!(u.len(), 20);
}

#[test]
fn refs_that_fan_out_do_not_blow_up_the_walk() {
    // Each level refers to the next ten times: 10^8 paths from a schema of a few lines.
    let mut defs = serde_json::Map::new();
    for level in 0..8 {
        let props: serde_json::Map<String, Value> = (0..10)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"$ref": format!("#/$defs/L{}", level + 1)}),
                )
            })
            .collect();
        defs.insert(
            format!("L{level}"),
            json!({"type": "object", "properties": props}),
        );
    }
    defs.insert("L8".into(), json!({"type": "string", "maxLength": 5}));
    let plain = json!({"$ref": "#/$defs/L0", "$defs": defs.clone()});
    let t = std::time::Instant::now();
    assert_eq!(Grounding::of_schema(&plain), Ok(None));
    defs.insert(
        "L8".into(),
        json!({"type": "string", "maxLength": 5, "x-grounded": "text"}),
    );
    let grounded = json!({"$ref": "#/$defs/L0", "$defs": defs});
    let e = Grounding::of_schema(&grounded).unwrap_err();
    assert!(e[0].message.contains("too many"), "{}", e[0].message);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn a_keyword_the_check_cannot_reach_is_refused_not_ignored() {
    for (schema, at) in [
        (
            json!({"type": "object", "additionalProperties": {"type": "string", "x-grounded": "text"}}),
            "/additionalProperties/x-grounded",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}},
                   "if": {"properties": {"a": {"type": "string", "x-grounded": "text"}}}}),
            "/if/properties/a/x-grounded",
        ),
        (
            // A recursive tree: deeper levels would go unchecked.
            json!({"$ref": "#/$defs/N", "$defs": {"N": {"type": "object", "properties": {
                "path": {"type": "string", "x-grounded": "source"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}}}),
            "/$defs/N/properties/children/items/$ref",
        ),
    ] {
        let e = errors(schema);
        assert!(e.iter().any(|x| x.pointer == at), "{at}: {e:?}");
    }
}

#[test]
fn options_nullable_lists_and_refs_are_grounded() {
    // `Option<Vec<String>>`, a `$ref` beside the keyword, and an `Option`-wrapped pair.
    let g = plan(json!({"type": "object", "properties": {
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "x-grounded": "text"},
        "file": {"$ref": "#/$defs/Path", "x-grounded": "source"},
        "quote": {"anyOf": [{"type": "string", "x-grounded": "text"}, {"type": "null"}]}
    }, "$defs": {"Path": {"type": "string", "maxLength": 50}}}));
    let mut ev = Evidence::new(false);
    read(&mut ev, "a.md", "alpha beta");
    read(&mut ev, "b.md", "gamma");
    assert!(g
        .check(
            &json!({"tags": ["alpha"], "file": "a.md", "quote": "beta"}),
            &ev
        )
        .is_ok());
    assert!(g
        .check(&json!({"tags": null, "file": "a.md", "quote": null}), &ev)
        .is_ok());
    // The quote is paired with the file even through the `Option`.
    let u = g
        .check(&json!({"file": "b.md", "quote": "beta"}), &ev)
        .unwrap_err();
    assert_eq!(u[0].violation.path, "/quote");
    // A number is grounded as a number, never as text.
    let e = errors(
        json!({"type": "object", "properties": {"n": {"type": "integer", "x-grounded": "text"}}}),
    );
    assert!(
        e[0].message.contains("grounded as `\"number\"`"),
        "{}",
        e[0].message
    );
}

/// One `x-grounded` property `v` of `kind`, on a string or (for numbers) a number too.
fn one(kind: &str) -> Grounding {
    let ty = if kind == "number" {
        json!(["string", "number"])
    } else {
        json!("string")
    };
    plan(json!({"type": "object", "properties": {
        "v": {"type": ty, "maxLength": 200, "x-grounded": kind}
    }}))
}

fn holds(g: &Grounding, ev: &Evidence, v: Value) -> bool {
    g.check(&json!({ "v": v }), ev).is_ok()
}

#[test]
fn text_is_matched_as_whole_tokens() {
    let g = one("text");
    let mut ev = Evidence::new(false);
    read(
        &mut ev,
        "Cargo.toml",
        "[package]\nname = \"tidepool\"\nversion = \"0.7.3\"\nrust = \"1.47.1\"\nretries = 140\nids = 1,000 tide-pool tide_pool tide.pool ab,cd\nrelease v2.5.0 (2024-01-05)",
    );
    for yes in [
        "tidepool",
        "0.7.3",
        "\"0.7.3\"",
        "1.47.1",
        "140",
        "retries = 140",
        "1,000",
        "tide-pool",
        "TIDE_POOL",
        "tide.pool",
        "2.5.0",
        "v2.5.0",
        "2024-01-05",
        "version = \"0.7.3\" rust",
    ] {
        assert!(holds(&g, &ev, json!(yes)), "{yes} should be grounded");
    }
    for no in [
        // Inside a version, at either end or in the middle.
        "0.7",
        "7.3",
        "3",
        "0",
        "1.4",
        "1.47",
        "47.1",
        ".7.3",
        "0.7.",
        "1.47.10",
        // Inside a word, a number, a compound.
        "tide",
        "pool",
        "idepoo",
        "14",
        "40",
        "1",
        "000",
        "ab",
        "cd",
        "2024",
        "01-05",
        "tide pool",
        "ol = \"0.7.3\"",
        "retries = 14",
        // Nothing at all.
        "",
        " ",
        "\t\n ",
    ] {
        assert!(!holds(&g, &ev, json!(no)), "{no:?} should not be grounded");
    }
    let u = g.check(&json!({"v": "  "}), &ev).unwrap_err();
    assert!(u[0].violation.message.contains("empty or blank"), "{u:?}");
    // A version is text: as a number it is refused for what it is.
    let u = one("number")
        .check(&json!({"v": "1.47.1"}), &ev)
        .unwrap_err();
    assert!(u[0].violation.message.contains("not a number"), "{u:?}");
}

#[test]
fn numbers_are_exact_and_read_whole() {
    let g = one("number");
    let mut ev = Evidence::new(true);
    read(
        &mut ev,
        "a",
        "id = 9007199254740993; big = 18446744073709551617; tiny = 1e-400; huge = 1e400\n\
         count = 1,000; pi = 3,25; t = 1.4e1; version 1.63.0; 2024-01-05; port 8080",
    );
    for yes in [
        json!(9007199254740993u64),
        json!("9007199254740993"),
        json!("18446744073709551617"),
        json!("1e-400"),
        json!("10e-401"),
        json!("1e400"),
        json!(1000),
        json!("1,000"),
        json!("1000.0"),
        json!(14),
        json!(14.0),
        json!("14"),
        json!("1.4E+1"),
        json!(8080),
        json!(" 8080 "),
    ] {
        assert!(holds(&g, &ev, yes.clone()), "{yes} should be grounded");
    }
    // A JSON number past what serde_json holds exactly is compared as it is held (and as a
    // reader of the output gets it): not the evidence's integer.
    let past: Value = serde_json::from_str("18446744073709551617").unwrap();
    for no in [
        json!(9007199254740992u64),
        json!(9007199254740994u64),
        past,
        json!(0),
        json!("1e-401"),
        json!("1e401"),
        json!(1),
        json!(0.0),
        json!(3),
        json!(3.25),
        json!(1.63),
        json!(2024),
        json!(-14),
        json!(80),
    ] {
        assert!(!holds(&g, &ev, no.clone()), "{no} should not be grounded");
    }
    for not_a_number in [
        "1.63.0",
        "3,14",
        "1,00",
        "inf",
        "NaN",
        "0x1f",
        "",
        "1e99999999999999999",
    ] {
        let u = g.check(&json!({ "v": not_a_number }), &ev).unwrap_err();
        assert!(
            u[0].violation.message.contains("not a number"),
            "{not_a_number}: {u:?}"
        );
    }
}

#[test]
fn a_text_must_occur_within_one_piece() {
    let g = one("text");
    let mut ev = Evidence::new(false);
    // Two lines a search showed from one file are two pieces.
    let prov = Provenance {
        sources: vec![],
        body: Body::Excerpts(vec![
            (Some("a.md".into()), "The budget is charged".into()),
            (Some("a.md".into()), "upward to the root.".into()),
        ]),
    };
    ev.add_result("a.md:3: …\na.md:90: …", None, &prov);
    // A read's range is one piece: its lines meet.
    read(&mut ev, "b.md", "Tidepool stores\ntides for\n14 days.");
    assert!(holds(&g, &ev, json!("the budget is charged")));
    assert!(holds(&g, &ev, json!("upward to the root")));
    assert!(!holds(&g, &ev, json!("charged upward")));
    assert!(!holds(
        &g,
        &ev,
        json!("budget is charged upward to the root")
    ));
    assert!(holds(&g, &ev, json!("stores tides for 14 days")));
    // Input strings, and two results, are pieces of their own too.
    ev.add_input(&json!({"a": "left", "b": "right"}));
    assert!(!holds(&g, &ev, json!("left right")));
    assert!(!holds(&g, &ev, json!("root. tidepool")));
}

#[test]
fn a_sub_agents_output_is_evidence_only_where_its_contract_grounded_it() {
    // The child: grounds `version` and `asked` as text, `port` as a number; its `note` is
    // its model's words.
    let child = plan(json!({"type": "object", "properties": {
        "version": {"type": "string", "maxLength": 20, "x-grounded": "text"},
        "port": {"type": "integer", "x-grounded": "number"},
        "asked": {"type": "string", "maxLength": 40, "x-grounded": "text"},
        "note": {"type": "string", "maxLength": 40}
    }}));
    let mut cev = Evidence::new(true);
    cev.add_input(&json!({"q": "confirm release 9.9.9"}));
    read(&mut cev, "Cargo.toml", "version = \"0.7.3\"\nport = 8080");
    let out = json!({"version": "0.7.3", "port": 8080,
        "asked": "9.9.9", "note": "the real version is 1.63.0 on port 9090"});
    assert!(child.check(&out, &cev).is_ok());
    let up = child.carried(&out, &cev);
    assert_eq!(up.from_input, ["/asked"]);
    let text = |v: &str| up.values.iter().find(|c| c.value == v).cloned();
    assert_eq!(text("0.7.3").unwrap().sources, ["Cargo.toml"]);
    assert_eq!(text("8080").unwrap().sources, ["Cargo.toml"]);
    assert_eq!(text("9.9.9").unwrap().sources, Vec::<String>::new());
    assert!(text("the real version is 1.63.0 on port 9090").is_none());

    // The parent reads the child's output as a tool result.
    let parent = plan(json!({"type": "object", "properties": {
        "v": {"type": "string", "maxLength": 60, "x-grounded": "text"},
        "n": {"type": "integer", "x-grounded": "number"},
        "src": {"type": "string", "maxLength": 40, "x-grounded": "source"}
    }}));
    let mut pev = Evidence::new(true);
    // The sources travel with the values: the parent has consulted Cargo.toml through it.
    let prov = Provenance {
        sources: vec![],
        body: Body::Child(up.values.clone()),
    };
    pev.add_result(&out.to_string(), Some(&out), &prov);
    for ok in [
        json!({"v": "0.7.3", "src": "Cargo.toml"}),
        json!({"n": 8080}),
        json!({"v": "9.9.9"}),
    ] {
        assert!(parent.check(&ok, &pev).is_ok(), "{ok}");
    }
    for bad in [
        json!({"v": "1.63.0"}),
        json!({"v": "the real version is 1.63.0 on port 9090"}),
        json!({"n": 9090}),
        json!({"v": "version"}),
        json!({"v": "note"}),
    ] {
        assert!(parent.check(&bad, &pev).is_err(), "{bad}");
    }
    // A pair in the parent: the child's value counts for the source it was found in.
    let pair = plan(json!({"type": "object", "properties": {
        "file": {"type": "string", "maxLength": 40, "x-grounded": "source"},
        "quote": {"type": "string", "maxLength": 40, "x-grounded": "text"}
    }}));
    assert!(pair
        .check(&json!({"file": "Cargo.toml", "quote": "0.7.3"}), &pev)
        .is_ok());
    // A child whose contract grounds nothing carries nothing up.
    let mut none = Evidence::new(true);
    let prov = Provenance {
        sources: vec![],
        body: Body::Child(Vec::new()),
    };
    none.add_result(&out.to_string(), Some(&out), &prov);
    assert!(parent.check(&json!({"v": "0.7.3"}), &none).is_err());
    assert!(parent.check(&json!({"n": 8080}), &none).is_err());
}

#[test]
fn a_refused_value_points_at_the_lines_read_that_mention_its_property() {
    let g = plan(json!({"type": "object", "properties": {
        "version": {"type": "string", "maxLength": 20, "x-grounded": "text"},
        "crate_name": {"type": "string", "maxLength": 40, "x-grounded": "text"},
        "timeout": {"type": "integer", "x-grounded": "number",
            "description": "The request deadline, in seconds."}
    }}));
    let mut ev = Evidence::for_grounding(&g);
    read(
        &mut ev,
        "Cargo.toml",
        "[package]\nname = \"tidepool\"\nversion = \"0.7.3\"\nrust-version = \"1.62\"\n",
    );
    read(
        &mut ev,
        "config.md",
        "The request deadline is 30 seconds by default.\n",
    );
    ev.add_input(&json!({"q": "What version is it?"}));
    let u = g
        .check(
            &json!({"version": "1.62.0", "crate_name": "tide", "timeout": 60}),
            &ev,
        )
        .unwrap_err();
    let at = |p: &str| u.iter().find(|x| x.violation.path == p).unwrap();
    assert_eq!(
        at("/version").repair,
        "`/version` = \"1.62.0\" occurs in nothing this run has read; read the file that holds it, or correct the value. Lines this run read that may hold it:\n    Cargo.toml: version = \"0.7.3\""
    );
    // A part of the property's name (`name`), and a word of its description (`deadline`).
    assert!(
        at("/crate_name")
            .repair
            .ends_with("\n    Cargo.toml: name = \"tidepool\""),
        "{}",
        at("/crate_name").repair
    );
    assert!(
        at("/timeout")
            .repair
            .ends_with("\n    config.md: The request deadline is 30 seconds by default."),
        "{}",
        at("/timeout").repair
    );
    // What may go up to a parent or a trace quotes nothing.
    for x in &u {
        assert!(!x.violation.message.contains("Cargo.toml"), "{x:?}");
    }
    // A name inside a longer one: `timeout_seconds` in `request_timeout_seconds`.
    let g2 = plan(json!({"type": "object", "properties": {
        "timeout_seconds": {"type": "integer", "x-grounded": "number"}
    }}));
    let mut ini = Evidence::for_grounding(&g2);
    read(
        &mut ini,
        "settings.ini",
        "[http]\nkeepalive = on\nrequest_timeout_seconds = 45\n",
    );
    let u = g2.check(&json!({"timeout_seconds": 30}), &ini).unwrap_err();
    assert!(
        u[0].repair
            .ends_with("\n    settings.ini: request_timeout_seconds = 45"),
        "{}",
        u[0].repair
    );
    // Without pointers, the repair quotes nothing.
    let mut plain = Evidence::for_run(&g, false);
    read(&mut plain, "Cargo.toml", "version = \"0.7.3\"\n");
    let u = g.check(&json!({"version": "1.62.0"}), &plain).unwrap_err();
    assert!(!u[0].repair.contains("0.7.3"), "{}", u[0].repair);
    // Bounded: at most three lines, each short.
    let mut many = Evidence::for_grounding(&g);
    let lines: String = (0..1000)
        .map(|i| format!("version {i} {}\n", "x".repeat(i % 300)))
        .collect();
    read(&mut many, "big.txt", &lines);
    let u = g.check(&json!({"version": "1.62.0"}), &many).unwrap_err();
    let quoted: Vec<&str> = u[0].repair.lines().skip(1).collect();
    assert_eq!(quoted.len(), 3, "{}", u[0].repair);
    assert!(quoted.iter().all(|l| l.len() < 200), "{quoted:?}");
}

#[test]
fn much_evidence_is_searched_fast() {
    // 4 MB of one repeated word with a periodic near-miss: the search stays linear.
    let g = one("text");
    let mut ev = Evidence::new(false);
    let chunk = "ab ".repeat(200_000);
    for i in 0..7 {
        read(&mut ev, &format!("f{i}"), &chunk);
    }
    let t = std::time::Instant::now();
    let needle = format!("{}abc", "ab ".repeat(60));
    for _ in 0..20 {
        assert!(!holds(&g, &ev, json!(needle)));
    }
    assert!(holds(&g, &ev, json!("ab ab ab")));
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        t.elapsed()
    );
}
