//! Objects: `properties`, `required`, `additionalProperties`, `patternProperties` and the like.

use serde_json::{Map, Value};

use super::*;

impl<'a> Cmp<'a> {
    pub(super) fn object(
        &mut self,
        am: &Map<String, Value>,
        a_ptr: &str,
        bm: &Map<String, Value>,
        b_ptr: &str,
        depth: usize,
    ) -> Vec<Finding> {
        let mut out = Vec::new();
        let req = |m: &Map<String, Value>| -> Vec<String> {
            m.get("required")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (ra, rb) = (req(am), req(bm));
        for (i, r) in rb.iter().enumerate() {
            if !ra.contains(r) {
                let what = match self.side {
                    Side::Input => format!("property `{r}` is now required"),
                    Side::Output => format!("property `{r}` is no longer required"),
                };
                let b_at = child(&child(b_ptr, "required"), &i.to_string());
                let a_at = child(&child(a_ptr, "properties"), r);
                out.push(self.finding(Kind::Required, &a_at, &b_at, what));
            }
        }
        self.count_pair(
            &mut out,
            am,
            bm,
            a_ptr,
            b_ptr,
            "minProperties",
            "maxProperties",
        );
        if let Some(Value::Object(deps)) = bm.get("dependentRequired") {
            let a_deps = am.get("dependentRequired").and_then(Value::as_object);
            for (k, list) in deps {
                let have: Vec<&Value> = a_deps
                    .and_then(|d| d.get(k))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().collect())
                    .unwrap_or_default();
                let ok = list.as_array().is_some_and(|l| {
                    l.iter().all(|x| {
                        have.contains(&x) || x.as_str().is_some_and(|s| ra.iter().any(|r| r == s))
                    })
                });
                if !ok {
                    let what = match self.side {
                        Side::Input => format!("`dependentRequired` for `{k}` added or extended"),
                        Side::Output => format!("`dependentRequired` for `{k}` removed or reduced"),
                    };
                    out.push(self.finding(
                        Kind::Constraint,
                        a_ptr,
                        &child(&child(b_ptr, "dependentRequired"), k),
                        what,
                    ));
                }
            }
        }

        let t = Value::Bool(true);
        let a_add = am.get("additionalProperties").unwrap_or(&t);
        let b_add = bm.get("additionalProperties").unwrap_or(&t);
        let pattern_props = |m: &Map<String, Value>| {
            m.get("patternProperties")
                .is_some_and(|p| !is_trivial_map(p))
        };
        if (pattern_props(am) || pattern_props(bm)) && !(is_trivial(a_add) && is_trivial(b_add)) {
            return {
                out.extend(self.cannot(
                    a_ptr,
                    b_ptr,
                    "`patternProperties` beside `additionalProperties` is not compared".into(),
                ));
                out
            };
        }
        let empty = Map::new();
        let pa = am
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let pb = bm
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let mut names: Vec<&String> = pa.keys().collect();
        names.extend(pb.keys().filter(|k| !pa.contains_key(*k)));
        for name in names {
            let (av, ap) = match pa.get(name) {
                Some(v) => (v, child(&child(a_ptr, "properties"), name)),
                None => (a_add, child(a_ptr, "additionalProperties")),
            };
            if av == &Value::Bool(false) {
                continue;
            }
            let (bv, bp) = match pb.get(name) {
                Some(v) => (v, child(&child(b_ptr, "properties"), name)),
                None => (b_add, child(b_ptr, "additionalProperties")),
            };
            if bv == &Value::Bool(false) {
                let what = match self.side {
                    Side::Input => {
                        format!("property `{name}` is no longer accepted (the object is closed)")
                    }
                    Side::Output => {
                        format!("property `{name}` is new but the old object was closed")
                    }
                };
                out.push(self.finding(Kind::Property, &ap, &bp, what));
                continue;
            }
            out.extend(self.sub(av, &ap, bv, &bp, depth));
        }
        if a_add != &Value::Bool(false) {
            let (ap, bp) = (
                child(a_ptr, "additionalProperties"),
                child(b_ptr, "additionalProperties"),
            );
            if b_add == &Value::Bool(false) {
                let what = match self.side {
                    Side::Input => "unlisted properties are no longer accepted (`additionalProperties = false`)",
                    Side::Output => "unlisted properties may now be returned (the old object was closed)",
                };
                let ap_at = if am.contains_key("additionalProperties") {
                    ap
                } else {
                    a_ptr.to_owned()
                };
                out.push(self.finding(Kind::Property, &ap_at, &bp, what.into()));
            } else {
                out.extend(self.sub(a_add, &ap, b_add, &bp, depth));
            }
        }
        out
    }
}
