//! What a text answer holds: a JSON value (the whole text, or its one fenced block), and whether
//! that value is a tool call written as text (`{"name": …, "arguments": {…}}`), as small models
//! write them when the server's chat template does not turn them into real calls.

use serde_json::{Map, Value};

/// A JSON value found in a text answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// The value.
    pub(crate) value: Value,
    /// Whether it was inside a fenced code block (rather than the whole text).
    pub(crate) fenced: bool,
}

/// Why a text answer holds no single JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoJson {
    /// Neither the text nor any fenced block of it is JSON.
    None,
    /// More than one fenced block is JSON: which one is the answer is not ours to guess.
    Several(usize),
}

/// The JSON value a text answer holds: the whole text (trimmed) when it is one JSON document,
/// else the one fenced block (```` ```json ```` or ```` ``` ````) whose contents are JSON.
pub(crate) fn json_in_text(text: &str) -> Result<Found, NoJson> {
    let t = text.trim();
    if let Some(value) = parse(t) {
        return Ok(Found {
            value,
            fenced: false,
        });
    }
    let mut found = None;
    let mut n = 0;
    for block in fenced_blocks(t) {
        if let Some(value) = parse(block) {
            n += 1;
            if found.is_none() {
                found = Some(value);
            }
        }
    }
    match (n, found) {
        (1, Some(value)) => Ok(Found {
            value,
            fenced: true,
        }),
        (0, _) | (_, None) => Err(NoJson::None),
        (n, Some(_)) => Err(NoJson::Several(n)),
    }
}

/// `text` as one JSON document; or, when it is an object written with its outer braces doubled
/// (`{{"name": "submit_output", "arguments": {…}}}`, as Qwen2.5 writes calls under its own chat
/// template, copying the template's escaped braces), that object. `{{` never opens valid JSON
/// (a key is a string), so the second reading cannot change what valid JSON means, and the
/// value is checked like any other.
fn parse(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    if !(inner.starts_with('{') && inner.ends_with('}')) {
        return None;
    }
    serde_json::from_str::<Value>(inner)
        .ok()
        .filter(Value::is_object)
}

/// The contents of each closed fenced code block of `text`, its info string (`json`) removed.
/// A fence opens with three backticks anywhere (models put them mid-line too) and closes with
/// the next three; an unclosed block is not a block.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut parts = text.split("```");
    // The text before the first fence is outside every block.
    parts.next();
    let mut blocks = Vec::new();
    // Segments alternate, inside a block then outside it; `split` yields a segment after the
    // last fence, so a closed block always has a successor and one left open has none.
    while let (Some(inside), Some(_outside)) = (parts.next(), parts.next()) {
        // The info string runs to the end of the fence's line; a block written on one line
        // (```json {"a": 1}```) has it before the first `{` or `[`.
        let b =
            inside.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        blocks.push(b.trim());
    }
    blocks
}

/// What a server is asked to stop generating at, on a turn whose calls may come as text: the
/// tag with which a chat template (Qwen's, Hermes') opens a tool's answer. A model that goes on
/// after its call writes the tool's answer itself; that is not its turn to write.
pub(crate) const TEXT_CALL_STOP: &[&str] = &["<tool_response>"];

/// The JSON object at the start of `text`, as a model writes a call there before going on to
/// write the tool's answer itself: inside `<tool_call>` tags (as Qwen's and Hermes' chat
/// templates teach), a fenced block, or bare, its outer braces doubled or not. With the
/// characters after it (its closing tag or fence aside), which are dropped: a call ends the
/// model's turn. `None` when the text does not start with an object.
pub(crate) fn leading_object(text: &str) -> Option<(Found, usize)> {
    let mut t = text.trim_start();
    let tagged = match t.strip_prefix("<tool_call>") {
        Some(rest) => {
            t = rest.trim_start();
            true
        }
        None => false,
    };
    let fenced = match t.strip_prefix("```") {
        Some(rest) => {
            t = rest
                .trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                .trim_start();
            true
        }
        None => false,
    };
    let (value, mut rest) = match first_value(t) {
        Some(v) => v,
        // `{{…}}}`: the object inside the doubled braces, then the extra `}`.
        None => {
            let (v, rest) = first_value(t.strip_prefix('{')?.trim_start())?;
            (v, rest.trim_start().strip_prefix('}')?)
        }
    };
    if !value.is_object() {
        return None;
    }
    rest = rest.trim_start();
    if fenced {
        rest = rest.strip_prefix("```").unwrap_or(rest).trim_start();
    }
    if tagged {
        rest = rest.strip_prefix("</tool_call>").unwrap_or(rest);
    }
    let dropped = rest.trim().chars().count();
    Some((Found { value, fenced }, dropped))
}

/// The first JSON value of `text` (which must start with it) and the text after it.
fn first_value(text: &str) -> Option<(Value, &str)> {
    if !text.starts_with('{') {
        return None;
    }
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = values.next()?.ok()?;
    Some((value, text.get(values.byte_offset()..)?))
}

/// A tool call written as text: the name it calls and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TextCall {
    /// The tool it calls.
    pub(crate) name: String,
    /// Its arguments: an object (arguments sent as a JSON string are read as the object).
    pub(crate) arguments: Value,
}

/// `value` as a tool call written as text, `{"name": N, "arguments": {...}}` (or `parameters`
/// for `arguments`, as some templates teach), and nothing else beside them.
pub(crate) fn as_text_call(value: &Value) -> Option<TextCall> {
    let o = value.as_object()?;
    let (name, args) = wrapper_parts(o)?;
    let arguments = match args {
        Value::Object(_) => args.clone(),
        // Arguments as a JSON string holding the object, as OpenAI's wire form has them.
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => return None,
        },
        _ => return None,
    };
    Some(TextCall {
        name: name.to_owned(),
        arguments,
    })
}

/// The name of the tool `value` is wrapped as a call of, whatever its arguments are: what a
/// repair message names when an answer arrives inside such a wrapper.
pub(crate) fn wrapper_name(value: &Value) -> Option<&str> {
    wrapper_parts(value.as_object()?).map(|(name, _)| name)
}

fn wrapper_parts(o: &Map<String, Value>) -> Option<(&str, &Value)> {
    if o.len() != 2 {
        return None;
    }
    let name = o.get("name")?.as_str()?;
    let args = o.get("arguments").or_else(|| o.get("parameters"))?;
    Some((name, args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(text: &str) -> Result<(Value, bool), NoJson> {
        json_in_text(text).map(|f| (f.value, f.fenced))
    }

    #[test]
    fn a_json_value_is_the_whole_text_or_the_one_fenced_block() {
        let v = json!({"a": 1});
        assert_eq!(found("  {\"a\": 1}\n"), Ok((v.clone(), false)));
        assert_eq!(found("42"), Ok((json!(42), false)));
        for text in [
            "```json\n{\"a\": 1}\n```",
            "```\n{\"a\": 1}\n```",
            "Here it is:\n```json\n{\"a\": 1}\n```\nDone.",
            "```json {\"a\": 1}```",
            // A block that is not JSON beside the one that is: the JSON one is the answer.
            "```python\nprint(1)\n```\n```json\n{\"a\": 1}\n```",
        ] {
            assert_eq!(found(text), Ok((v.clone(), true)), "{text}");
        }
    }

    #[test]
    fn an_object_with_its_outer_braces_doubled_is_read_as_the_object() {
        // Recorded from Qwen2.5-Coder-1.5B under its own chat template (llama.cpp, 2026-12-03).
        let call = "{{\"name\": \"submit_output\", \"arguments\": {\"sentiment\": \"negative\"}}}";
        let want = json!({"name": "submit_output", "arguments": {"sentiment": "negative"}});
        assert_eq!(found(call), Ok((want.clone(), false)));
        assert_eq!(found(&format!("```json\n{call}\n```")), Ok((want, true)));
        assert_eq!(found("{{\"a\": 1}}"), Ok((json!({"a": 1}), false)));
        // Only one doubled layer, only around an object, and never a reading of valid JSON.
        for text in [
            "{{{\"a\": 1}}}",
            "{[1]}",
            "{{\"a\": 1}",
            "{\"a\": 1}}",
            "{1}",
        ] {
            assert_eq!(found(text), Err(NoJson::None), "{text}");
        }
        assert_eq!(found("{\"a\": {}}"), Ok((json!({"a": {}}), false)));
    }

    #[test]
    fn no_json_or_several_blocks_is_no_answer() {
        for text in [
            "",
            "The version is 1.2.3.",
            "```json\n{\"a\": 1\n```",
            // An unclosed fence holds no block, even with JSON in it.
            "```json\n{\"a\": 1}",
            "text ```",
        ] {
            assert_eq!(found(text), Err(NoJson::None), "{text}");
        }
        assert_eq!(
            found("```json\n{\"a\": 1}\n```\nor\n```json\n{\"a\": 2}\n```"),
            Err(NoJson::Several(2))
        );
    }

    /// Canned answers of Qwen2.5-Coder under its own chat template on llama.cpp: the call, then
    /// the tool's answer as the model imagines it.
    #[test]
    fn an_object_at_the_start_is_read_and_what_follows_it_counted() {
        let lead = |t: &str| leading_object(t).map(|(f, n)| (f.value, f.fenced, n));
        let call = json!({"name": "read_file", "arguments": {"path": "src/lib.rs"}});
        let tail = "<tool_response> ERROR: src/lib.rs does not exist";
        let n = tail.chars().count();
        for (text, fenced, dropped) in [
            (
                format!("<tool_call>\n{call}\n</tool_call>\n{tail}"),
                false,
                n,
            ),
            (format!("  <tool_call>{call}</tool_call>"), false, 0),
            (format!("{{{call}}}\n{tail}"), false, n),
            (format!("{call}{tail}"), false, n),
            (format!("```json\n{call}\n```\n{tail}"), true, n),
            (
                format!("<tool_call>\n```json\n{call}\n```\n</tool_call> ü"),
                true,
                1,
            ),
        ] {
            assert_eq!(lead(&text), Some((call.clone(), fenced, dropped)), "{text}");
        }
        // Not an object at the start: nothing is read (prose first, an array, broken JSON).
        for text in [
            format!("I will call it: {call}"),
            "[1, 2] and more".to_string(),
            "{\"name\": \"read_file\", \"arguments\": {".to_string(),
            "{{{\"a\": 1}}}}".to_string(),
            String::new(),
            "<tool_call>".to_string(),
        ] {
            assert_eq!(lead(&text), None, "{text}");
        }
    }

    #[test]
    fn a_call_written_as_text_is_name_and_arguments_only() {
        let call = |v: Value| as_text_call(&v);
        assert_eq!(
            call(json!({"name": "read_file", "arguments": {"path": "a"}})),
            Some(TextCall {
                name: "read_file".into(),
                arguments: json!({"path": "a"})
            })
        );
        assert_eq!(
            call(json!({"name": "grep", "parameters": "{\"pattern\": \"x\"}"})),
            Some(TextCall {
                name: "grep".into(),
                arguments: json!({"pattern": "x"})
            })
        );
        for v in [
            json!({"name": "read_file"}),
            json!({"name": "read_file", "arguments": {"path": "a"}, "id": 1}),
            json!({"name": 5, "arguments": {}}),
            json!({"name": "t", "arguments": [1]}),
            json!({"name": "t", "arguments": "not json"}),
            json!({"path": "a", "name": "x"}),
            json!([{"name": "t", "arguments": {}}]),
        ] {
            assert_eq!(call(v.clone()), None, "{v}");
        }
        assert_eq!(
            wrapper_name(&json!({"name": "final_answer", "arguments": [1]})),
            Some("final_answer")
        );
    }
}
