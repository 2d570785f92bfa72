//! Moving from Leaf or Tinyid: [`import_from`].

use serde::Serialize;

use super::{SourceDatabase, admin};
use crate::store::{DEFAULT_BLOCK, DEFAULT_START, MAX_RESERVATION, Residue, SequenceSpec, Store};
use crate::{Error, Result};

/// Whose table is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportFormat {
    /// Meituan Leaf's segment mode: `leaf_alloc (biz_tag, max_id, step,
    /// description, update_time)`.
    Leaf,
    /// Didi Tinyid: `tiny_id_info (id, biz_type, begin_id, max_id, step,
    /// delta, remainder, create_time, update_time, version)`.
    Tinyid,
}

impl ImportFormat {
    /// The table the allocator keeps its rows in by default.
    pub fn default_table(self) -> &'static str {
        match self {
            ImportFormat::Leaf => "leaf_alloc",
            ImportFormat::Tinyid => "tiny_id_info",
        }
    }

    /// The column that names a row (`biz_tag`, `biz_type`).
    pub fn name_column(self) -> &'static str {
        match self {
            ImportFormat::Leaf => "biz_tag",
            ImportFormat::Tinyid => "biz_type",
        }
    }
}

impl std::str::FromStr for ImportFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "leaf" => Ok(ImportFormat::Leaf),
            "tinyid" => Ok(ImportFormat::Tinyid),
            other => Err(Error::invalid(format!(
                "unknown format {other:?}; use leaf (Meituan Leaf's leaf_alloc) or tinyid (Didi Tinyid's tiny_id_info)"
            ))),
        }
    }
}

/// One row of the old allocator's table, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceRow {
    /// `biz_tag` (Leaf) or `biz_type` (Tinyid): the sequence's name.
    pub name: String,
    /// The largest value the old allocator may have handed out (Tinyid), or
    /// one above it (Leaf).
    pub max_id: i64,
    /// Values per segment; `None` when the column is NULL.
    pub step: Option<i64>,
    /// Tinyid's increment (1 for Leaf).
    pub delta: i64,
    /// Tinyid's residue (0 for Leaf).
    pub remainder: i64,
}

/// What [`import_from`] did with one row (in JSON: `"created"`, `"exists"`,
/// `"refused"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportAction {
    /// A sequence was created (or with `dry_run` would be).
    Created,
    /// A keysmith sequence of that name is there: left as it is.
    Exists,
    /// The row cannot become a sequence (the item's note says why).
    Refused,
}

/// What [`import_from`] did with one row (or with `dry_run` would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportItem {
    /// The row read.
    #[serde(flatten)]
    pub source: SourceRow,
    /// What became of the row.
    pub action: ImportAction,
    /// The new sequence's first value, or the existing one's next value.
    pub start: Option<i64>,
    /// The new sequence's block.
    pub block: Option<i64>,
    /// Why a row was refused, or what to look at.
    pub note: Option<String>,
}

/// What [`import_from`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportReport {
    /// Whose table was read.
    pub format: ImportFormat,
    /// The table read.
    pub table: String,
    /// One item per row, in the table's order of names.
    pub items: Vec<ImportItem>,
    /// Whether nothing was written.
    pub dry_run: bool,
}

impl ImportReport {
    /// How many items had `action`.
    pub fn count(&self, action: ImportAction) -> usize {
        self.items.iter().filter(|i| i.action == action).count()
    }
}

/// Reads every row of the old allocator's table (`table`, default
/// [`ImportFormat::default_table`]) from the database `from`
/// (`mysql://USER[:PASSWORD]@HOST[:PORT]/DB`, as a store URL) and creates
/// one sequence per row in `store` (as below);
/// with `dry_run` nothing is written. A row that cannot become a sequence
/// (a name keysmith does not accept, Tinyid residue classes, a `max_id` at
/// the top of the range) is refused with a note; the others go ahead.
///
/// # Errors
/// [`Error::InvalidArgument`] for a URL that is not a MySQL one, a missing
/// table or column; [`Error::Unavailable`] when a database cannot be
/// reached. Rows already created stay created when a later one fails on the
/// store.
///
/// Moving from another segment allocator: Meituan Leaf's `leaf_alloc` table
/// or Didi Tinyid's `tiny_id_info`, read from their MySQL database, become
/// one keysmith sequence per row.
///
/// Each sequence starts above the row's `max_id`, so no value at or below
/// the old `max_id` is ever handed out again, whatever the old service had
/// cached: Leaf hands out values below `max_id` (its segment is
/// `max_id - step .. max_id`), Tinyid up to `max_id` (`max_id - step ..=
/// max_id`, by `delta`). The block is the row's `step`. A keysmith sequence
/// that exists already is reported, never overwritten. A Tinyid row with a
/// residue class (`delta` above 1: several Tinyid servers sharing one
/// `biz_type`, each with its `remainder`) becomes a sequence of that class
/// ([`super::create_in_class`]), starting at its first value above `max_id`.
///
/// `from` is the old allocator's database, opened by a driver: the
/// `keysmith` crate's `sequence::import` opens it from a URL and calls this.
pub async fn import_from(
    store: &dyn Store,
    format: ImportFormat,
    from: &dyn SourceDatabase,
    table: Option<&str>,
    dry_run: bool,
) -> Result<ImportReport> {
    let table = table.unwrap_or(format.default_table()).to_owned();
    if table.is_empty() || table.contains('\0') {
        return Err(Error::invalid(format!(
            "the table name {table:?} is empty or holds a NUL byte"
        )));
    }
    let rows = from.allocator_rows(format, &table).await?;
    let mut items = Vec::with_capacity(rows.len());
    for source in rows {
        items.push(import_row(store, format, source, dry_run).await?);
    }
    Ok(ImportReport {
        format,
        table,
        items,
        dry_run,
    })
}

/// The spec of a row's sequence and its residue class (Tinyid's `delta`
/// above 1), or why there is none.
fn plan(
    format: ImportFormat,
    row: &SourceRow,
) -> std::result::Result<(SequenceSpec, Option<Residue>), String> {
    crate::validate_name(&row.name).map_err(|e| e.to_string())?;
    let residue = match (format, row.delta, row.remainder) {
        (ImportFormat::Tinyid, 1, 0) | (ImportFormat::Leaf, _, _) => None,
        (ImportFormat::Tinyid, delta, remainder) => {
            let r = Residue {
                increment: delta,
                offset: remainder,
            };
            r.validate().map_err(|e| {
                format!(
                    "delta={delta} remainder={remainder} is not a residue class keysmith keeps: {e}"
                )
            })?;
            Some(r)
        }
    };
    let start = row
        .max_id
        .checked_add(1)
        .filter(|s| *s <= crate::store::MAX_VALUE)
        .ok_or_else(|| {
            format!(
                "max_id {} leaves no value above it for a 64-bit sequence",
                row.max_id
            )
        })?
        .max(DEFAULT_START);
    let block = match row.step {
        Some(s) if (1..=MAX_RESERVATION).contains(&s) => s,
        _ => DEFAULT_BLOCK,
    };
    let spec = SequenceSpec {
        start,
        block,
        ..SequenceSpec::new(&row.name)
    };
    spec.validate().map_err(|e| e.to_string())?;
    if let Some(r) = &residue {
        super::spec_in_slots(r, &spec).map_err(|e| e.to_string())?;
    }
    Ok((spec, residue))
}

async fn import_row(
    store: &dyn Store,
    format: ImportFormat,
    source: SourceRow,
    dry_run: bool,
) -> Result<ImportItem> {
    let item = |action, start, block, note| ImportItem {
        source: source.clone(),
        action,
        start,
        block,
        note,
    };
    let (spec, residue) = match plan(format, &source) {
        Ok(planned) => planned,
        Err(why) => return Ok(item(ImportAction::Refused, None, None, Some(why))),
    };
    // The first value of the class above max_id.
    let mut start = residue.map_or(spec.start, |r| r.first_at_or_above(spec.start));
    let step_note = match source.step {
        Some(s) if s == spec.block => None,
        other => Some(format!(
            "step {} is not a usable block; block {} instead",
            other.map_or("NULL".to_owned(), |s| s.to_string()),
            spec.block
        )),
    };
    let exists = |next: i64| {
        let note = if next <= source.max_id {
            format!(
                "left as it is; its next value {next} is at or below the old max_id {}: alter {:?} to next {} before using it",
                source.max_id, source.name, spec.start
            )
        } else {
            "left as it is; it is above the old max_id".to_owned()
        };
        item(ImportAction::Exists, Some(next), None, Some(note))
    };
    match admin::show(store, &source.name).await {
        Ok(info) => return Ok(exists(info.row.next)),
        Err(Error::NotFound { .. }) => {}
        Err(e) => return Err(e),
    }
    if !dry_run {
        let created = match residue {
            Some(r) => admin::create_in_class(store, &spec, r).await,
            None => admin::create(store, &spec).await,
        };
        match created {
            // Over a dropped name the store continues above the values it
            // handed out, which may be above max_id.
            Ok(info) => start = info.row.next,
            Err(Error::AlreadyExists { .. }) => {
                // Created by someone else meanwhile.
                let info = admin::show(store, &source.name).await?;
                return Ok(exists(info.row.next));
            }
            Err(e) => return Err(e),
        }
    }
    let note = match (residue, step_note) {
        (None, note) => note,
        (Some(r), note) => Some(
            [
                Some(format!(
                    "values {} modulo {} (Tinyid's remainder and delta)",
                    r.offset, r.increment
                )),
                note,
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; "),
        ),
    };
    Ok(item(
        ImportAction::Created,
        Some(start),
        Some(spec.block),
        note,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, max_id: i64, step: Option<i64>, delta: i64, remainder: i64) -> SourceRow {
        SourceRow {
            name: name.into(),
            max_id,
            step,
            delta,
            remainder,
        }
    }

    #[test]
    fn sequences_start_above_the_old_max_id_with_the_step_as_block() {
        let (s, r) = plan(ImportFormat::Leaf, &row("orders", 5000, Some(1000), 1, 0)).unwrap();
        assert_eq!((s.name.as_str(), s.start, s.block), ("orders", 5001, 1000));
        assert_eq!(r, None);
        let (s, _) = plan(ImportFormat::Tinyid, &row("t", 0, None, 1, 0)).unwrap();
        assert_eq!((s.start, s.block), (DEFAULT_START, DEFAULT_BLOCK));
        let (s, _) = plan(ImportFormat::Tinyid, &row("t", 9, Some(0), 1, 0)).unwrap();
        assert_eq!((s.start, s.block), (10, DEFAULT_BLOCK));
    }

    #[test]
    fn tinyid_residue_classes_become_sequences_of_the_class() {
        let (s, r) = plan(ImportFormat::Tinyid, &row("odd", 100, Some(10), 2, 1)).unwrap();
        assert_eq!(
            r,
            Some(Residue {
                increment: 2,
                offset: 1
            })
        );
        assert_eq!(s.start, 101);
        let e = plan(ImportFormat::Tinyid, &row("bad", 1, Some(10), 2, 2)).unwrap_err();
        assert!(e.contains("delta=2 remainder=2"), "{e}");
    }

    #[test]
    fn rows_keysmith_cannot_serve_are_refused_with_a_reason() {
        // Leaf has no delta: the columns are not read.
        assert!(plan(ImportFormat::Leaf, &row("x", 1, Some(10), 1, 0)).is_ok());
        let e = plan(ImportFormat::Leaf, &row("has space", 1, Some(10), 1, 0)).unwrap_err();
        assert!(e.contains("whitespace"), "{e}");
        let e = plan(
            ImportFormat::Leaf,
            &row("top", i64::MAX - 1, Some(10), 1, 0),
        )
        .unwrap_err();
        assert!(e.contains("no value above"), "{e}");
    }

    #[test]
    fn formats_parse() {
        assert_eq!("leaf".parse::<ImportFormat>().unwrap(), ImportFormat::Leaf);
        assert_eq!(
            "tinyid".parse::<ImportFormat>().unwrap(),
            ImportFormat::Tinyid
        );
        assert!("snowflake".parse::<ImportFormat>().is_err());
    }
}
