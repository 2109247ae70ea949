//! What grounded outputs cost: the grounding check of one output against 1 MB of evidence,
//! building that evidence from tool results, the memory it holds, and the output pipeline
//! beside it (S4 of `bench_peers`: size, schema, typed rules) for scale.
//!
//! ```sh
//! cargo run --release --example bench_grounding
//! cargo run --release --example bench_grounding -- --reps 7 --json /tmp/grounding.json
//! ```
//!
//! The evidence is 1 MB of code-like text in five tool results of 200,000 characters (the
//! default `max_tool_result_chars_per_turn`), each from its own source. The output is the
//! findings contract of `specs/research_topic.toml` with five findings whose claims (≤ 300
//! characters) are grounded as text and whose `source_ids` as sources: ten grounded values.
//! "present" outputs quote the evidence (the scan stops at the match); "absent" ones do not
//! (every piece is scanned to its end: the worst case). Values: median [min .. max] over reps.

use std::time::Instant;

use serde_json::{json, Value};
use subcontract::ground::{Evidence, Grounding};
use subcontract::spec::load_spec;
use subcontract::{SubAgentSpec, ToolOutput};

/// Five results of 200,000 characters of code-like lines, each from `src/file_N.rs`.
fn results() -> Vec<(String, ToolOutput)> {
    let mut rng = fastrand::Rng::with_seed(7);
    let words = [
        "let", "fn", "match", "self", "value", "budget", "return", "Some", "None", "Ok", "config",
        "timeout", "parse", "client", "request", "error", "into", "map",
    ];
    (0..5)
        .map(|f| {
            let mut text = String::with_capacity(200_000);
            let mut line = 0;
            while text.len() < 199_900 {
                line += 1;
                text.push_str("    ");
                for _ in 0..8 {
                    text.push_str(words[rng.usize(..words.len())]);
                    text.push(' ');
                }
                text.push_str(&format!("{}; // {line}\n", rng.u32(..100_000)));
            }
            text.truncate(200_000);
            let id = format!("src/file_{f}.rs");
            let out = ToolOutput::text(text).with_source(id.clone());
            (id, out)
        })
        .collect()
}

/// The findings output: five claims, each quoting (or not) 200 characters of one result.
fn output(results: &[(String, ToolOutput)], present: bool) -> Value {
    let findings: Vec<Value> = results
        .iter()
        .map(|(id, out)| {
            let claim = if present {
                // From the middle of the result, so the scan goes half way; whole words, as
                // a quote is matched.
                let c = &out.content;
                let start = c[c.len() / 2..]
                    .find(' ')
                    .map_or(0, |i| c.len() / 2 + i + 1);
                let end = c[..start + 200].rfind(' ').unwrap_or(start + 200);
                c[start..end].to_string()
            } else {
                format!("{} zebra-quokka {}", "the budget is ".repeat(10), id)
            };
            json!({"claim": claim, "source_ids": [id]})
        })
        .collect();
    json!({"findings": findings, "gaps": []})
}

fn summarize(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    json!({"median": v[v.len() / 2], "min": v[0], "max": v[v.len() - 1]})
}

fn per(iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters.min(20) {
        f();
    }
    let t0 = Instant::now();
    for _ in 0..iters {
        f();
    }
    t0.elapsed().as_secs_f64() * 1e6 / iters as f64
}

fn fmt(v: &Value) -> String {
    format!(
        "{:.1} [{:.1} .. {:.1}]",
        v["median"].as_f64().unwrap_or(0.0),
        v["min"].as_f64().unwrap_or(0.0),
        v["max"].as_f64().unwrap_or(0.0)
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let reps: usize = get("--reps").and_then(|r| r.parse().ok()).unwrap_or(5);

    // The shipped research_topic with its claims grounded as text too (it ships grounding
    // only its source_ids).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped: SubAgentSpec<Value, Value> =
        load_spec(root.join("specs/research_topic.toml")).expect("the shipped spec loads");
    let mut schema = shipped.output_contract().schema().as_ref().clone();
    schema["properties"]["findings"]["items"]["properties"]["claim"]["x-grounded"] = json!("text");
    let grounding = Grounding::of_schema(&schema)
        .expect("valid")
        .expect("grounds values");
    let plain = SubAgentSpec::dynamic("plain", json!({"type": "object"}), {
        let mut s = schema.clone();
        s["properties"]["findings"]["items"]["properties"]["claim"]
            .as_object_mut()
            .unwrap()
            .remove("x-grounded");
        s["properties"]["findings"]["items"]["properties"]["source_ids"]["items"]
            .as_object_mut()
            .unwrap()
            .remove("x-grounded");
        s
    })
    .description("d")
    .system("s")
    .build()
    .expect("a spec");

    let results = results();
    let evidence_bytes: usize = results.iter().map(|(_, o)| o.content.len()).sum();
    let build = || {
        let mut ev = Evidence::for_grounding(&grounding);
        ev.add_input(&json!({"question": "Where is the budget charged?"}));
        for (_, o) in &results {
            ev.add_result(&o.content, o.structured.as_ref(), o.provenance());
        }
        ev
    };
    let ev = build();
    let (present, absent) = (output(&results, true), output(&results, false));
    assert!(
        grounding.check(&present, &ev).is_ok(),
        "the quotes are grounded"
    );
    assert_eq!(
        grounding.check(&absent, &ev).map_err(|u| u.len()),
        Err(5),
        "the invented claims are not"
    );
    let present_text = present.to_string();
    assert!(plain.validate_output_json(&present_text).is_ok());

    let mut figures: [Vec<f64>; 4] = Default::default();
    for _ in 0..reps {
        figures[0].push(per(5, || drop(std::hint::black_box(build()))) / 1000.0);
        figures[1].push(per(200, || assert!(grounding.check(&present, &ev).is_ok())));
        figures[2].push(per(50, || assert!(grounding.check(&absent, &ev).is_err())));
        figures[3].push(per(2000, || {
            assert!(plain.validate_output_json(&present_text).is_ok())
        }));
    }
    let [b, p, a, s4] = figures;
    let res = json!({
        "evidence_bytes": evidence_bytes,
        "held_bytes": ev.held_bytes(),
        "output_bytes": present_text.len(),
        "grounded_values": 10,
        "build_evidence_ms": summarize(b),
        "check_present_us": summarize(p),
        "check_absent_us": summarize(a),
        "output_pipeline_us": summarize(s4),
    });
    println!("| measure | value |\n|---|---|");
    println!(
        "| evidence | {} bytes in 5 results; {} bytes held, normalized |",
        res["evidence_bytes"], res["held_bytes"]
    );
    println!(
        "| building it (NFKC, case fold, numbers), ms | {} |",
        fmt(&res["build_evidence_ms"])
    );
    println!(
        "| grounding check, 10 values found, us / output | {} |",
        fmt(&res["check_present_us"])
    );
    println!(
        "| grounding check, 5 of 10 absent (full scan), us / output | {} |",
        fmt(&res["check_absent_us"])
    );
    println!(
        "| output pipeline of the same {}-byte output (size, schema), us | {} |",
        res["output_bytes"],
        fmt(&res["output_pipeline_us"])
    );
    if let Some(path) = get("--json") {
        std::fs::write(&path, serde_json::to_string_pretty(&res).expect("JSON")).expect("write");
    }
}
