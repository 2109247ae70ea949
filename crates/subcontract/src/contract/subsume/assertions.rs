//! The assertion keywords of one schema pair: types, `const`/`enum`, strings and numbers.

use serde_json::{Map, Value};

use super::*;

impl<'a> Cmp<'a> {
    /// The assertion keywords of one schema object pair (applicators already taken apart).
    pub(super) fn base(
        &mut self,
        am: &Map<String, Value>,
        a_ptr: &str,
        bm: &Map<String, Value>,
        b_ptr: &str,
        depth: usize,
    ) -> Vec<Finding> {
        let mut out = Vec::new();
        for k in bm.keys() {
            let k = k.as_str();
            if ANNOTATIONS.contains(&k) || COMPARED.contains(&k) {
                continue;
            }
            if MUST_BE_EQUAL.contains(&k) {
                let same = am.get(k) == bm.get(k) && !has_ref(&bm[k]);
                if !same {
                    let how = if am.contains_key(k) {
                        "changed"
                    } else {
                        "added"
                    };
                    let who = match (self.side, how) {
                        (Side::Input, _) | (Side::Output, "changed") => how,
                        _ => "removed",
                    };
                    out.extend(self.cannot(
                        a_ptr,
                        b_ptr,
                        format!("`{k}` {who}; only an unchanged `{k}` is compared"),
                    ));
                }
                continue;
            }
            out.extend(self.cannot(a_ptr, b_ptr, format!("unfamiliar keyword `{k}`")));
        }

        let ta = types(am);
        let tb = types(bm);
        if let Some(tb_list) = &tb {
            match &ta {
                None => {
                    let (o, n) = self.old_new(
                        "any type".to_string(),
                        format!("only {}", tb_list.join(", ")),
                    );
                    out.push(self.finding(
                        Kind::Type,
                        a_ptr,
                        &child(b_ptr, "type"),
                        format!("type was {o}, now {n}"),
                    ));
                }
                Some(ta_list) => {
                    let missing: Vec<&String> =
                        ta_list.iter().filter(|t| !admits(&tb, t)).collect();
                    if !missing.is_empty() {
                        let (o, n) = self.old_new(ta_list.join(", "), tb_list.join(", "));
                        out.push(self.finding(
                            Kind::Type,
                            &child(a_ptr, "type"),
                            &child(b_ptr, "type"),
                            format!("type was {o}, now {n}"),
                        ));
                    }
                }
            }
        }

        // A finite set on `b` that the value check above could not settle.
        if let Some(bv) = finite(bm) {
            let ok = finite(am).is_some_and(|av| av.iter().all(|v| bv.contains(v)));
            if !ok {
                let what = match (self.side, finite(am)) {
                    (Side::Input, None) => {
                        format!("values now limited to {}", show(&Value::Array(bv.clone())))
                    }
                    (Side::Output, None) => format!(
                        "values were limited to {}, now any",
                        show(&Value::Array(bv.clone()))
                    ),
                    (Side::Input, Some(_)) => "an accepted value was removed".to_string(),
                    (Side::Output, Some(_)) => "a new value may be returned".to_string(),
                };
                let kw = if bm.contains_key("enum") {
                    "enum"
                } else {
                    "const"
                };
                out.push(self.finding(Kind::Enum, a_ptr, &child(b_ptr, kw), what));
            }
        }

        if admits(&ta, "number") || admits(&ta, "integer") {
            self.bound_pair(
                &mut out,
                lower(am),
                lower(bm),
                true,
                a_ptr,
                b_ptr,
                "minimum",
            );
            self.bound_pair(
                &mut out,
                upper(am),
                upper(bm),
                false,
                a_ptr,
                b_ptr,
                "maximum",
            );
            if let Some(mb) = num(bm, "multipleOf") {
                let integral = |x: f64| x.is_finite() && x.fract() == 0.0;
                let ok = num(am, "multipleOf").is_some_and(|ma| integral(ma / mb))
                    || (ta
                        .as_ref()
                        .is_some_and(|t| t.iter().all(|x| x == "integer"))
                        && integral(1.0 / mb));
                if !ok {
                    let (o, n) = self.old_new(
                        am.get("multipleOf").map_or("none".into(), show),
                        show(&bm["multipleOf"]),
                    );
                    out.push(self.finding(
                        Kind::Bound,
                        &child(a_ptr, "multipleOf"),
                        &child(b_ptr, "multipleOf"),
                        format!("`multipleOf` was {o}, now {n}"),
                    ));
                }
            }
        }
        if admits(&ta, "string") {
            self.count_pair(&mut out, am, bm, a_ptr, b_ptr, "minLength", "maxLength");
            if let Some(pb) = bm.get("pattern") {
                match am.get("pattern") {
                    Some(pa) if pa == pb => {}
                    Some(pa) => out.extend(self.cannot(
                        &child(a_ptr, "pattern"),
                        &child(b_ptr, "pattern"),
                        format!(
                            "two different patterns, {} and {}, cannot be compared",
                            show(pa),
                            show(pb)
                        ),
                    )),
                    None => {
                        let what = match self.side {
                            Side::Input => format!("`pattern` {} added", show(pb)),
                            Side::Output => format!("`pattern` {} removed", show(pb)),
                        };
                        out.push(self.finding(
                            Kind::Pattern,
                            a_ptr,
                            &child(b_ptr, "pattern"),
                            what,
                        ));
                    }
                }
            }
        }
        if admits(&ta, "array") {
            self.count_pair(&mut out, am, bm, a_ptr, b_ptr, "minItems", "maxItems");
            if bm.get("uniqueItems") == Some(&Value::Bool(true))
                && am.get("uniqueItems") != Some(&Value::Bool(true))
            {
                let what = match self.side {
                    Side::Input => "`uniqueItems` added",
                    Side::Output => "`uniqueItems` removed",
                };
                out.push(self.finding(
                    Kind::Constraint,
                    a_ptr,
                    &child(b_ptr, "uniqueItems"),
                    what.into(),
                ));
            }
            out.extend(self.items(am, a_ptr, bm, b_ptr, depth));
        }
        if admits(&ta, "object") {
            out.extend(self.object(am, a_ptr, bm, b_ptr, depth));
        }
        out
    }
}
