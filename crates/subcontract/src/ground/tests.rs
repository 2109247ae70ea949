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
    // Lower-cased ASCII keeps its length: one normalized copy, no more.
    assert_eq!(ev.held_bytes(), 64 * chunk.trim_end().len());
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
