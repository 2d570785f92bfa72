//! The in-process server-crash test, written once for every backend with a
//! server of the test's own (`backend_postgres.rs`, `backend_mysql.rs`
//! include it with `#[path]`), and the reservation helpers it and the
//! backend files use.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keysmith::Error;
use keysmith::store::{Put, SequenceSpec, Store};
use keysmith_testsupport::processes::ProcessBackend;

/// Allocation across a crash of the server: tasks allocate with all three
/// strategies; the server is killed while they run (PostgreSQL: immediate
/// shutdown; MariaDB: SIGKILL); they see `Unavailable` (refused, not hung,
/// naming the port and never the password) and wait; the server restarts
/// (crash recovery); the row then lies above every value handed out before
/// the crash (each was committed, with the log flushed, before it was
/// returned), and after the tasks resume no value has been handed out
/// twice and values continue above everything before the crash.
///
/// `backend` must have a server of the test's own
/// ([`ProcessBackend::server`]).
pub async fn server_crash_mid_run_loses_no_reservation_and_repeats_no_value(
    backend: &dyn ProcessBackend,
) {
    let server = backend
        .server()
        .expect("the crash test needs a server of its own");
    let url = backend.fresh_url();
    let url = format!(
        "{url}{}timeout=5",
        if url.contains('?') { '&' } else { '?' }
    );
    let password = url_password(&url);
    let store = keysmith::store::open(&url).await.unwrap();
    store
        .create_sequence(&SequenceSpec::new("s"))
        .await
        .unwrap();

    const TASKS: usize = 6;
    const AFTER: usize = 20; // reservations per task after the restart
    let handed_out = Arc::new(Mutex::new(Vec::<(i64, i64)>::new()));
    let done_before = Arc::new(AtomicUsize::new(0));
    let paused = Arc::new(AtomicUsize::new(0));
    let (up_tx, up_rx) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (store, handed_out, done_before, paused) = (
            store.clone(),
            handed_out.clone(),
            done_before.clone(),
            paused.clone(),
        );
        let mut up_rx = up_rx.clone();
        tasks.push(tokio::spawn(async move {
            let mut after = 0;
            let mut unavailable = 0;
            while after < AFTER {
                match reserve(&*store, i % 3).await {
                    Ok(r) => {
                        handed_out.lock().unwrap().push(r);
                        if *up_rx.borrow() {
                            after += 1;
                        } else {
                            done_before.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Err(Error::Unavailable(msg)) => {
                        assert!(!msg.contains('\n'), "{msg}");
                        unavailable += 1;
                        if !*up_rx.borrow() {
                            // Server down: say so once, then wait for it.
                            if unavailable == 1 {
                                paused.fetch_add(1, Ordering::SeqCst);
                            }
                            up_rx.wait_for(|up| *up).await.unwrap();
                        }
                    }
                    Err(e) => panic!("task {i}: unexpected error {e}"),
                }
            }
            unavailable
        }));
    }

    wait_until("60 reservations before the crash", || {
        done_before.load(Ordering::SeqCst) >= 60
    })
    .await;
    server.crash();

    // With the server gone, calls fail with Unavailable (refused, not hung).
    for e in [
        store.read_sequence("s").await.unwrap_err(),
        store.reserve_atomic("s", 1).await.unwrap_err(),
        store.reserve_locked("s", 1).await.unwrap_err(),
        store.put_if_version("s", 1, 1).await.unwrap_err(),
        store.ping().await.unwrap_err(),
    ] {
        assert!(matches!(e, Error::Unavailable(_)), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(&server.port().to_string()), "{msg}");
        if let Some(password) = &password {
            assert!(!msg.contains(password.as_str()), "{msg}");
        }
    }
    wait_until("every task to see the server down", || {
        paused.load(Ordering::SeqCst) == TASKS
    })
    .await;
    let before: Vec<(i64, i64)> = handed_out.lock().unwrap().clone();

    server.restart();
    // The pool's connections died with the server: the first calls may still
    // report Unavailable, then the store reconnects.
    let deadline = Instant::now() + Duration::from_secs(60);
    let row = loop {
        match store.read_sequence("s").await {
            Ok(row) => break row.unwrap(),
            Err(Error::Unavailable(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("after restart: {e}"),
        }
    };
    let top = before.iter().map(|r| r.1).max().unwrap();
    assert!(
        row.next >= top,
        "crash lost a reservation: next is {} but {top} was handed out",
        row.next
    );

    up_tx.send(true).unwrap();
    let mut unavailable = 0;
    for t in tasks {
        unavailable += t.await.unwrap();
    }
    assert!(unavailable >= TASKS, "every task saw the server down");
    let mut all = handed_out.lock().unwrap().clone();
    assert_eq!(all.len(), before.len() + TASKS * AFTER);
    all.sort();
    for w in all.windows(2) {
        assert!(w[0].1 <= w[1].0, "value handed out twice: {w:?}");
    }
    // Values after the restart continue above everything before it.
    let after_min = all
        .iter()
        .filter(|r| !before.contains(r))
        .map(|r| r.0)
        .min()
        .unwrap();
    assert!(after_min >= top);
}

/// The password in a `scheme://user:password@host/...` URL, if it has one.
fn url_password(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let userinfo = rest.split_once('@')?.0;
    let password = userinfo.split_once(':')?.1;
    (!password.is_empty()).then(|| password.to_owned())
}

/// One reservation of 7 values of sequence `s` with strategy 0
/// (optimistic), 1 (locked) or 2 (atomic).
pub async fn reserve(store: &dyn Store, strategy: usize) -> keysmith::Result<(i64, i64)> {
    match strategy {
        0 => loop {
            let row = store.read_sequence("s").await?.unwrap();
            let plan = row.plan(7)?;
            if let Put::Done(_) = store.put_if_version("s", plan.end, row.version).await? {
                return Ok((plan.start, plan.end));
            }
        },
        1 => store.reserve_locked("s", 7).await.map(|r| (r.start, r.end)),
        _ => store.reserve_atomic("s", 7).await.map(|r| (r.start, r.end)),
    }
}

/// Waits until `cond` holds, failing the test after two minutes.
pub async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
