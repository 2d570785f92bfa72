//! Structured row names for content-managed sites.
//!
//! A row is named from its content's canonical URL, with the rest of the key
//! after a `#`:
//!
//! | kind | form |
//! | --- | --- |
//! | content | `<url>` |
//! | branch | `<url>#<branch>` |
//! | revision | `<url>#<language>_<COUNTRY>/<branch>.<revision>`, `<url>#<language>/<branch>.<revision>`, `<url>#<branch>.<revision>` |
//! | draft | `<url>#user/<user>/<locale>/<branch>`, `<url>#user/<user>/<branch>` |
//! | suggestion | `<url>#suggestion/<locale>/<branch>`, `<url>#suggestion/<branch>` |
//! | user | `user/<user>`, `<domain>/user/<user>` |
//!
//! Branches and revisions are non-negative integers in plain decimal (no sign,
//! no leading zero). A locale is a language of two or three lower-case letters,
//! optionally followed by `_` and a country of two upper-case letters, in every
//! kind that takes one. A user identifier is 1 to [`MAX_USER_ID_BYTES`] bytes
//! without `/`, `#`, whitespace or control characters.
//!
//! The URL is made canonical when a name is parsed or built ([`ContentUrl`]),
//! so two spellings of one URL name one row, and `Display` always writes the
//! canonical form. For every [`RowName`] `n`, `n.to_string().parse() == Ok(n)`.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use url::Url;

use crate::name::shorten;
use crate::{Error, Result};

use super::parse_decimal;

/// The longest user identifier accepted, in bytes.
pub const MAX_USER_ID_BYTES: usize = 256;

/// A content's canonical URL: `http` or `https`, with a host, no user name or
/// password, no fragment, and in canonical form:
///
/// - scheme and host in lower case (international domain names in their
///   ASCII `xn--` form), the scheme's default port dropped;
/// - the path normalised: `.` and `..` segments resolved, characters that
///   need it percent-encoded, percent-encodings of unreserved characters
///   (`A-Z a-z 0-9 - . _ ~`) decoded, the others written in upper case
///   (RFC 3986, 6.2.2), and a `%` that starts no escape written `%25`; the
///   same for the query;
/// - an empty query (`?`) and an empty fragment (`#`) dropped.
///
/// ```
/// use keysmith_core::names::ContentUrl;
/// let url: ContentUrl = "HTTPS://Example.COM:443/a/./b/../%7euser/?#".parse()?;
/// assert_eq!(url.as_str(), "https://example.com/a/~user/");
/// # Ok::<(), keysmith_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentUrl(Url);

impl ContentUrl {
    /// Parses and canonicalises a URL.
    ///
    /// # Errors
    /// [`Error::InvalidName`] saying what is wrong: not an absolute URL, not
    /// http(s), no host, a user name or password, a non-empty fragment,
    /// whitespace or control characters.
    pub fn parse(s: &str) -> Result<Self> {
        Self::parse_inner(s).map_err(|reason| Error::InvalidName {
            name: shorten(s),
            reason,
        })
    }

    fn parse_inner(s: &str) -> std::result::Result<Self, String> {
        if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "the URL may not contain whitespace or control characters (found {c:?}); percent-encode them"
            ));
        }
        let mut url = Url::parse(s).map_err(|e| {
            format!("the URL is not a valid absolute URL ({e}); write it as https://host/path")
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "the URL's scheme {:?} is not http or https",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("the URL has no host; write it as https://host/path".to_owned());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(
                "the URL contains a user name or password; a content URL has neither".to_owned(),
            );
        }
        match url.fragment() {
            None => {}
            Some("") => url.set_fragment(None),
            Some(f) => {
                return Err(format!(
                    "the URL has the fragment {f:?}; a content URL has none (in a row name, '#' starts the branch part)"
                ));
            }
        }
        let path = normalise_percent(url.path());
        url.set_path(&path);
        match url.query() {
            Some("") => url.set_query(None),
            Some(q) => {
                let q = normalise_percent(q);
                url.set_query(Some(&q));
            }
            None => {}
        }
        Ok(ContentUrl(url))
    }

    /// The canonical URL as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The canonical URL.
    pub fn url(&self) -> &Url {
        &self.0
    }
}

impl fmt::Display for ContentUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ContentUrl {
    type Err = Error;

    /// As [`ContentUrl::parse`].
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Decodes `%XX` escapes of unreserved characters, upper-cases the hex
/// digits of the others and escapes a `%` that starts no escape as `%25`;
/// everything else is kept as it is.
fn normalise_percent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && b[i + 1].is_ascii_hexdigit()
            && b[i + 2].is_ascii_hexdigit()
        {
            let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            let byte = hex(b[i + 1]) * 16 + hex(b[i + 2]);
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                out.push(byte as char);
            } else {
                out.push('%');
                out.push(b[i + 1].to_ascii_uppercase() as char);
                out.push(b[i + 2].to_ascii_uppercase() as char);
            }
            i += 3;
        } else if b[i] == b'%' {
            // A '%' that starts no escape stands for itself: write it as one,
            // so that decoding what follows cannot make it start one later.
            out.push_str("%25");
            i += 1;
        } else {
            // Copy up to the next '%' (a char boundary: '%' is ASCII).
            let next = s[i..].find('%').map_or(s.len(), |p| i + p);
            out.push_str(&s[i..next]);
            i = next;
        }
    }
    out
}

/// A locale: a language of two or three lower-case ASCII letters (ISO 639),
/// optionally with a country of two upper-case ASCII letters (ISO 3166),
/// written `en` or `en_GB`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Locale {
    language: String,
    country: Option<String>,
}

impl Locale {
    /// A locale from its parts.
    ///
    /// # Errors
    /// [`Error::InvalidName`] saying which part is wrong.
    pub fn new(language: &str, country: Option<&str>) -> Result<Self> {
        let name = match country {
            Some(c) => format!("{language}_{c}"),
            None => language.to_owned(),
        };
        Self::from_parts(language, country).map_err(|reason| Error::InvalidName {
            name: shorten(&name),
            reason,
        })
    }

    fn from_parts(language: &str, country: Option<&str>) -> std::result::Result<Self, String> {
        if !(2..=3).contains(&language.len()) || !language.bytes().all(|b| b.is_ascii_lowercase()) {
            let hint = if language.contains('-') {
                "; write a locale with '_', as in en_GB"
            } else {
                ""
            };
            return Err(format!(
                "the language {language:?} must be two or three lower-case letters, as in en or haw{hint}"
            ));
        }
        if let Some(c) = country
            && (c.len() != 2 || !c.bytes().all(|b| b.is_ascii_uppercase()))
        {
            return Err(format!(
                "the country {c:?} must be two upper-case letters, as in GB"
            ));
        }
        Ok(Locale {
            language: language.to_owned(),
            country: country.map(str::to_owned),
        })
    }

    fn parse_inner(s: &str) -> std::result::Result<Self, String> {
        match s.split_once('_') {
            Some((language, country)) => Self::from_parts(language, Some(country)),
            None => Self::from_parts(s, None),
        }
    }

    /// The language, e.g. `en`.
    pub fn language(&self) -> &str {
        &self.language
    }

    /// The country, e.g. `GB`, if any.
    pub fn country(&self) -> Option<&str> {
        self.country.as_deref()
    }
}

impl fmt::Display for Locale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.country {
            Some(c) => write!(f, "{}_{c}", self.language),
            None => f.write_str(&self.language),
        }
    }
}

impl FromStr for Locale {
    type Err = Error;

    /// Parses `en` or `en_GB`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] saying which part is wrong.
    fn from_str(s: &str) -> Result<Self> {
        Self::parse_inner(s).map_err(|reason| Error::InvalidName {
            name: shorten(s),
            reason,
        })
    }
}

/// A user identifier: 1 to [`MAX_USER_ID_BYTES`] bytes without `/`, `#`,
/// whitespace or control characters. Case is kept: `Alice` and `alice` are
/// two users.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(String);

impl UserId {
    /// Checks and wraps an identifier.
    ///
    /// # Errors
    /// [`Error::InvalidName`] saying what is wrong.
    pub fn new(id: &str) -> Result<Self> {
        Self::parse_inner(id).map_err(|reason| Error::InvalidName {
            name: shorten(id),
            reason,
        })
    }

    fn parse_inner(id: &str) -> std::result::Result<Self, String> {
        let why = if id.is_empty() {
            "it is empty".to_owned()
        } else if id.len() > MAX_USER_ID_BYTES {
            format!(
                "it is {} bytes long, the most is {MAX_USER_ID_BYTES}",
                id.len()
            )
        } else if let Some(c) = id
            .chars()
            .find(|&c| c == '/' || c == '#' || c.is_whitespace() || c.is_control())
        {
            format!(
                "it contains {c:?}; '/', '#', whitespace and control characters are not allowed"
            )
        } else {
            return Ok(UserId(id.to_owned()));
        };
        Err(format!("the user identifier {id:?} is not valid: {why}"))
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for UserId {
    type Err = Error;

    /// As [`UserId::new`].
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

/// A site's domain (or IP address), in canonical form: lower case,
/// international names in their ASCII `xn--` form, no port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Domain(String);

impl Domain {
    /// Parses and canonicalises a domain.
    ///
    /// # Errors
    /// [`Error::InvalidName`] if it is not a valid host name.
    pub fn new(domain: &str) -> Result<Self> {
        Self::parse_inner(domain).map_err(|reason| Error::InvalidName {
            name: shorten(domain),
            reason,
        })
    }

    fn parse_inner(domain: &str) -> std::result::Result<Self, String> {
        let bad = |why: &str| format!("the domain {domain:?} is not valid: {why}");
        if domain.is_empty() {
            return Err(bad("it is empty"));
        }
        if domain.contains([':', '/', '#', '?', '@']) && !domain.starts_with('[') {
            return Err(bad(
                "a domain is a host name only, without scheme, port, path or user",
            ));
        }
        if domain.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it contains whitespace or control characters"));
        }
        let host = url::Host::parse(domain).map_err(|e| bad(&e.to_string()))?;
        let canonical = host.to_string();
        if canonical.is_empty() || canonical.contains(['/', '#']) {
            return Err(bad("it is not a host name"));
        }
        Ok(Domain(canonical))
    }

    /// The canonical domain.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Domain {
    type Err = Error;

    /// As [`Domain::new`].
    fn from_str(s: &str) -> Result<Self> {
        Self::new(s)
    }
}

/// A branch of a content: `<url>#<branch>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Branch {
    /// The content.
    pub content: ContentUrl,
    /// The branch number.
    pub branch: u64,
}

impl Branch {
    /// Branch `branch` of `content`.
    pub fn new(content: ContentUrl, branch: u64) -> Self {
        Branch { content, branch }
    }

    /// Revision `revision` of this branch, in `locale` if given.
    pub fn revision(&self, locale: Option<Locale>, revision: u64) -> Revision {
        Revision {
            content: self.content.clone(),
            locale,
            branch: self.branch,
            revision,
        }
    }

    /// `user`'s draft of this branch, in `locale` if given.
    pub fn draft(&self, user: UserId, locale: Option<Locale>) -> Draft {
        Draft {
            content: self.content.clone(),
            user,
            locale,
            branch: self.branch,
        }
    }

    /// The visitors' suggestion row of this branch, in `locale` if given.
    pub fn suggestion(&self, locale: Option<Locale>) -> Suggestion {
        Suggestion {
            content: self.content.clone(),
            locale,
            branch: self.branch,
        }
    }
}

impl fmt::Display for Branch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.content, self.branch)
    }
}

/// A revision of a branch: `<url>#[<locale>/]<branch>.<revision>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Revision {
    /// The content.
    pub content: ContentUrl,
    /// The locale of this revision, if any.
    pub locale: Option<Locale>,
    /// The branch number.
    pub branch: u64,
    /// The revision number.
    pub revision: u64,
}

impl Revision {
    /// The branch this is a revision of.
    pub fn branch(&self) -> Branch {
        Branch::new(self.content.clone(), self.branch)
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#", self.content)?;
        if let Some(l) = &self.locale {
            write!(f, "{l}/")?;
        }
        write!(f, "{}.{}", self.branch, self.revision)
    }
}

/// An author's draft of a branch: `<url>#user/<user>/[<locale>/]<branch>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Draft {
    /// The content.
    pub content: ContentUrl,
    /// The author.
    pub user: UserId,
    /// The locale, if any.
    pub locale: Option<Locale>,
    /// The branch number.
    pub branch: u64,
}

impl fmt::Display for Draft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#user/{}/", self.content, self.user)?;
        if let Some(l) = &self.locale {
            write!(f, "{l}/")?;
        }
        write!(f, "{}", self.branch)
    }
}

/// Visitors' suggestions for a branch: `<url>#suggestion/[<locale>/]<branch>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Suggestion {
    /// The content.
    pub content: ContentUrl,
    /// The locale, if any.
    pub locale: Option<Locale>,
    /// The branch number.
    pub branch: u64,
}

impl fmt::Display for Suggestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#suggestion/", self.content)?;
        if let Some(l) = &self.locale {
            write!(f, "{l}/")?;
        }
        write!(f, "{}", self.branch)
    }
}

/// A user row: `user/<user>`, or `<domain>/user/<user>` with the site's
/// domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    /// The site's domain, if the row carries it.
    pub domain: Option<Domain>,
    /// The user.
    pub user: UserId,
}

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(d) = &self.domain {
            write!(f, "{d}/")?;
        }
        write!(f, "user/{}", self.user)
    }
}

/// The kind of a [`RowName`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowKind {
    /// A content row: its canonical URL.
    Content,
    /// A branch of a content.
    Branch,
    /// A revision of a branch.
    Revision,
    /// An author's draft.
    Draft,
    /// Visitors' suggestions.
    Suggestion,
    /// A user.
    User,
}

impl RowKind {
    /// The kind in lower case: `content`, `branch`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            RowKind::Content => "content",
            RowKind::Branch => "branch",
            RowKind::Revision => "revision",
            RowKind::Draft => "draft",
            RowKind::Suggestion => "suggestion",
            RowKind::User => "user",
        }
    }
}

impl fmt::Display for RowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A structured row name; see the [module docs](crate::names) for the forms.
///
/// `Display` writes the canonical form and `FromStr` reads any accepted
/// spelling: `n.to_string().parse() == Ok(n)` for every `n`.
///
/// ```
/// use keysmith_core::names::{RowName, RowKind};
/// let n: RowName = "https://Example.com/docs/intro#en_GB/2.17".parse()?;
/// assert_eq!(n.kind(), RowKind::Revision);
/// assert_eq!(n.to_string(), "https://example.com/docs/intro#en_GB/2.17");
/// let err = "https://example.com/a#en_gb/2.17".parse::<RowName>().unwrap_err();
/// assert!(err.to_string().contains("the country \"gb\" must be two upper-case letters"));
/// # Ok::<(), keysmith_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowName {
    /// A content row.
    Content(ContentUrl),
    /// A branch.
    Branch(Branch),
    /// A revision.
    Revision(Revision),
    /// A draft.
    Draft(Draft),
    /// Suggestions.
    Suggestion(Suggestion),
    /// A user.
    User(User),
}

impl RowName {
    /// The kind of row.
    pub fn kind(&self) -> RowKind {
        match self {
            RowName::Content(_) => RowKind::Content,
            RowName::Branch(_) => RowKind::Branch,
            RowName::Revision(_) => RowKind::Revision,
            RowName::Draft(_) => RowKind::Draft,
            RowName::Suggestion(_) => RowKind::Suggestion,
            RowName::User(_) => RowKind::User,
        }
    }

    /// The content URL, for every kind but users.
    pub fn content(&self) -> Option<&ContentUrl> {
        match self {
            RowName::Content(c) => Some(c),
            RowName::Branch(b) => Some(&b.content),
            RowName::Revision(r) => Some(&r.content),
            RowName::Draft(d) => Some(&d.content),
            RowName::Suggestion(s) => Some(&s.content),
            RowName::User(_) => None,
        }
    }

    /// The parts of the name, flat, for printing as JSON.
    pub fn parts(&self) -> RowNameParts {
        let mut p = RowNameParts {
            name: self.to_string(),
            kind: self.kind(),
            url: self.content().map(ToString::to_string),
            branch: None,
            revision: None,
            locale: None,
            language: None,
            country: None,
            user: None,
            domain: None,
        };
        let locale = match self {
            RowName::Content(_) => None,
            RowName::Branch(b) => {
                p.branch = Some(b.branch);
                None
            }
            RowName::Revision(r) => {
                p.branch = Some(r.branch);
                p.revision = Some(r.revision);
                r.locale.as_ref()
            }
            RowName::Draft(d) => {
                p.branch = Some(d.branch);
                p.user = Some(d.user.to_string());
                d.locale.as_ref()
            }
            RowName::Suggestion(s) => {
                p.branch = Some(s.branch);
                s.locale.as_ref()
            }
            RowName::User(u) => {
                p.user = Some(u.user.to_string());
                p.domain = u.domain.as_ref().map(ToString::to_string);
                None
            }
        };
        if let Some(l) = locale {
            p.locale = Some(l.to_string());
            p.language = Some(l.language().to_owned());
            p.country = l.country().map(str::to_owned);
        }
        p
    }

    fn parse_inner(s: &str) -> std::result::Result<Self, String> {
        if s.is_empty() {
            return Err("a row name must not be empty".to_owned());
        }
        if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "row names may not contain whitespace or control characters (found {c:?})"
            ));
        }
        let (head, key) = match s.split_once('#') {
            Some((head, key)) => (head, Some(key)),
            None => (s, None),
        };
        if !head.contains("://") {
            if key.is_some() {
                return Err(format!(
                    "{head:?} is not a content URL (it has no scheme://), and '#' may only follow one; write it as https://host/path#..."
                ));
            }
            return parse_user(s).map(RowName::User);
        }
        let content = ContentUrl::parse_inner(head)?;
        let key = match key {
            None | Some("") => return Ok(RowName::Content(content)),
            Some(key) => key,
        };
        let segments: Vec<&str> = key.split('/').collect();
        match segments.as_slice() {
            ["user", rest @ ..] => {
                let (user, locale, branch) = match rest {
                    [user, branch] => (user, None, branch),
                    [user, locale, branch] => (user, Some(locale), branch),
                    _ => {
                        return Err(format!(
                            "the draft part {key:?} must be user/USER/BRANCH or user/USER/LOCALE/BRANCH, as in user/alice/en_GB/3"
                        ));
                    }
                };
                Ok(RowName::Draft(Draft {
                    content,
                    user: UserId::parse_inner(user)?,
                    locale: locale.map(|l| Locale::parse_inner(l)).transpose()?,
                    branch: number("branch", branch)?,
                }))
            }
            ["suggestion", rest @ ..] => {
                let (locale, branch) = match rest {
                    [branch] => (None, branch),
                    [locale, branch] => (Some(locale), branch),
                    _ => {
                        return Err(format!(
                            "the suggestion part {key:?} must be suggestion/BRANCH or suggestion/LOCALE/BRANCH, as in suggestion/en_GB/3"
                        ));
                    }
                };
                Ok(RowName::Suggestion(Suggestion {
                    content,
                    locale: locale.map(|l| Locale::parse_inner(l)).transpose()?,
                    branch: number("branch", branch)?,
                }))
            }
            [last] => match last.split_once('.') {
                None => Ok(RowName::Branch(Branch {
                    content,
                    branch: number("branch", last)?,
                })),
                Some((branch, revision)) => Ok(RowName::Revision(Revision {
                    content,
                    locale: None,
                    branch: number("branch", branch)?,
                    revision: number("revision", revision)?,
                })),
            },
            [locale, last] => {
                let locale = Locale::parse_inner(locale)?;
                let (branch, revision) = last.split_once('.').ok_or_else(|| {
                    format!(
                        "after the locale comes BRANCH.REVISION, as in {locale}/3.7, not {last:?} (a branch has no locale)"
                    )
                })?;
                Ok(RowName::Revision(Revision {
                    content,
                    locale: Some(locale),
                    branch: number("branch", branch)?,
                    revision: number("revision", revision)?,
                }))
            }
            _ => Err(format!(
                "the part after '#' ({key:?}) is not BRANCH, [LOCALE/]BRANCH.REVISION, user/USER/[LOCALE/]BRANCH or suggestion/[LOCALE/]BRANCH"
            )),
        }
    }
}

fn parse_user(s: &str) -> std::result::Result<User, String> {
    let segments: Vec<&str> = s.split('/').collect();
    match segments.as_slice() {
        ["user", user] => Ok(User {
            domain: None,
            user: UserId::parse_inner(user)?,
        }),
        [domain, "user", user] => Ok(User {
            domain: Some(Domain::parse_inner(domain)?),
            user: UserId::parse_inner(user)?,
        }),
        // user/a/b...: the identifier would contain '/'.
        ["user", _, _, ..] => Err(UserId::parse_inner(&s["user/".len()..])
            .err()
            .unwrap_or_else(|| "a user row is user/USER or DOMAIN/user/USER".to_owned())),
        _ => Err(format!(
            "{s:?} is neither a content URL (write the scheme, as in https://example.com/a) nor a user row (user/USER or DOMAIN/user/USER)"
        )),
    }
}

fn number(what: &str, s: &str) -> std::result::Result<u64, String> {
    parse_decimal(s).map_err(|why| format!("the {what} {s:?} is not a non-negative integer: {why}"))
}

impl fmt::Display for RowName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowName::Content(c) => c.fmt(f),
            RowName::Branch(b) => b.fmt(f),
            RowName::Revision(r) => r.fmt(f),
            RowName::Draft(d) => d.fmt(f),
            RowName::Suggestion(s) => s.fmt(f),
            RowName::User(u) => u.fmt(f),
        }
    }
}

impl FromStr for RowName {
    type Err = Error;

    /// Parses any of the forms in the [module docs](crate::names), making the URL
    /// canonical.
    ///
    /// # Errors
    /// [`Error::InvalidName`] whose reason names the part that is wrong (the
    /// URL, branch, revision, language, country, user identifier, domain) or
    /// the form that was expected.
    fn from_str(s: &str) -> Result<Self> {
        Self::parse_inner(s).map_err(|reason| Error::InvalidName {
            name: shorten(s),
            reason,
        })
    }
}

macro_rules! into_row_name {
    ($($t:ident),*) => {$(
        impl From<$t> for RowName {
            fn from(v: $t) -> Self {
                RowName::$t(v)
            }
        }
    )*};
}
into_row_name!(Branch, Revision, Draft, Suggestion, User);

impl From<ContentUrl> for RowName {
    fn from(v: ContentUrl) -> Self {
        RowName::Content(v)
    }
}

/// The parts of a [`RowName`], flat; absent parts are left out of the JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowNameParts {
    /// The canonical name.
    pub name: String,
    /// The kind of row.
    pub kind: RowKind,
    /// The canonical content URL (every kind but `user`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The branch number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<u64>,
    /// The revision number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The locale, `en` or `en_GB`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// The locale's language.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// The locale's country.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The user identifier (drafts and users).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The site's domain (users).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

#[cfg(test)]
#[path = "row_name_tests.rs"]
mod tests;
