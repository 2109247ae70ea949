//! The first-hour example (`examples/first_hour/main.rs`): it runs offline and prints what it
//! says, and it names no crate but `subcontract`, `tokio` and `serde_json`, so a project that
//! depends on those three alone can copy it.

// Formatted as the example it is (examples/first_hour/rustfmt.toml), not as a module here.
#[rustfmt::skip]
#[path = "../../examples/first_hour/main.rs"]
#[allow(dead_code)] // its `main` is the example's, not this binary's
mod example;

const SOURCE: &str = include_str!("../../examples/first_hour/main.rs");

#[tokio::test]
async fn first_hour_example_runs_offline_and_prints_its_answer() {
    let out = example::report().await.expect("the example runs");
    let pinned = {
        // The version the example's own tool reads, looked up here independently.
        let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"))
            .expect("Cargo.lock");
        let at = lock
            .find("name = \"tokio\"\nversion = \"")
            .expect("tokio is locked");
        lock[at..].lines().nth(1).expect("a version line")["version = \"".len()..]
            .trim_end_matches('"')
            .to_string()
    };
    assert_eq!(
        out,
        format!(
            "root.dependency_version-1 completed in 3 turns: Text {{ text: \"tokio, at the \
             version Cargo.lock pins\" }}\ntokio {pinned}\n"
        )
    );
}

/// The first segment of every path in `code` that starts a path (not one after `::`), with
/// comments and string literals left out.
fn path_roots(code: &str) -> Vec<String> {
    let mut plain = String::new();
    for line in code.lines() {
        // Line comments (doc comments included); the example has no `//` inside a string.
        plain.push_str(line.split("//").next().unwrap_or(""));
        plain.push('\n');
    }
    // String literals: everything between unescaped quotes (a quote as a `char` is not one).
    let plain = plain.replace("'\"'", "' '");
    let mut no_strings = String::new();
    let (mut in_str, mut escaped) = (false, false);
    for c in plain.chars() {
        match (in_str, c) {
            (true, '\\') if !escaped => escaped = true,
            (true, '"') if !escaped => in_str = false,
            (true, _) => escaped = false,
            (false, '"') => in_str = true,
            (false, c) => no_strings.push(c),
        }
    }
    let bytes = no_strings.as_bytes();
    let mut roots = Vec::new();
    let mut i = 0;
    while let Some(at) = no_strings[i..].find("::") {
        let end = i + at;
        let mut start = end;
        while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            start -= 1;
        }
        // A segment after another `::`, or inside a `use` group's braces, is not a root.
        let before = no_strings[..start].trim_end();
        let in_group = {
            let open = before.rfind('{');
            let close = before.rfind('}');
            let stmt = before.rfind(';');
            open.is_some_and(|o| close.is_none_or(|c| c < o))
                && before[..open.unwrap_or(0)].trim_end().ends_with("::")
                && stmt.is_none_or(|s| s < open.unwrap_or(0))
        };
        if start < end && !before.ends_with("::") && !in_group {
            roots.push(no_strings[start..end].to_string());
        }
        i = end + 2;
    }
    roots
}

#[test]
fn first_hour_example_names_only_subcontract_tokio_and_serde_json() {
    assert!(!SOURCE.contains("extern crate"));
    let roots = path_roots(SOURCE);
    // Lower-case roots are crates or modules; upper-case ones are types (`ScriptStep::…`).
    let crates: std::collections::BTreeSet<&str> = roots
        .iter()
        .map(String::as_str)
        .filter(|r| r.starts_with(|c: char| c.is_ascii_lowercase()))
        .collect();
    let allowed = ["std", "subcontract", "tokio", "serde_json"];
    let others: Vec<&&str> = crates.iter().filter(|c| !allowed.contains(c)).collect();
    assert!(others.is_empty(), "the example names {others:?}");
    // And it does use the three, with the prelude and the macros.
    for c in ["subcontract", "tokio", "serde_json"] {
        assert!(crates.contains(c), "{c} not named: {crates:?}");
    }
    for used in [
        "use subcontract::{prelude::*",
        "#[tool]",
        "#[contract]",
        "#[tokio::main",
    ] {
        assert!(SOURCE.contains(used), "{used}");
    }
}

#[test]
fn path_roots_sees_through_groups_comments_and_strings() {
    let code =
        "use a::{b::C, d};\n// e::f\nlet s = \"g::h\";\nlet q = '\"';\n#[i::j]\nk::l::m(); X::y();";
    assert_eq!(path_roots(code), ["a", "i", "k", "X"]);
}

mod tool_names {
    use subcontract::prelude::*;

    /// Looks a query up.
    #[tool]
    async fn query(
        /// What to look up.
        #[validate(length(max = 40))]
        query: String,
    ) -> Result<String, String> {
        Ok(format!("found {query}"))
    }

    /// A `#[tool]` function stays a function, its name free for an argument or a variable
    /// elsewhere in the module; the tool is the type `QueryTool`.
    #[tokio::test]
    async fn a_tool_function_stays_a_function_and_its_name_stays_free() {
        let tool = QueryTool.into_tool();
        assert_eq!(tool.name(), "query");
        assert_eq!(tool.description(), "Looks a query up.");
        assert_eq!(tool.input_schema()["properties"]["query"]["maxLength"], 40);
        let found = query(String::from("tokio")).await.unwrap();
        let query = found;
        assert_eq!(query, "found tokio");
    }
}

/// A `main` returning `Result<(), Box<dyn Error>>`, as the README writes it, prints the error
/// a `?` hands it through `Debug`: each error a user's `main` meets reads as its sentence.
mod errors_read_as_sentences {
    use std::error::Error;
    use std::sync::Arc;

    use subcontract::model::{ModelError, ScriptStep, ScriptedModel};
    use subcontract::prelude::*;
    use subcontract::spec::load_spec_str;

    #[contract]
    #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Q {
        #[validate(length(max = 50))]
        q: String,
    }

    #[contract]
    #[derive(Serialize, Deserialize, JsonSchema, Validate)]
    #[serde(deny_unknown_fields)]
    struct Unbounded {
        answer: String,
    }

    /// What `main` prints for `e`, and what `e` says.
    fn printed(e: impl Error + 'static) -> (String, String) {
        let boxed: Box<dyn Error> = Box::new(e);
        (format!("{boxed:?}"), boxed.to_string())
    }

    fn assert_sentence(e: impl Error + 'static, says: &str) {
        let (debug, display) = printed(e);
        assert_eq!(debug, display);
        assert!(display.contains(says), "{display}");
    }

    #[tokio::test]
    async fn each_error_a_main_returns_prints_its_sentence() {
        let spec = SubAgentSpec::<Q, Q>::builder("ask")
            .description("Asks.")
            .tools(["read_fille"])
            .build()
            .expect("a bounded spec");
        let model = Arc::new(ScriptedModel::queue("scripted:e", vec![]));
        // A host build: a spec names a tool the host lacks.
        let host = Host::builder()
            .model(model.clone())
            .workspace(".")
            .spec(&spec)
            .build()
            .err()
            .expect("refused");
        assert_sentence(host, "did you mean `read_file`?");
        // A spec build: an unbounded output.
        let unbounded = SubAgentSpec::<Q, Unbounded>::builder("u")
            .description("Unbounded.")
            .build()
            .expect_err("refused");
        assert_sentence(unbounded, "answer");
        // A spec file.
        let load = load_spec_str(std::path::Path::new("x.toml"), "name = 5").expect_err("refused");
        assert_sentence(load, "x.toml");
        // A run that fails, its result taken with `?` (`into_result`).
        let spec = SubAgentSpec::<Q, Q>::builder("ask")
            .description("Asks.")
            .build()
            .expect("a spec");
        let host = Host::builder()
            .model(model)
            .build()
            .expect("a host")
            .build();
        let run = spec.run(&Q { q: "why".into() }, &host).await;
        let failure = run.error.clone().expect("the script is empty");
        assert_sentence(failure, "no more responses");
        let run_error = run.into_result().err().expect("a failed run");
        assert_sentence(run_error, "model_error");
        // The model's own error and an ask's.
        let model = Arc::new(ScriptedModel::queue(
            "scripted:ask",
            vec![ScriptStep::error(ModelError::Exhausted("out".into()))],
        ));
        let host = Host::builder()
            .model(model)
            .build()
            .expect("a host")
            .build();
        let ask = host.ask("Which?").await.expect_err("fails");
        assert_sentence(ask, "out");
        assert_sentence(ModelError::Config("no key".into()), "no key");
    }
}
