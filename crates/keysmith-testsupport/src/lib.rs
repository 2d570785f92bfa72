//! Test support for keysmith: throwaway PostgreSQL, MariaDB, etcd and Prometheus servers started
//! from the installed binaries, torn down on drop; and [`processes`], the
//! process and crash scenarios every backend runs.
//!
//! Where a binary is missing, [`skip_or_fail`] prints why the test skips, or
//! panics when `KEYSMITH_REQUIRE_BACKENDS=1` (as CI sets it).

pub mod etcd;
pub mod etcd_restore;
pub mod mariadb;
pub mod netns;
pub mod partitions;
pub mod pg_replica;
pub mod postgres;
pub mod processes;
pub mod prometheus;
pub mod tls;

/// Called when a backend's server binary is missing: returns normally (the
/// caller then skips) after printing why, or panics when
/// `KEYSMITH_REQUIRE_BACKENDS=1`.
pub fn skip_or_fail(backend: &str, why: &str) {
    if std::env::var("KEYSMITH_REQUIRE_BACKENDS").as_deref() == Ok("1") {
        panic!("{backend} tests required (KEYSMITH_REQUIRE_BACKENDS=1) but cannot run: {why}");
    }
    eprintln!("SKIP {backend} tests: {why}; install it or see .ci/run");
}

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
}

/// Checks a value pool's invariants after a run and returns its holes.
///
/// Asserts that no number in `taken` appears twice, that `members` holds
/// exactly `size` numbers, one per residue modulo `size`, none of them taken,
/// and that every taken number lies below its residue's member. Returns the
/// holes: numbers below their residue's member that nobody reported taking
/// (a taker killed between its swap and printing leaves one).
pub fn pool_holes(start: i64, size: i64, taken: &[i64], members: &[i64]) -> Vec<i64> {
    use std::collections::{BTreeMap, BTreeSet};
    let taken_set: BTreeSet<i64> = taken.iter().copied().collect();
    assert_eq!(
        taken_set.len(),
        taken.len(),
        "a number was handed out twice"
    );
    assert_eq!(
        members.len() as i64,
        size,
        "the pool lost or gained members"
    );
    let mut by_residue = BTreeMap::new();
    for &m in members {
        assert!(!taken_set.contains(&m), "{m} is both taken and a member");
        assert!(m >= start, "member {m} is below the pool's start {start}");
        assert!(
            by_residue.insert((m - start) % size, m).is_none(),
            "two members share a residue"
        );
    }
    let mut holes = Vec::new();
    let mut below = 0;
    for (&r, &m) in &by_residue {
        let mut v = start + r;
        while v < m {
            below += 1;
            if !taken_set.contains(&v) {
                holes.push(v);
            }
            v += size;
        }
    }
    assert_eq!(
        below,
        taken.len() + holes.len(),
        "a taken number is above its residue's member"
    );
    holes
}

/// Makes the process `cmd` starts receive `signal` when the process that
/// started it dies (`PR_SET_PDEATHSIG`), and refuse to start if that one is
/// gone already. Call it after any `pre_exec` that changes the user (which
/// clears the setting). The death signal fires when the starting *thread*
/// ends, so spawn from a thread that lasts ([`postgres::spawn_from_lasting_thread`]).
pub(crate) fn die_with_parent(cmd: &mut std::process::Command, signal: libc::c_int) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and only
    // calls async-signal-safe functions (prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("parent exited"));
            }
            Ok(())
        });
    }
}

/// Kills `child` with SIGKILL and reaps it, through a shared reference: for
/// the exit handlers of servers kept in statics, which are never dropped.
pub(crate) fn kill_and_reap(child: &std::process::Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain syscalls on our own child's pid, which stays unreaped
    // (and so not reused) until waitpid.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
}
