//! Readable encodings of ids: Crockford base32 and base62 strings of a
//! fixed width, with an optional typed prefix (`ord_...`) and a check
//! character.
//!
//! - **Fixed width**: every value of a sequence is written with as many
//!   digits as its largest value needs, leading zeros included, in an
//!   alphabet whose characters are in ASCII order (`0-9A-Z` less `I L O U`
//!   for base32; `0-9A-Za-z` for base62). So the strings of one sequence
//!   sort, byte by byte, as their numbers do.
//! - **Check character**, after the digits: for base32, Crockford's check
//!   symbol (the value modulo 37, written with the 32 digits and `*~$=U`),
//!   which catches every single wrong character and every swap of two
//!   neighbours; for base62, the Luhn mod N algorithm over the 62 digits,
//!   which catches every single wrong character and most swaps of two
//!   neighbours (no single check character from 62 symbols can catch all of
//!   both).
//! - **Prefix**: 1 to [`MAX_PREFIX_BYTES`] lower-case letters and digits,
//!   starting with a letter, written before the digits with an underscore
//!   (`ord_0ABC...`).
//!
//! Parsing accepts Crockford's lower-case letters and its aliases (`I`/`L`
//! for 1, `O` for 0) and refuses a wrong prefix, a bad character, a wrong
//! width or a wrong check character, naming which.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The longest prefix, in bytes.
pub const MAX_PREFIX_BYTES: usize = 16;

const BASE32: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const BASE32_CHECK: &[u8; 37] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ*~$=U";
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The alphabet of an [`Encoding`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Alphabet {
    /// Crockford's base32: `0-9A-Z` less `I L O U`, a mod-37 check symbol.
    Base32,
    /// `0-9A-Za-z`, a Luhn mod 62 check character.
    Base62,
}

impl Alphabet {
    /// The name used on the command line, in HTTP and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Alphabet::Base32 => "base32",
            Alphabet::Base62 => "base62",
        }
    }

    fn radix(self) -> u64 {
        match self {
            Alphabet::Base32 => 32,
            Alphabet::Base62 => 62,
        }
    }

    fn digits(self) -> &'static [u8] {
        match self {
            Alphabet::Base32 => BASE32,
            Alphabet::Base62 => BASE62,
        }
    }

    /// The digit value of a character, `None` for one not in the alphabet.
    fn digit(self, c: u8) -> Option<u64> {
        match self {
            Alphabet::Base32 => {
                let c = match c.to_ascii_uppercase() {
                    b'I' | b'L' => b'1',
                    b'O' => b'0',
                    c => c,
                };
                BASE32.iter().position(|&d| d == c).map(|p| p as u64)
            }
            Alphabet::Base62 => BASE62.iter().position(|&d| d == c).map(|p| p as u64),
        }
    }

    /// How many digits the largest value `max` needs (at least 1).
    pub fn width_for(self, max: i64) -> u32 {
        let mut v = max.max(0) as u64;
        let mut w = 1;
        while v >= self.radix() {
            v /= self.radix();
            w += 1;
        }
        w
    }

    fn check_char(self, digits: &[u64], value: u64) -> u8 {
        match self {
            Alphabet::Base32 => BASE32_CHECK[(value % 37) as usize],
            Alphabet::Base62 => {
                // Luhn mod N: from the rightmost digit, factors 2, 1, 2, ...
                let n = 62;
                let mut factor = 2;
                let mut sum = 0;
                for d in digits.iter().rev() {
                    let addend = factor * d;
                    factor = 3 - factor;
                    sum += addend / n + addend % n;
                }
                BASE62[((n - sum % n) % n) as usize]
            }
        }
    }

    fn same_check(self, expected: u8, got: u8) -> bool {
        match self {
            Alphabet::Base32 => expected == got.to_ascii_uppercase(),
            Alphabet::Base62 => expected == got,
        }
    }
}

impl fmt::Display for Alphabet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Alphabet {
    type Err = Error;

    /// `base32` or `base62`.
    fn from_str(s: &str) -> Result<Alphabet> {
        match s {
            "base32" => Ok(Alphabet::Base32),
            "base62" => Ok(Alphabet::Base62),
            other => Err(Error::invalid(format!(
                "unknown encoding {other:?}; use base32 or base62"
            ))),
        }
    }
}

/// How a sequence writes its values as strings; kept in its numbering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Encoding {
    /// The alphabet.
    pub alphabet: Alphabet,
    /// The typed prefix, without its underscore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// The number of digits (the check character and prefix not counted);
    /// [`crate::numbers::create`] sets it from the sequence's largest value.
    #[serde(default)]
    pub width: u32,
}

impl Encoding {
    /// An encoding with `prefix` (a trailing underscore is dropped), its
    /// width set to fit every `i64`. [`Encoding::with_max`] narrows it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a prefix that is not 1 to 16
    /// lower-case letters and digits starting with a letter.
    pub fn new(alphabet: Alphabet, prefix: Option<&str>) -> Result<Encoding> {
        let prefix = prefix.map(|p| p.strip_suffix('_').unwrap_or(p).to_owned());
        let e = Encoding {
            alphabet,
            prefix,
            width: alphabet.width_for(i64::MAX),
        };
        e.validate()?;
        Ok(e)
    }

    /// The same encoding with the width of values up to `max`.
    pub fn with_max(mut self, max: i64) -> Encoding {
        self.width = self.alphabet.width_for(max);
        self
    }

    /// Checks the prefix and the width.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what is wrong.
    pub fn validate(&self) -> Result<()> {
        if let Some(p) = &self.prefix {
            let ok = !p.is_empty()
                && p.len() <= MAX_PREFIX_BYTES
                && p.as_bytes()[0].is_ascii_lowercase()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if !ok {
                return Err(Error::invalid(format!(
                    "the prefix {:?} must be 1 to {MAX_PREFIX_BYTES} lower-case letters and digits, starting with a letter (like ord; ids then read ord_...)",
                    p.chars().take(40).collect::<String>()
                )));
            }
        }
        let most = self.alphabet.width_for(i64::MAX);
        if !(1..=most).contains(&self.width) {
            return Err(Error::invalid(format!(
                "a {} width is 1 to {most} digits, got {}",
                self.alphabet, self.width
            )));
        }
        Ok(())
    }

    /// `v` written out: prefix, `width` digits, check character.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative value or one too large for
    /// the width (a max raised after the sequence was created).
    pub fn encode(&self, v: i64) -> Result<String> {
        let a = self.alphabet;
        let too_wide = || {
            Error::invalid(format!(
                "{v} does not fit the sequence's {} {} digits (values 0 and up, as wide as its max when created)",
                self.width, a
            ))
        };
        let mut x = u64::try_from(v).map_err(|_| too_wide())?;
        let mut digits = vec![0u64; self.width as usize];
        for d in digits.iter_mut().rev() {
            *d = x % a.radix();
            x /= a.radix();
        }
        if x != 0 {
            return Err(too_wide());
        }
        let mut out = String::with_capacity(self.width as usize + 18);
        if let Some(p) = &self.prefix {
            out.push_str(p);
            out.push('_');
        }
        out.extend(digits.iter().map(|&d| a.digits()[d as usize] as char));
        out.push(a.check_char(&digits, v as u64) as char);
        Ok(out)
    }

    /// Whether `s` has this encoding's shape: it starts with the prefix and
    /// an underscore, or (without a prefix) has the strings' length. What
    /// tells an encoded string from an integer.
    pub fn looks_encoded(&self, s: &str) -> bool {
        match &self.prefix {
            Some(p) => s
                .strip_prefix(p.as_str())
                .is_some_and(|r| r.starts_with('_')),
            None => s.len() == self.width as usize + 1,
        }
    }

    /// The value a string [`Self::encode`] wrote.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what was wrong: the prefix, a
    /// character, the width, or the check character.
    pub fn decode(&self, s: &str) -> Result<i64> {
        let a = self.alphabet;
        let shown: String = s.chars().take(80).collect();
        let body = match &self.prefix {
            Some(p) => s
                .strip_prefix(p.as_str())
                .and_then(|r| r.strip_prefix('_'))
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "{shown:?} does not start with this sequence's prefix {p}_"
                    ))
                })?,
            None => s,
        };
        let want = self.width as usize + 1;
        if body.len() != want || !body.is_ascii() {
            return Err(Error::invalid(format!(
                "{shown:?} has the wrong width: this sequence's {a} ids have {} digits and a check character{}",
                self.width,
                self.prefix
                    .as_ref()
                    .map_or(String::new(), |p| format!(" after {p}_"))
            )));
        }
        let (digits_s, check) = body.as_bytes().split_at(self.width as usize);
        let mut digits = Vec::with_capacity(digits_s.len());
        let mut v: u64 = 0;
        for (i, &c) in digits_s.iter().enumerate() {
            let d = a.digit(c).ok_or_else(|| {
                Error::invalid(format!(
                    "{shown:?}: character {} ({:?}) is not a {a} digit",
                    i + 1,
                    c as char
                ))
            })?;
            digits.push(d);
            v = v
                .checked_mul(a.radix())
                .and_then(|v| v.checked_add(d))
                .filter(|v| *v <= i64::MAX as u64)
                .ok_or_else(|| Error::invalid(format!("{shown:?} is larger than any id")))?;
        }
        if !a.same_check(a.check_char(&digits, v), check[0]) {
            return Err(Error::invalid(format!(
                "{shown:?} has a wrong check character: a character was mistyped or two swapped"
            )));
        }
        Ok(v as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_strings() {
        let e = Encoding::new(Alphabet::Base32, Some("ord_")).unwrap();
        assert_eq!(e.prefix.as_deref(), Some("ord"));
        assert_eq!(e.width, 13);
        assert_eq!(e.encode(0).unwrap(), "ord_00000000000000");
        // 36 % 37 = 36: the check symbol U.
        assert_eq!(e.encode(36).unwrap(), "ord_0000000000014U");
        assert_eq!(e.decode("ord_0000000000014u").unwrap(), 36);
        assert_eq!(e.decode("ord_ooooooooooo14U").unwrap(), 36);
        let e = Encoding::new(Alphabet::Base62, None).unwrap();
        assert_eq!(e.width, 11);
        assert_eq!(e.encode(61).unwrap().len(), 12);
        let e = e.with_max((1 << 53) - 1);
        assert_eq!(e.width, 9);
        assert!(e.encode(i64::MAX).is_err());
        assert!(e.encode(-1).is_err());
    }

    #[test]
    fn bad_strings_are_refused_saying_why() {
        let e = Encoding::new(Alphabet::Base32, Some("ord"))
            .unwrap()
            .with_max(1_000_000);
        let good = e.encode(12_345).unwrap();
        assert_eq!(e.decode(&good).unwrap(), 12_345);
        let cases = [
            (good.replacen("ord", "usr", 1), "prefix"),
            (good[4..].to_owned(), "prefix"),
            (format!("{good}0"), "width"),
            (good[..good.len() - 1].to_owned(), "width"),
            (good.replacen("ord_0", "ord_!", 1), "not a base32 digit"),
            (good.replacen("ord_0", "ord_U", 1), "not a base32 digit"),
        ];
        for (bad, why) in cases {
            let m = e.decode(&bad).unwrap_err().to_string();
            assert!(m.contains(why), "{bad}: {m}");
        }
        for p in ["", "Ord", "1ab", "a-b", "abcdefghijklmnopq"] {
            assert!(Encoding::new(Alphabet::Base32, Some(p)).is_err(), "{p}");
        }
        assert!("base64".parse::<Alphabet>().is_err());
    }

    fn alphabet() -> impl Strategy<Value = Alphabet> {
        prop_oneof![Just(Alphabet::Base32), Just(Alphabet::Base62)]
    }

    proptest! {
        #[test]
        fn round_trip_and_order(a in alphabet(), max in 0i64..=i64::MAX, x in any::<i64>(), y in any::<i64>()) {
            let e = Encoding::new(a, Some("ord")).unwrap().with_max(max);
            let (x, y) = ((x & i64::MAX) % (max.saturating_add(1).max(1)), (y & i64::MAX) % (max.saturating_add(1).max(1)));
            let (sx, sy) = (e.encode(x).unwrap(), e.encode(y).unwrap());
            prop_assert_eq!(sx.len(), sy.len());
            prop_assert_eq!(e.decode(&sx).unwrap(), x);
            prop_assert_eq!(e.decode(&sy).unwrap(), y);
            prop_assert_eq!(sx.cmp(&sy), x.cmp(&y));
        }

        /// One mistyped digit is always caught (by the check character, or
        /// as a character outside the alphabet).
        #[test]
        fn a_single_wrong_character_is_caught(a in alphabet(), v in 0i64..=i64::MAX, pos in 0usize..13, to in 0usize..62) {
            let e = Encoding::new(a, None).unwrap();
            let s = e.encode(v).unwrap().into_bytes();
            let pos = pos % s.len();
            let to = a.digits()[to % a.digits().len()];
            prop_assume!(a.digit(to) != a.digit(s[pos]) || pos == s.len() - 1);
            prop_assume!(to != s[pos]);
            let mut bad = s.clone();
            bad[pos] = to;
            let bad = String::from_utf8(bad).unwrap();
            prop_assert!(e.decode(&bad).is_err(), "{} accepted", bad);
        }

        /// Swapping two different neighbouring base32 digits is caught.
        #[test]
        fn a_base32_swap_is_caught(v in 0i64..=i64::MAX, pos in 0usize..12) {
            let e = Encoding::new(Alphabet::Base32, None).unwrap();
            let mut s = e.encode(v).unwrap().into_bytes();
            prop_assume!(s[pos] != s[pos + 1]);
            s.swap(pos, pos + 1);
            let bad = String::from_utf8(s).unwrap();
            prop_assert!(e.decode(&bad).is_err(), "{} accepted", bad);
        }
    }
}
