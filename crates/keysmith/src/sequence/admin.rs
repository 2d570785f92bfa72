//! Creating, describing, listing and dropping sequences: what the CLI and
//! the server call, with the name checks and the "did you mean" in one place.

use crate::store::{SequenceRow, SequenceSpec, SequenceStore};
use crate::{Error, Result, closest_names, validate_name};

use super::SequenceInfo;

/// Creates a sequence.
///
/// # Errors
/// [`Error::InvalidName`] / [`Error::InvalidArgument`] for a bad spec (see
/// [`SequenceSpec::validate`]), [`Error::AlreadyExists`], what the store
/// fails with. Nothing is written on error.
pub async fn create(store: &dyn SequenceStore, spec: &SequenceSpec) -> Result<SequenceInfo> {
    spec.validate()?;
    Ok(store.create_sequence(spec).await?.into())
}

/// Creates a sequence unless one of that name exists, and returns the row
/// the store holds: the new one, or the existing one, whatever its bounds
/// (callers that care compare them). When two callers race, one creates it
/// and both get its row. The one place keysmith creates a sequence on first
/// use (revision numbers, identity ranges).
///
/// # Errors
/// As [`create`]; [`Error::AlreadyExists`] only if the sequence was dropped
/// again between the failed create and the read.
pub async fn create_or_get(store: &dyn SequenceStore, spec: &SequenceSpec) -> Result<SequenceRow> {
    spec.validate()?;
    match store.create_sequence(spec).await {
        Err(Error::AlreadyExists { kind, name }) => match store.read_sequence(&spec.name).await? {
            Some(row) => Ok(row),
            None => Err(Error::AlreadyExists { kind, name }),
        },
        other => other,
    }
}

/// The current state of a sequence.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names.
pub async fn describe(store: &dyn SequenceStore, name: &str) -> Result<SequenceRow> {
    validate_name(name)?;
    match store.read_sequence(name).await? {
        Some(row) => Ok(row),
        None => Err(not_found(store, name).await),
    }
}

/// Every sequence, by name.
///
/// # Errors
/// What the store fails with.
pub async fn list(store: &dyn SequenceStore) -> Result<Vec<SequenceInfo>> {
    Ok(store
        .list_sequences()
        .await?
        .into_iter()
        .map(Into::into)
        .collect())
}

/// Drops a sequence. Its values are gone for good: a sequence created later
/// under the same name starts again from its own start.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names.
pub async fn remove(store: &dyn SequenceStore, name: &str) -> Result<()> {
    validate_name(name)?;
    match store.drop_sequence(name).await {
        Err(Error::NotFound { .. }) => Err(not_found(store, name).await),
        other => other,
    }
}

async fn not_found(store: &dyn SequenceStore, name: &str) -> Error {
    let similar = match store.list_sequences().await {
        Ok(rows) => closest_names(name, rows.iter().map(|r| r.name.as_str())),
        Err(_) => Vec::new(),
    };
    Error::NotFound {
        kind: "sequence",
        name: name.to_owned(),
        similar,
    }
}
