//! Names under a prefix as a range of a name index.

/// The names that start with a prefix as a range of a SQL store's name
/// index: `name >= from` and, when there is an end, `name < to`
/// ([`crate::prefix_end`]). For the SQL backends' overrides of
/// [`crate::store::SequenceStore::count_sequences_with_prefix`] and
/// [`crate::store::PoolStore::pool_totals_with_prefix`], whose names sort by bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixRange {
    /// The prefix itself: the least name in the range.
    pub from: String,
    /// The least string above the range, if there is one.
    pub to: Option<String>,
}

impl PrefixRange {
    /// The range of the names starting with `prefix`.
    pub fn of(prefix: &str) -> PrefixRange {
        PrefixRange {
            from: prefix.to_owned(),
            to: crate::prefix_end(prefix),
        }
    }

    /// The SQL condition on `column`, its parameters written by
    /// `placeholder(1)` and `placeholder(2)` (`?1`, `$1`, `?`); bind
    /// [`Self::params`] in that order.
    pub fn condition(&self, column: &str, placeholder: impl Fn(usize) -> String) -> String {
        match self.to {
            Some(_) => format!(
                "{column} >= {} AND {column} < {}",
                placeholder(1),
                placeholder(2)
            ),
            None => format!("{column} >= {}", placeholder(1)),
        }
    }

    /// The parameters of [`Self::condition`], in order.
    pub fn params(&self) -> Vec<&str> {
        std::iter::once(self.from.as_str())
            .chain(self.to.as_deref())
            .collect()
    }
}
