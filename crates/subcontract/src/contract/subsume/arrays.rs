//! Arrays: `items`, `prefixItems`, `contains` and their counts.

use serde_json::{Map, Value};

use super::*;

impl<'a> Cmp<'a> {
    pub(super) fn items(
        &mut self,
        am: &Map<String, Value>,
        a_ptr: &str,
        bm: &Map<String, Value>,
        b_ptr: &str,
        depth: usize,
    ) -> Vec<Finding> {
        if am.get("items").is_some_and(Value::is_array)
            || bm.get("items").is_some_and(Value::is_array)
        {
            return self.cannot(
                a_ptr,
                b_ptr,
                "`items` as an array (draft 7 tuples) is not compared; use `prefixItems`".into(),
            );
        }
        let t = Value::Bool(true);
        let pa = am
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let pb = bm
            .get("prefixItems")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let a_max = num(am, "maxItems").map_or(usize::MAX, |m| m.max(0.0) as usize);
        let a_items = am.get("items").unwrap_or(&t);
        let b_items = bm.get("items").unwrap_or(&t);
        let mut out = Vec::new();
        let n = pa.len().max(pb.len());
        for i in 0..n.min(a_max) {
            let idx = i.to_string();
            let (ai, ap) = match pa.get(i) {
                Some(v) => (v, child(&child(a_ptr, "prefixItems"), &idx)),
                None => (a_items, child(a_ptr, "items")),
            };
            let (bi, bp) = match pb.get(i) {
                Some(v) => (v, child(&child(b_ptr, "prefixItems"), &idx)),
                None => (b_items, child(b_ptr, "items")),
            };
            out.extend(self.sub(ai, &ap, bi, &bp, depth));
        }
        if a_max > n {
            out.extend(self.sub(
                a_items,
                &child(a_ptr, "items"),
                b_items,
                &child(b_ptr, "items"),
                depth,
            ));
        }
        out
    }
}
