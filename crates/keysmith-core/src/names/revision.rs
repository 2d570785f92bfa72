//! Revision numbers per branch, from a keysmith sequence.

use std::sync::Arc;

use crate::sequence::{self, Sequence};
use crate::store::{SequenceSpec, Store};
use crate::{Error, Result};

use super::Branch;

/// The next revision number of `branch`: 1 for its first revision, then 2,
/// 3, ... with no gaps other than numbers lost by callers that crashed after
/// taking them.
///
/// The numbers come from the keysmith sequence named after the branch row
/// (`branch.to_string()`, e.g. `https://example.com/a#3`), taken one at a
/// time (block 1, the strict mode), so they are unique across processes and
/// hosts sharing `store` and increase in the order they were taken. The
/// sequence is created here on first use, starting at 1; this is the one
/// place where keysmith creates a sequence implicitly. When two callers race
/// to create it, one creates it and both use it.
///
/// Build the revision's row name with [`Branch::revision`]:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> keysmith_core::Result<()> {
/// use keysmith_core::names::{Branch, next_revision};
/// let store = keysmith_core::store::open("memory://").await?;
/// let branch = Branch::new("https://example.com/a".parse()?, 3);
/// let n = next_revision(&store, &branch).await?;
/// assert_eq!(branch.revision(Some("en_GB".parse()?), n).to_string(), "https://example.com/a#en_GB/3.1");
/// assert_eq!(next_revision(&store, &branch).await?, 2);
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`Error::InvalidName`] if the branch row name cannot name a sequence (it
/// is longer than [`crate::MAX_NAME_BYTES`]); [`Error::Exhausted`] after
/// [`MAX_VALUE`](crate::store::MAX_VALUE) revisions; what the store fails with
/// ([`Error::Unavailable`], [`Error::Corrupt`]).
pub async fn next_revision(store: &Arc<dyn Store>, branch: &Branch) -> Result<u64> {
    let name = branch.to_string();
    let seq = match open(store, &name).await {
        Err(Error::NotFound { .. }) => {
            let spec = SequenceSpec {
                block: 1,
                ..SequenceSpec::new(name.clone())
            };
            sequence::create_or_get(&**store, &spec).await?;
            open(store, &name).await?
        }
        other => other?,
    };
    let value = seq.next().await?;
    // Revision sequences start at 1 and never go below their start; a
    // negative value means someone recreated the sequence by hand.
    u64::try_from(value).map_err(|_| {
        Error::Corrupt(format!(
            "sequence {name:?} handed out the revision number {value}, which is negative; \
             it was not created by next_revision: drop it and recreate it starting above the branch's highest revision"
        ))
    })
}

async fn open(store: &Arc<dyn Store>, name: &str) -> Result<Sequence> {
    Sequence::builder()
        .store(store.clone())
        .name(name)
        .block(1)
        .build()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::ContentUrl;

    fn branch(url: &str, b: u64) -> Branch {
        Branch::new(ContentUrl::parse(url).unwrap(), b)
    }

    #[tokio::test]
    async fn revisions_count_per_branch_from_one() {
        let store = crate::store::open("memory://").await.unwrap();
        let a3 = branch("https://example.com/a", 3);
        let a4 = branch("https://example.com/a", 4);
        assert_eq!(next_revision(&store, &a3).await.unwrap(), 1);
        assert_eq!(next_revision(&store, &a3).await.unwrap(), 2);
        assert_eq!(next_revision(&store, &a4).await.unwrap(), 1);
        // Another spelling of the same URL is the same branch.
        let same = branch("HTTPS://EXAMPLE.com:443/x/../a", 3);
        assert_eq!(next_revision(&store, &same).await.unwrap(), 3);
        let row = store
            .read_sequence("https://example.com/a#3")
            .await
            .unwrap()
            .unwrap();
        assert_eq!((row.start, row.block, row.next), (1, 1, 4));
    }

    #[tokio::test]
    async fn racing_first_use_creates_once_and_hands_out_each_number_once() {
        let store = crate::store::open("memory://").await.unwrap();
        let b = branch("https://example.com/race", 0);
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (store, b) = (Arc::clone(&store), b.clone());
                tokio::spawn(async move { next_revision(&store, &b).await })
            })
            .collect();
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap().unwrap());
        }
        got.sort_unstable();
        assert_eq!(got, (1..=8).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn too_long_branch_names_are_refused() {
        let store = crate::store::open("memory://").await.unwrap();
        let long = format!("https://example.com/{}", "a".repeat(600));
        let err = next_revision(&store, &branch(&long, 1)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidName { .. }), "{err}");
        assert!(store.list_sequences().await.unwrap().is_empty());
    }
}
