//! What block-based uses (handles, reserve leases, alter, adopt) say to a
//! numbered sequence, whose numbers come from [`crate::numbers`] instead.

use crate::Error;
use crate::Result;
use crate::store::{NumberStore, Numbering};

/// The error for block-based use (a [`crate::sequence::Sequence`] handle, a
/// reserve lease, alter, adopt) of a numbered sequence.
pub(crate) fn blocks_refused(name: &str, numbering: &Numbering) -> Error {
    if numbering.gapless {
        Error::WrongKind(format!(
            "sequence {name:?} is gap-free: take its numbers with tickets (keysmith ticket take {name}, then keysmith ticket commit {name} TICKET; POST /v1/sequences/{name}/tickets), not in blocks"
        ))
    } else {
        Error::WrongKind(format!(
            "sequence {name:?} hands out numbered values (period or format): use keysmith next {name}, POST /v1/sequences/{name}/next or keysmith::numbers::Numbers; blocks of plain integers do not apply to it"
        ))
    }
}

/// Fails for a numbered sequence: what block-based uses (handles, reserve
/// leases, alter, adopt) call after reading the row.
///
/// # Errors
/// [`Error::WrongKind`] saying how to take its numbers instead.
pub(crate) async fn refuse_numbered(store: &dyn NumberStore, name: &str) -> Result<()> {
    match store.read_numbering(name).await? {
        Some(n) => Err(blocks_refused(name, &n)),
        None => Ok(()),
    }
}
