//! The SQLite store on a 3 MiB file system: its write-ahead log stays below
//! `WAL_SIZE_LIMIT` through thousands of reservations and pool takes, so the
//! disk never fills by itself; and once something else fills it, a
//! reservation fails with a clear error and allocation works again when the
//! space comes back, handing nothing out twice.
//!
//! Needs root (it mounts a tmpfs); skips with a reason otherwise, or fails
//! under `KEYSMITH_REQUIRE_BACKENDS=1`.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use keysmith::Error;
use keysmith::pool::ValuePool;
use keysmith::sequence::Strategy;
use keysmith::sequence::lease::lease;
use keysmith::store::sqlite::{SqliteStore, WAL_SIZE_LIMIT};
use keysmith::store::{PoolSpec, SequenceSpec, Store};

/// A tmpfs mounted on a temporary directory, unmounted on drop (also when
/// the test fails).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// A tmpfs of `size` (as `mount -o size=` takes it), or why not.
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let uid = Command::new("id")
            .arg("-u")
            .output()
            .map_err(|e| format!("cannot run `id -u`: {e}"))?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Err("mounting a tmpfs needs root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily if a file is still open (a task of the store finishing):
        // the mount goes now, its memory when the file is closed.
        for args in [&[][..], &["-l"][..]] {
            let out = Command::new("umount")
                .args(args)
                .arg(self.dir.path())
                .output();
            match out {
                Ok(o) if o.status.success() => return,
                other => eprintln!(
                    "umount {args:?} {} failed: {other:?}",
                    self.dir.path().display()
                ),
            }
        }
    }
}

fn wal_size(db: &Path) -> u64 {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(PathBuf::from(wal))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// What the run handed out, and checks on it.
#[derive(Default)]
struct Seen {
    values: HashSet<i64>,
    pool: HashSet<i64>,
    max_wal: u64,
}

impl Seen {
    fn values(&mut self, range: std::ops::Range<i64>) {
        for v in range {
            assert!(self.values.insert(v), "value {v} handed out twice");
        }
    }

    fn pool(&mut self, v: i64) {
        assert!(self.pool.insert(v), "pool number {v} handed out twice");
    }

    fn wal(&mut self, db: &Path) {
        let size = wal_size(db);
        self.max_wal = self.max_wal.max(size);
        assert!(
            size <= WAL_SIZE_LIMIT,
            "the write-ahead log is {size} bytes, past its limit of {WAL_SIZE_LIMIT}"
        );
    }
}

const BUDGET: Duration = Duration::from_secs(5);

/// `rounds` rounds of three reservations (one per strategy) and a pool take,
/// none of which may fail; the log checked after each.
async fn allocate(
    store: &Arc<dyn Store>,
    pool: &ValuePool,
    db: &Path,
    seen: &mut Seen,
    rounds: usize,
) {
    for round in 0..rounds {
        for strategy in [Strategy::Atomic, Strategy::Optimistic, Strategy::Locked] {
            let n = 1 + (round % 3) as i64;
            let l = lease(store.clone(), "s", n, strategy, BUDGET)
                .await
                .unwrap_or_else(|e| panic!("round {round}: reservation failed: {e}"));
            seen.values(l.start..l.end);
            seen.wal(db);
        }
        let v = pool
            .take()
            .await
            .unwrap_or_else(|e| panic!("round {round}: pool take failed: {e}"));
        seen.pool(v);
        seen.wal(db);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_stays_small_on_a_tiny_disk_and_allocation_recovers_from_a_full_one() {
    let fs = match Tmpfs::mount("3m") {
        Ok(fs) => fs,
        Err(why) => {
            keysmith_testsupport::skip_or_fail("sqlite on a 3 MiB tmpfs", &why);
            return;
        }
    };
    let db = fs.path().join("k.db");
    let sqlite = SqliteStore::open(&db).await.unwrap();
    let store: Arc<dyn Store> = Arc::new(sqlite);
    keysmith::sequence::create(&*store, &SequenceSpec::new("s"))
        .await
        .unwrap();
    keysmith::pool::create(&*store, &PoolSpec::new("p", 1000))
        .await
        .unwrap();
    let pool = ValuePool::builder()
        .store(store.clone())
        .name("p")
        .build()
        .await
        .unwrap();
    let mut seen = Seen::default();

    // Thousands of writes: 12,000 reservations and 4,000 pool takes, each a
    // commit of several pages; with SQLite's defaults the log alone grows
    // to about 4 MiB, past the disk.
    allocate(&store, &pool, &db, &mut seen, 4000).await;
    assert!(seen.max_wal > 0, "the log was written");
    eprintln!(
        "largest write-ahead log seen: {} bytes (limit {WAL_SIZE_LIMIT})",
        seen.max_wal
    );

    // Fill the disk: cut the log to nothing first (from a connection of the
    // test's own), so that the next commit needs new space, then write a
    // filler until the file system refuses.
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        let busy: i64 = c
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .unwrap();
        assert_eq!(busy, 0, "the checkpoint finished");
    }
    assert_eq!(wal_size(&db), 0);
    let filler = fs.path().join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5_u8; 4096];
        loop {
            if let Err(e) = f.write_all(&chunk).and_then(|()| f.sync_all()) {
                assert_eq!(e.raw_os_error(), Some(28), "ENOSPC expected, got {e}");
                break;
            }
        }
    }
    let e = lease(store.clone(), "s", 1, Strategy::Atomic, BUDGET)
        .await
        .expect_err("a reservation on a full disk fails");
    assert!(matches!(e, Error::Unavailable(_)), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("disk holding the database is full"), "{msg}");
    assert!(msg.contains("free space"), "{msg}");
    let e = pool
        .take()
        .await
        .expect_err("a pool take on a full disk fails");
    assert!(e.to_string().contains("is full"), "{e}");

    // Space again: allocation goes on, nothing is handed out twice, the log
    // stays small.
    std::fs::remove_file(&filler).unwrap();
    allocate(&store, &pool, &db, &mut seen, 500).await;
    let next = keysmith::sequence::show(&*store, "s").await.unwrap();
    let max = *seen.values.iter().max().unwrap();
    assert!(
        next.row.next > max,
        "the row's next ({}) is above every value handed out ({max})",
        next.row.next
    );
    drop(pool);
    drop(store);
}
