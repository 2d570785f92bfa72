//! Number templates: `INV-{period}-{n:04}` -> `INV-20261123-0042`, and back.

use std::fmt;

use super::{Numbering, Period};
use crate::{Error, Result};

/// The longest template, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 128;

/// The widest zero padding of `{n:0W}`: 19 digits hold every value.
pub const MAX_PADDING: usize = 19;

/// The template of a sequence with a period and none given.
pub const DEFAULT_PERIOD_TEMPLATE: &str = "{period}-{n}";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(String),
    Period(Period),
    /// The counter, zero-padded to at least this many digits (0: none).
    N(usize),
}

/// A checked template: literal text, `{n}` (the counter) or `{n:0W}` (the
/// counter zero-padded to at least `W` digits, `1 <= W <= 19`; a wider
/// counter prints whole, never truncated) exactly once, and `{period}` (the
/// period key: `20261123`, `202611` or `2026`) exactly once when the
/// sequence has a period, never otherwise.
///
/// Refused: other placeholders, braces outside a placeholder (literal braces
/// are not supported), whitespace and control characters (numbers are
/// printed one a line and beside their ticket), an empty template, more than
/// [`MAX_TEMPLATE_BYTES`] bytes. Every template accepted parses back
/// unambiguously: all its parts but the counter have a fixed width, so the
/// counter's digits are what is left ([`Template::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

/// A number's parts: what a template formats and parses back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Number {
    /// The period key (`20261123`, `202611`, `2026`), or `None` for a
    /// sequence without a period.
    pub period: Option<i64>,
    /// The counter within the period.
    pub n: i64,
}

impl Template {
    /// Checks and compiles `source` for a sequence with `period`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the problem and how to fix it.
    pub fn parse(source: &str, period: Option<Period>) -> Result<Template> {
        let bad = |why: String| {
            Error::invalid(format!(
                "template {source:?}: {why}; a template is literal text with {{n}} or {{n:04}} once{}",
                if period.is_some() {
                    " and {period} once, e.g. INV-{period}-{n:04}"
                } else {
                    ", e.g. ORD-{n:06}"
                }
            ))
        };
        if source.is_empty() {
            return Err(bad("it is empty".into()));
        }
        if source.len() > MAX_TEMPLATE_BYTES {
            return Err(bad(format!(
                "it is {} bytes long, more than {MAX_TEMPLATE_BYTES}",
                source.len()
            )));
        }
        if let Some(c) = source.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(format!(
                "it holds {c:?}; whitespace and control characters are not allowed"
            )));
        }
        let mut parts = Vec::new();
        let mut lit = String::new();
        let (mut ns, mut periods) = (0, 0);
        let mut rest = source;
        while let Some(c) = rest.chars().next() {
            match c {
                '{' => {
                    let close = rest.find('}').ok_or_else(|| {
                        bad("a '{' is not closed; literal braces are not allowed".into())
                    })?;
                    let inner = &rest[1..close];
                    let part = match inner {
                        "n" => Part::N(0),
                        "period" => match period {
                            Some(p) => Part::Period(p),
                            None => {
                                return Err(bad(
                                    "it has {period} but the sequence has no period; give the sequence a period (day, month or year) or remove {period}".into(),
                                ));
                            }
                        },
                        _ => match inner.strip_prefix("n:0") {
                            Some(w)
                                if !w.is_empty()
                                    && w.len() <= 2
                                    && !w.starts_with('0')
                                    && w.bytes().all(|b| b.is_ascii_digit()) =>
                            {
                                let w: usize = w.parse().unwrap_or(0);
                                if !(1..=MAX_PADDING).contains(&w) {
                                    return Err(bad(format!(
                                        "{{{inner}}} pads to {w} digits; use 1 to {MAX_PADDING}"
                                    )));
                                }
                                Part::N(w)
                            }
                            _ => {
                                return Err(bad(format!(
                                    "unknown placeholder {{{inner}}}; the placeholders are {{n}}, {{n:0W}} and {{period}}, and literal braces are not allowed"
                                )));
                            }
                        },
                    };
                    match part {
                        Part::N(_) => ns += 1,
                        Part::Period(_) => periods += 1,
                        Part::Lit(_) => {}
                    }
                    if !lit.is_empty() {
                        parts.push(Part::Lit(std::mem::take(&mut lit)));
                    }
                    parts.push(part);
                    rest = &rest[close + 1..];
                }
                '}' => {
                    return Err(bad(
                        "a '}' closes nothing; literal braces are not allowed".into()
                    ));
                }
                c => {
                    lit.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        if ns != 1 {
            return Err(bad(format!(
                "it has the counter {ns} times; it needs {{n}} (or {{n:0W}}) exactly once"
            )));
        }
        if period.is_some() && periods != 1 {
            return Err(bad(format!(
                "it has {{period}} {periods} times; a sequence with a period needs it exactly once, or numbers of two periods would look alike"
            )));
        }
        Ok(Template {
            source: source.to_owned(),
            parts,
        })
    }

    /// The template a numbered sequence prints with: its own, or
    /// [`DEFAULT_PERIOD_TEMPLATE`] for one with a period; `None` for plain
    /// integers.
    ///
    /// # Errors
    /// As [`Self::parse`].
    pub fn for_numbering(numbering: &Numbering) -> Result<Option<Template>> {
        match (&numbering.template, numbering.period) {
            (Some(t), p) => Template::parse(t, p).map(Some),
            (None, Some(p)) => Template::parse(DEFAULT_PERIOD_TEMPLATE, Some(p)).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The period this template's `{period}` stands for, if it has one.
    fn period(&self) -> Option<Period> {
        self.parts.iter().find_map(|p| match p {
            Part::Period(p) => Some(*p),
            _ => None,
        })
    }

    /// `number` written out. A counter wider than its padding prints whole.
    /// A template with `{period}` given a number without one prints the
    /// period as zeros of its width (never happens for numbers a sequence
    /// hands out).
    pub fn format(&self, number: &Number) -> String {
        let mut out = String::with_capacity(self.source.len() + 8);
        for part in &self.parts {
            match part {
                Part::Lit(s) => out.push_str(s),
                Part::Period(p) => {
                    out.push_str(&format!(
                        "{:0w$}",
                        number.period.unwrap_or(0),
                        w = p.width()
                    ));
                }
                Part::N(w) => out.push_str(&format!("{:0w$}", number.n, w = *w)),
            }
        }
        out
    }

    /// The parts of a number this template wrote. Only the exact text
    /// [`Self::format`] writes is accepted (no extra leading zeros, a real
    /// date for the period).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] saying where `text` differs from the
    /// template.
    pub fn parse_number(&self, text: &str) -> Result<Number> {
        let bad = |why: &str| {
            Error::invalid(format!(
                "{text:?} is not a number of template {:?}: {why}",
                self.source
            ))
        };
        let fixed: usize = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Lit(s) => s.len(),
                Part::Period(p) => p.width(),
                Part::N(_) => 0,
            })
            .sum();
        let n_len = text
            .len()
            .checked_sub(fixed)
            .filter(|l| *l >= 1)
            .ok_or_else(|| bad("it is too short"))?;
        let mut pos = 0;
        let (mut period, mut n) = (None, None);
        for part in &self.parts {
            let len = match part {
                Part::Lit(s) => s.len(),
                Part::Period(p) => p.width(),
                Part::N(_) => n_len,
            };
            let piece = text
                .get(pos..pos + len)
                .ok_or_else(|| bad("it does not have the template's shape"))?;
            match part {
                Part::Lit(s) if piece == s => {}
                Part::Lit(s) => return Err(bad(&format!("expected {s:?} at byte {pos}"))),
                Part::Period(p) => {
                    let key = digits(piece).filter(|k| p.is_key(*k)).ok_or_else(|| {
                        bad(&format!("{piece:?} is not a {p} like {}", example(*p)))
                    })?;
                    period = Some(key);
                }
                Part::N(w) => {
                    let v = digits(piece)
                        .filter(|v| format!("{v:0w$}", w = *w) == piece)
                        .ok_or_else(|| {
                            bad(&format!(
                                "{piece:?} is not the counter as the template writes it"
                            ))
                        })?;
                    n = Some(v);
                }
            }
            pos += len;
        }
        let n = n.ok_or_else(|| bad("no counter"))?;
        if self.period().is_some() && period.is_none() {
            return Err(bad("no period"));
        }
        Ok(Number { period, n })
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn digits(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn example(p: Period) -> &'static str {
    match p {
        Period::Day => "20261123",
        Period::Month => "202611",
        Period::Year => "2026",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, p: Option<Period>) -> Template {
        Template::parse(s, p).unwrap()
    }

    #[test]
    fn formats_and_parses_back() {
        let inv = t("INV-{period}-{n:04}", Some(Period::Day));
        let num = Number {
            period: Some(20261123),
            n: 42,
        };
        assert_eq!(inv.format(&num), "INV-20261123-0042");
        assert_eq!(inv.parse_number("INV-20261123-0042").unwrap(), num);
        let wide = Number {
            period: Some(20261123),
            n: 1_234_567,
        };
        assert_eq!(inv.format(&wide), "INV-20261123-1234567", "no truncation");
        assert_eq!(inv.parse_number("INV-20261123-1234567").unwrap(), wide);
        // Fixed-width period first, counter last, or the other way round.
        let packed = t("{n}{period}", Some(Period::Month));
        let n = Number {
            period: Some(202611),
            n: 7001,
        };
        assert_eq!(packed.format(&n), "7001202611");
        assert_eq!(packed.parse_number("7001202611").unwrap(), n);
        let plain = t("ORD{n}", None);
        assert_eq!(
            plain.parse_number("ORD0").unwrap(),
            Number { period: None, n: 0 }
        );
    }

    #[test]
    fn parse_refuses_what_format_never_writes() {
        let inv = t("INV-{period}-{n:04}", Some(Period::Day));
        for bad in [
            "INV-20261123-042",
            "INV-20261123-00042",
            "INV-20261323-0042",
            "INV-2026112-00042",
            "XNV-20261123-0042",
            "INV-20261123-",
            "",
            "INV-20261123-00é2",
            "INV-20261123-99999999999999999999",
        ] {
            assert!(inv.parse_number(bad).is_err(), "{bad}");
        }
        assert!(t("{n}", None).parse_number("01").is_err());
    }

    proptest::proptest! {
        /// Any accepted template: format, then parse, gives back the parts,
        /// whatever the literals (digits and dashes beside the counter
        /// included) and however wide the counter.
        #[test]
        fn format_then_parse_gives_back_the_parts(
            lits in proptest::collection::vec("[-A-Z0-9/._é]{0,4}", 3),
            kind in 0usize..4,
            pad in 0usize..6,
            counter_first in proptest::bool::ANY,
            n in 0i64..i64::MAX,
            day in 0i64..2_900_000,
        ) {
            let period = [None, Some(Period::Day), Some(Period::Month), Some(Period::Year)][kind];
            let counter = if pad == 0 { "{n}".to_owned() } else { format!("{{n:0{pad}}}") };
            let (a, b) = if counter_first { (counter.as_str(), "{period}") } else { ("{period}", counter.as_str()) };
            let src = match period {
                Some(_) => format!("{}{a}{}{b}{}", lits[0], lits[1], lits[2]),
                None => format!("{}{counter}{}", lits[0], lits[1]),
            };
            let t = Template::parse(&src, period).unwrap();
            // Any instant from 1970 to about 9800.
            let key = period.map(|p| p.key_at(day * 86_400_000).unwrap());
            let num = Number { period: key, n };
            let text = t.format(&num);
            proptest::prop_assert_eq!(t.parse_number(&text).unwrap(), num);
        }
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        for (src, period, says) in [
            ("INV-{n}", Some(Period::Day), "{period} 0 times"),
            ("{period}", Some(Period::Day), "counter 0 times"),
            ("{n}{n}", None, "counter 2 times"),
            (
                "{period}{period}{n}",
                Some(Period::Year),
                "{period} 2 times",
            ),
            ("{period}-{n}", None, "no period"),
            ("{x}{n}", None, "unknown placeholder {x}"),
            ("{{n}}", None, "unknown placeholder"),
            ("a}{n}", None, "closes nothing"),
            ("{n", None, "not closed"),
            ("A {n}", None, "whitespace"),
            ("{n:4}", None, "unknown placeholder"),
            ("{n:00}", None, "unknown placeholder"),
            ("{n:001}", None, "unknown placeholder"),
            ("{n:020}", None, "use 1 to 19"),
            ("", None, "empty"),
        ] {
            let e = Template::parse(src, period).unwrap_err().to_string();
            assert!(e.contains(says), "{src}: {e}");
        }
        assert!(Template::parse(&"x".repeat(200), None).is_err());
    }
}
