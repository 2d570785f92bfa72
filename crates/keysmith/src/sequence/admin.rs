//! Creating, describing, listing and dropping sequences: what the CLI and
//! the server call, with the name checks and the "did you mean" in one place.

use crate::store::{SequenceSpec, Store};
use crate::{Error, Result, closest_names, validate_name};

use super::SequenceInfo;

/// Creates a sequence.
///
/// # Errors
/// [`Error::InvalidName`] / [`Error::InvalidArgument`] for a bad spec (see
/// [`SequenceSpec::validate`]), [`Error::AlreadyExists`], what the store
/// fails with. Nothing is written on error.
pub async fn create(store: &dyn Store, spec: &SequenceSpec) -> Result<SequenceInfo> {
    spec.validate()?;
    Ok(store.create(spec).await?.into())
}

/// The current state of a sequence.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names.
pub async fn describe(store: &dyn Store, name: &str) -> Result<crate::store::Row> {
    validate_name(name)?;
    match store.read(name).await? {
        Some(row) => Ok(row),
        None => Err(not_found(store, name).await),
    }
}

/// Every sequence, by name.
///
/// # Errors
/// What the store fails with.
pub async fn list(store: &dyn Store) -> Result<Vec<SequenceInfo>> {
    Ok(store.list().await?.into_iter().map(Into::into).collect())
}

/// Drops a sequence. Its values are gone for good: a sequence created later
/// under the same name starts again from its own start.
///
/// # Errors
/// [`Error::InvalidName`]; [`Error::NotFound`] listing similar names.
pub async fn remove(store: &dyn Store, name: &str) -> Result<()> {
    validate_name(name)?;
    match store.drop_sequence(name).await {
        Err(Error::NotFound { .. }) => Err(not_found(store, name).await),
        other => other,
    }
}

async fn not_found(store: &dyn Store, name: &str) -> Error {
    let similar = match store.list().await {
        Ok(rows) => closest_names(name, rows.iter().map(|r| r.name.as_str())),
        Err(_) => Vec::new(),
    };
    Error::NotFound {
        kind: "sequence",
        name: name.to_owned(),
        similar,
    }
}
