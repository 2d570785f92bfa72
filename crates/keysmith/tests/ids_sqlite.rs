//! Time-ordered ids on a real SQLite file, from many generators at once.

use std::collections::HashSet;
use std::sync::Arc;

use keysmith::ids::IdGenerator;
use keysmith::store::Store;
use keysmith::store::sqlite::SqliteStore;

fn assert_increasing(v: &[i64]) {
    assert!(v.windows(2).all(|w| w[0] < w[1]), "not increasing: {v:?}");
}

/// Generators on one SQLite file, used by many tasks at once, with the real
/// clock and background renewal: all ids unique, each task's increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generators_on_one_file_never_share_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.db");
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let s: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).await.unwrap());
        let g = Arc::new(IdGenerator::builder().store(s).build().await.unwrap());
        for _ in 0..4 {
            let g = g.clone();
            tasks.push(tokio::spawn(async move {
                let mut v = Vec::new();
                for _ in 0..200 {
                    v.extend(g.next_n(25).await.unwrap());
                }
                v
            }));
        }
    }
    let mut all = HashSet::new();
    for t in tasks {
        let v = t.await.unwrap();
        assert_increasing(&v);
        for id in v {
            assert!(all.insert(id), "{id} twice");
        }
    }
    assert_eq!(all.len(), 3 * 4 * 200 * 25);
}
