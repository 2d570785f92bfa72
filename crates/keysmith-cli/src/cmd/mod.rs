//! One module per group of subcommands.

pub mod access;
pub mod client_config;
pub mod counter;
pub mod docs;
pub mod ids;
pub mod import;
pub mod moved;
pub mod pool;
pub mod row_name;
pub mod sequence;
pub mod serve;
pub mod serve_config;
pub mod shard_key;
pub mod shard_set;
pub mod status;
pub mod ticket;
pub mod top;
pub mod verify;
pub mod words;
pub mod workers;

/// A bad argument found after parsing, before anything touched the store
/// (a value two flags must agree on, or what the library's checks of a
/// `create` refuse): `main` prints it and exits 2, as for clap's own usage
/// errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A help text shown as written: clap reads `{n}` in help as a line break,
/// which would swallow the `{n}` of a number template. Each `{n}` is split by
/// an invisible style reset, which clap's renderer drops (or, on a colour
/// terminal, prints as nothing), so the user sees `{n}`.
pub fn literal_help(text: &str) -> clap::builder::StyledStr {
    use std::fmt::Write;
    let mut out = clap::builder::StyledStr::new();
    let mut parts = text.split("{n}");
    out.push_str(parts.next().unwrap_or_default());
    for part in parts {
        // Writing to a StyledStr cannot fail.
        let _ = write!(out, "{{{}n}}{part}", clap::builder::styling::Reset);
    }
    out
}

/// `--increment K [--offset R]`: a residue class, taken by `create` and
/// `pool create` alike.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClassArgs {
    /// Every value is --offset modulo K (2 to 1000000): a residue class,
    /// one per region with a store of its own, so that no two regions
    /// ever hand out the same value. --start (and a sequence's --max) are
    /// rounded into the class.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub increment: Option<i64>,
    /// With --increment: every value's remainder, 0 <= R < K (default 0).
    #[arg(
        long,
        value_name = "R",
        requires = "increment",
        allow_negative_numbers = true
    )]
    pub offset: Option<i64>,
}

impl ClassArgs {
    /// The class given, checked ([`keysmith::store::Residue::validate`]);
    /// `None` without `--increment`.
    ///
    /// # Errors
    /// A [`UsageError`] with the library's message for a bad class.
    pub fn residue(&self) -> Result<Option<keysmith::store::Residue>, UsageError> {
        let Some(increment) = self.increment else {
            return Ok(None);
        };
        let r = keysmith::store::Residue {
            increment,
            offset: self.offset.unwrap_or(0),
        };
        r.validate().map_err(|e| UsageError(e.to_string()))?;
        Ok(Some(r))
    }
}

/// What `create` and `pool create` print to stderr when the store raised
/// the start above the values a dropped object of the name handed out.
pub fn continued_note(kind: &str, name: &str, first: i64) -> String {
    format!(
        "note: a {kind} named {name:?} was dropped before; creating it again continues above the values it \
         handed out, from {first} (--start-below-dropped starts where --start says)"
    )
}

/// The line `show` prints for a residue class.
pub fn class_line(r: &keysmith::store::Residue) -> String {
    format!(
        "values:    {} modulo {} (--increment {} --offset {})",
        r.offset, r.increment, r.increment, r.offset
    )
}
