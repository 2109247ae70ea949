//! JSON Pointers (RFC 6901): the one place their tokens are escaped, unescaped and resolved,
//! and where a same-document `$ref` (`#/json/pointer`, percent-encoded) is read.

use std::borrow::Cow;

use serde_json::Value;

/// `token` escaped for a pointer: `~` as `~0`, `/` as `~1`.
pub(crate) fn escape(token: &str) -> Cow<'_, str> {
    if token.contains(['~', '/']) {
        Cow::Owned(token.replace('~', "~0").replace('/', "~1"))
    } else {
        Cow::Borrowed(token)
    }
}

/// The pointer to `token` under `path`.
pub(crate) fn child(path: &str, token: &str) -> String {
    format!("{path}/{}", escape(token))
}

/// `token` unescaped. Order matters: `~01` is `~1` literally, not `/`.
pub(crate) fn unescape(token: &str) -> Cow<'_, str> {
    if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    }
}

/// The unescaped reference tokens of `pointer` (`""` is the root, with no token); a pointer
/// that does not start with `/` has none either.
pub(crate) fn tokens(pointer: &str) -> impl Iterator<Item = Cow<'_, str>> {
    pointer
        .strip_prefix('/')
        .into_iter()
        .flat_map(|p| p.split('/'))
        .map(unescape)
}

/// Reference tokens of a same-document `$ref` (`#` or `#/json/pointer`, percent-encoded);
/// `None` for anything else (remote refs, anchors, bad percent-encoding).
pub(crate) fn parse_local_ref(reference: &str) -> Option<Vec<String>> {
    let fragment = reference.strip_prefix('#')?;
    // A `%` not followed by two hex digits is not a valid URI fragment.
    let b = fragment.as_bytes();
    let well_formed = b.iter().enumerate().all(|(i, &c)| {
        c != b'%'
            || b.get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
    });
    if !well_formed {
        return None;
    }
    let fragment = percent_encoding::percent_decode_str(fragment)
        .decode_utf8()
        .ok()?;
    if fragment.is_empty() {
        return Some(Vec::new());
    }
    fragment.strip_prefix('/')?;
    Some(tokens(&fragment).map(Cow::into_owned).collect())
}

/// The value at `tokens` under `root`.
pub(crate) fn resolve<'v, S: AsRef<str>>(root: &'v Value, tokens: &[S]) -> Option<&'v Value> {
    tokens.iter().try_fold(root, |node, token| match node {
        Value::Object(map) => map.get(token.as_ref()),
        Value::Array(items) => token
            .as_ref()
            .parse::<usize>()
            .ok()
            .and_then(|i| items.get(i)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_round_trip_through_escaping() {
        for t in ["plain", "a/b", "c~d", "~1", "~01/~"] {
            let p = child("", t);
            assert_eq!(tokens(&p).collect::<Vec<_>>(), vec![t], "{p}");
        }
        assert_eq!(tokens("").count(), 0);
        assert_eq!(unescape("~01"), "~1");
    }

    #[test]
    fn local_refs_are_percent_decoded_and_resolved() {
        let root = json!({"$defs": {"a/b": 1, "with space": [10, 20]}});
        let r = parse_local_ref("#/$defs/a~1b").expect("local");
        assert_eq!(resolve(&root, &r), Some(&json!(1)));
        let r = parse_local_ref("#/$defs/with%20space/1").expect("local");
        assert_eq!(resolve(&root, &r), Some(&json!(20)));
        assert_eq!(parse_local_ref("#"), Some(vec![]));
        assert_eq!(parse_local_ref("#%zz"), None);
        assert_eq!(parse_local_ref("#%2"), None);
        assert_eq!(parse_local_ref("#anchor"), None);
        assert_eq!(parse_local_ref("other.json#/a"), None);
        assert_eq!(parse_local_ref("#/%ff"), None, "not UTF-8");
    }
}
