//! Grading one run against a case's [`Expect`]: every grader that fails says why, in one
//! line that names its pointer and never quotes more than a short piece of the output.

use serde_json::Value;

use super::cases::Expect;

/// The longest piece of an output a grader message quotes.
const QUOTE_CHARS: usize = 80;

fn quote(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= QUOTE_CHARS {
        s
    } else {
        let cut: String = s.chars().take(QUOTE_CHARS).collect();
        format!("{cut}…")
    }
}

/// The graders of `expect` that fail for a run that ended `outcome` with `output` (the
/// validated output, when it completed), each as one message. The judge is not graded here
/// (it is a run of its own). Empty: every grader holds.
pub fn grade(expect: &Expect, outcome: &str, output: Option<&Value>) -> Vec<String> {
    let mut failed = Vec::new();
    let want = expect.expected_outcome();
    if outcome != want {
        failed.push(format!("outcome: expected {want}, got {outcome}"));
    }
    let has_field_graders = expect.pointers().next().is_some();
    let Some(output) = output else {
        if has_field_graders && outcome == want {
            failed.push("no output to grade".to_string());
        }
        return failed;
    };
    let at = |p: &str| -> Result<&Value, String> {
        output
            .pointer(p)
            .ok_or_else(|| format!("{}: absent from the output", shown(p)))
    };
    for (p, v) in &expect.fields {
        match at(p) {
            Ok(got) if got == v => {}
            Ok(got) => failed.push(format!(
                "fields {}: expected {}, got {}",
                shown(p),
                quote(v),
                quote(got)
            )),
            Err(e) => failed.push(format!("fields {e}")),
        }
    }
    for (p, subs) in &expect.contains {
        match at(p) {
            Ok(got) => {
                let text = match got {
                    Value::String(s) => s.to_lowercase(),
                    other => other.to_string().to_lowercase(),
                };
                for s in subs {
                    if !text.contains(&s.to_lowercase()) {
                        failed.push(format!(
                            "contains {}: no {} in {}",
                            shown(p),
                            quote(&Value::String(s.clone())),
                            quote(got)
                        ));
                    }
                }
            }
            Err(e) => failed.push(format!("contains {e}")),
        }
    }
    for (p, re) in &expect.matches {
        match at(p) {
            Ok(Value::String(s)) if re.is_match(s) => {}
            // A list is graded item by item: a regex only ever matches text, so an array at
            // the pointer can only mean "every item" (and an empty list matches nothing).
            Ok(Value::Array(items))
                if !items.is_empty()
                    && items
                        .iter()
                        .all(|i| i.as_str().is_some_and(|s| re.is_match(s))) => {}
            Ok(got) => failed.push(format!(
                "matches {}: {} does not match /{}/",
                shown(p),
                quote(got),
                re.as_str()
            )),
            Err(e) => failed.push(format!("matches {e}")),
        }
    }
    for (p, lo, hi) in &expect.range {
        match at(p) {
            Ok(got) => match got.as_f64() {
                Some(n) if n >= *lo && n <= *hi => {}
                _ => failed.push(format!(
                    "range {}: {} is not a number in [{lo}, {hi}]",
                    shown(p),
                    quote(got)
                )),
            },
            Err(e) => failed.push(format!("range {e}")),
        }
    }
    for (p, allowed) in &expect.one_of {
        match at(p) {
            Ok(got) if allowed.contains(got) => {}
            Ok(got) => failed.push(format!(
                "one_of {}: {} is not one of {}",
                shown(p),
                quote(got),
                quote(&Value::Array(allowed.clone()))
            )),
            Err(e) => failed.push(format!("one_of {e}")),
        }
    }
    failed
}

/// A pointer as messages show it (the empty pointer names the whole output).
fn shown(p: &str) -> String {
    if p.is_empty() {
        "(the whole output)".to_string()
    } else {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::cases::parse_cases;
    use serde_json::json;

    fn expect(e: Value) -> Expect {
        let line = json!({"id": "x", "input": {}, "expect": e}).to_string();
        parse_cases("t", &line).unwrap().remove(0).expect
    }

    #[test]
    fn every_grader_passes_and_fails() {
        let out = json!({"name": "Tokio Runtime", "n": 4, "tag": "b", "id": "ab-12"});
        let pass = expect(json!({
            "fields": {"/n": 4}, "contains": {"/name": ["tokio", "RUNTIME"]},
            "matches": {"/id": "^[a-z]+-\\d+$"}, "range": {"/n": [1, 4]}, "one_of": {"/tag": ["a", "b"]}
        }));
        assert_eq!(grade(&pass, "completed", Some(&out)), Vec::<String>::new());
        let fail = expect(json!({
            "fields": {"/n": 5, "/gone": 1}, "contains": {"/name": ["async-std"]},
            "matches": {"/id": "^\\d+$"}, "range": {"/n": [5, 9]}, "one_of": {"/tag": ["c"]}
        }));
        let got = grade(&fail, "completed", Some(&out));
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(got[0], "fields /n: expected 5, got 4");
        assert_eq!(got[1], "fields /gone: absent from the output");
        assert_eq!(
            got[2],
            "contains /name: no \"async-std\" in \"Tokio Runtime\""
        );
        assert_eq!(got[3], "matches /id: \"ab-12\" does not match /^\\d+$/");
        assert_eq!(got[4], "range /n: 4 is not a number in [5, 9]");
        assert_eq!(got[5], "one_of /tag: \"b\" is not one of [\"c\"]");
    }

    #[test]
    fn matches_on_a_list_holds_for_every_item() {
        let e = expect(json!({"matches": {"/tags": "^(a|b)"}}));
        assert!(grade(&e, "completed", Some(&json!({"tags": ["a1", "b2"]}))).is_empty());
        for bad in [
            json!({"tags": ["a1", "c"]}),
            json!({"tags": []}),
            json!({"tags": ["a", 1]}),
        ] {
            let got = grade(&e, "completed", Some(&bad));
            assert_eq!(got.len(), 1, "{bad}: {got:?}");
            assert!(got[0].starts_with("matches /tags: "), "{got:?}");
        }
    }

    #[test]
    fn outcomes_are_graded_and_a_missing_output_fails_field_graders() {
        let e = expect(json!({"outcome": "budget_exhausted"}));
        assert!(grade(&e, "budget_exhausted", None).is_empty());
        assert_eq!(
            grade(&e, "completed", Some(&json!({}))),
            ["outcome: expected budget_exhausted, got completed"]
        );
        let e = expect(json!({"fields": {"/a": 1}}));
        assert_eq!(
            grade(&e, "completed", None),
            ["no output to grade".to_string()]
        );
        assert_eq!(
            grade(&e, "max_turns", None),
            ["outcome: expected completed, got max_turns".to_string()]
        );
    }
}
