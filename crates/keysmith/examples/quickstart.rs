//! The library in five minutes, as the README and the user guide's "Getting
//! started" show it: they show the part between the ANCHOR lines, and
//! `keysmith-cli`'s test `book_examples` checks that they show it as it is
//! here, which `cargo test` compiles and runs (the example has `test = true`).
//!
//! ```sh
//! cargo run -p keysmith --example quickstart            # a store in a temporary directory
//! cargo run -p keysmith --example quickstart -- keys.db # or in keys.db, kept afterwards
//! ```

/// Creates the sequence `orders` in the SQLite store at `path` if it is
/// missing, and takes values from it: one, then a batch of three.
async fn run(path: &std::path::Path) -> keysmith::Result<(i64, Vec<i64>)> {
    let url = format!("sqlite://{}", path.display());
    // ANCHOR: body
    use keysmith::sequence::{self, Sequence};
    use keysmith::store::{self, SequenceSpec};

    // Open a store: sqlite://PATH, postgres://..., mysql://..., etcd://...
    let store = store::open(&url).await?;
    // Create the sequence unless it exists (`sequence::create` fails if it does).
    sequence::create_or_get(&*store, &SequenceSpec::new("orders")).await?;
    // A handle: reserves blocks of values in the store and hands them out from memory.
    let orders = Sequence::builder()
        .store(store)
        .name("orders")
        .build()
        .await?;
    let id = orders.next().await?; // 1 on a new sequence
    let batch = orders.next_n(3).await?; // 2, 3, 4
    orders.close().await?; // hands the unused rest of the block back
    // ANCHOR_END: body
    Ok((id, batch))
}

#[tokio::main]
async fn main() -> keysmith::Result<()> {
    let arg = std::env::args().nth(1);
    let dir = tempfile_dir();
    let path = match &arg {
        Some(p) => std::path::PathBuf::from(p),
        None => dir.join("keysmith.db"),
    };
    let (id, batch) = run(&path).await?;
    println!("{id}");
    for v in batch {
        println!("{v}");
    }
    if arg.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("keysmith-quickstart-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the guide shows: a new sequence starts at 1, a batch follows it,
    /// and running it again on the same store continues above every value.
    #[tokio::test]
    async fn a_new_sequence_hands_out_one_then_a_batch_and_continues_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keysmith.db");
        let (id, batch) = run(&path).await.unwrap();
        assert_eq!((id, batch), (1, vec![2, 3, 4]));
        let (id, batch) = run(&path).await.unwrap();
        assert_eq!(
            (id, batch),
            (5, vec![6, 7, 8]),
            "close handed the tail back"
        );
    }
}
