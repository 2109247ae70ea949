//! Numeric bounds, lengths and counts: `minimum`/`maximum` (exclusive or not), `minLength`,
//! `maxItems` and the like.

use serde_json::{Map, Value};

use super::*;

/// A bound: value and whether it is exclusive.
pub(super) type Bound = (f64, bool);

pub(super) fn num(m: &Map<String, Value>, k: &str) -> Option<f64> {
    m.get(k).and_then(Value::as_f64)
}

pub(super) fn lower(m: &Map<String, Value>) -> Option<Bound> {
    tighter(
        num(m, "minimum").map(|v| (v, false)),
        num(m, "exclusiveMinimum").map(|v| (v, true)),
        true,
    )
}

pub(super) fn upper(m: &Map<String, Value>) -> Option<Bound> {
    tighter(
        num(m, "maximum").map(|v| (v, false)),
        num(m, "exclusiveMaximum").map(|v| (v, true)),
        false,
    )
}

pub(super) fn tighter(x: Option<Bound>, y: Option<Bound>, is_lower: bool) -> Option<Bound> {
    match (x, y) {
        (Some(x), Some(y)) => Some(if bound_within(x, y, is_lower) { x } else { y }),
        (x, y) => x.or(y),
    }
}

/// Whether bound `a` is at least as tight as bound `b` (so `b` admits everything `a` admits).
pub(super) fn bound_within(a: Bound, b: Bound, is_lower: bool) -> bool {
    let ((av, ax), (bv, bx)) = (a, b);
    if av == bv {
        ax || !bx
    } else if is_lower {
        av > bv
    } else {
        av < bv
    }
}

pub(super) fn show_bound(b: Option<Bound>, is_lower: bool) -> String {
    match b {
        None => "none".into(),
        Some((v, excl)) => {
            let op = match (is_lower, excl) {
                (true, false) => ">=",
                (true, true) => ">",
                (false, false) => "<=",
                (false, true) => "<",
            };
            format!("{op} {v}")
        }
    }
}

impl<'a> Cmp<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bound_pair(
        &self,
        out: &mut Vec<Finding>,
        a: Option<Bound>,
        b: Option<Bound>,
        is_lower: bool,
        a_ptr: &str,
        b_ptr: &str,
        kw: &str,
    ) {
        let Some(bb) = b else { return };
        if a.is_some_and(|ab| bound_within(ab, bb, is_lower)) {
            return;
        }
        let (o, n) = self.old_new(show_bound(a, is_lower), show_bound(b, is_lower));
        let excl = format!("exclusive{}{}", &kw[..1].to_uppercase(), &kw[1..]);
        let b_kw = if bb.1 { excl.as_str() } else { kw };
        out.push(self.finding(
            Kind::Bound,
            &child(a_ptr, kw),
            &child(b_ptr, b_kw),
            format!("bound `{kw}` was {o}, now {n}"),
        ));
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn count_pair(
        &self,
        out: &mut Vec<Finding>,
        am: &Map<String, Value>,
        bm: &Map<String, Value>,
        a_ptr: &str,
        b_ptr: &str,
        min_kw: &str,
        max_kw: &str,
    ) {
        for (kw, is_lower) in [(min_kw, true), (max_kw, false)] {
            let Some(bv) = num(bm, kw) else { continue };
            let av = num(am, kw);
            let ok = match av {
                Some(av) => {
                    if is_lower {
                        av >= bv
                    } else {
                        av <= bv
                    }
                }
                None => is_lower && bv <= 0.0,
            };
            if !ok {
                let verb = if is_lower == (self.side == Side::Input) {
                    "raised"
                } else {
                    "lowered"
                };
                let (o, n) = self.old_new(am.get(kw).map_or("none".into(), show), show(&bm[kw]));
                out.push(self.finding(
                    Kind::Bound,
                    &child(a_ptr, kw),
                    &child(b_ptr, kw),
                    format!("`{kw}` {verb} from {o} to {n}"),
                ));
            }
        }
    }
}
