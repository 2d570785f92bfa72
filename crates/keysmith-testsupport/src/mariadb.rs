//! Throwaway MariaDB: `mariadb-install-db` into a temporary directory, a
//! `mariadbd` on a free port of 127.0.0.1, a user with a password, torn
//! down when dropped.
//!
//! # Binaries
//!
//! `mariadbd`, `mariadb-install-db` and the `mariadb` client are taken from
//! `$KEYSMITH_MARIADB_BIN` if set, else from `/usr/sbin`, `/usr/bin` and
//! `PATH` (Debian's `mariadb-server` package puts them there). When one is
//! missing, [`TempMariaDb::start`] calls [`crate::skip_or_fail`] and returns
//! `None`.
//!
//! # Users
//!
//! The data directory is made with `--auth-root-authentication-method=normal`
//! (root logs in over the server's Unix socket, which is in the temporary
//! directory, with no password); the server then gets an account
//! `keysmith@127.0.0.1` with a random password and every privilege, which
//! [`TempMariaDb::url`] names. Grant tables are on: logins are checked as
//! in production.
//!
//! # Running as root
//!
//! `mariadbd` refuses to run as root. When this process is root the server
//! and `mariadb-install-db` run as `$KEYSMITH_MARIADB_USER`, else `mysql` if
//! that account exists, else `nobody`: the child drops its groups and sets
//! its group and user id before `exec`, then sets `PR_SET_PDEATHSIG`, so the
//! server dies with the test process however that dies (as the PostgreSQL
//! support does; see there).
//!
//! # Durability
//!
//! The server runs with `innodb_flush_log_at_trx_commit=1` and the
//! doublewrite buffer on, so [`TempMariaDb::kill`] (SIGKILL: a crash as
//! far as the data files know) and [`TempMariaDb::restart`] test crash
//! recovery for real.

use std::fs::{self, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::postgres::{lookup_user, read_from, signal, spawn_from_lasting_thread, wait_or_kill};

/// The account [`TempMariaDb::url`] logs in as.
pub const USER: &str = "keysmith";

/// The database [`TempMariaDb::url`] names (created at start).
pub const DATABASE: &str = "keysmith";

/// How long start-up (and crash recovery) may take.
const READY_DEADLINE: Duration = Duration::from_secs(90);

/// How long a stop may take before the server is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// A MariaDB server in a temporary directory, owned by this process.
///
/// Dropping it kills the server and removes the directory.
#[derive(Debug)]
pub struct TempMariaDb {
    dir: TempDir,
    bins: Bins,
    run_as: Option<(u32, u32)>,
    port: u16,
    password: String,
    /// `--ssl-cert`, `--ssl-key`, `--ssl-ca` (copies in the directory).
    tls: Option<[PathBuf; 3]>,
    child: Mutex<Option<Child>>,
}

#[derive(Debug, Clone)]
struct Bins {
    server: PathBuf,
    install: PathBuf,
    client: PathBuf,
}

impl TempMariaDb {
    /// Makes a data directory, starts a server on a free port, and creates
    /// the account and database of [`url`](Self::url).
    ///
    /// Returns `None` after [`crate::skip_or_fail`] when the MariaDB
    /// binaries are not installed (so it panics instead when
    /// `KEYSMITH_REQUIRE_BACKENDS=1`).
    ///
    /// # Panics
    /// When the binaries are there but fail: the message holds their output.
    pub fn start() -> Option<TempMariaDb> {
        TempMariaDb::start_inner(None)
    }

    /// As [`start`](Self::start), with TLS: the server presents `certs`'
    /// server certificate (signed by `certs.ca`). Plain connections are
    /// still accepted, so that the tests can compare.
    ///
    /// Returns `None` (after [`crate::skip_or_fail`]) as [`start`](Self::start) does.
    pub fn start_tls(certs: &crate::tls::Certs) -> Option<TempMariaDb> {
        TempMariaDb::start_inner(Some(certs))
    }

    fn start_inner(certs: Option<&crate::tls::Certs>) -> Option<TempMariaDb> {
        let bins = match find_bins() {
            Ok(b) => b,
            Err(why) => {
                crate::skip_or_fail("MariaDB", &why);
                return None;
            }
        };
        let run_as = match unprivileged_user() {
            Ok(u) => u,
            Err(why) => {
                crate::skip_or_fail("MariaDB", &why);
                return None;
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("keysmith-mariadb-")
            .tempdir()
            .expect("cannot create a temporary directory for MariaDB");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("cannot hand the temporary directory to the MariaDB user");
        }
        let mut db = TempMariaDb {
            dir,
            bins,
            run_as,
            port: 0,
            password: random_password(),
            tls: None,
            child: Mutex::new(None),
        };
        if let Some(certs) = certs {
            // Copies the server's user can read (the certificates' own
            // directory is private to this process's user).
            let copy = |from: &Path, name: &str| {
                let to = db.dir.path().join(name);
                fs::copy(from, &to).unwrap_or_else(|e| panic!("cannot copy {name}: {e}"));
                if let Some((uid, gid)) = run_as {
                    let _ = std::os::unix::fs::chown(&to, Some(uid), Some(gid));
                }
                to
            };
            db.tls = Some([
                copy(&certs.server_cert, "server-cert.pem"),
                copy(&certs.server_key, "server-key.pem"),
                copy(&certs.ca, "ca.pem"),
            ]);
        }
        db.install();
        let mut last = String::new();
        for _ in 0..5 {
            db.port = crate::free_port();
            match db.launch() {
                Ok(()) => {
                    db.sql(&format!(
                        "CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{pw}';
                         GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'127.0.0.1' WITH GRANT OPTION;
                         CREATE DATABASE {DATABASE};",
                        pw = db.password
                    ));
                    return Some(db);
                }
                Err(log) => last = log,
            }
        }
        panic!("MariaDB did not start after 5 attempts; last log:\n{last}");
    }

    /// One server for the whole test binary, started on first use, killed
    /// and removed when the process exits. Tests that share it must not stop
    /// it; give each test its own database ([`Self::fresh_url`]).
    ///
    /// Returns `None` (after [`crate::skip_or_fail`]) as [`start`](Self::start) does.
    pub fn shared() -> Option<&'static TempMariaDb> {
        static SHARED: OnceLock<Option<TempMariaDb>> = OnceLock::new();
        extern "C" fn cleanup() {
            if let Some(Some(db)) = SHARED.get() {
                db.halt();
                let _ = fs::remove_dir_all(db.dir.path());
            }
        }
        SHARED
            .get_or_init(|| {
                let db = TempMariaDb::start()?;
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(cleanup) };
                Some(db)
            })
            .as_ref()
    }

    /// `mysql://keysmith:PASSWORD@127.0.0.1:PORT/keysmith`, with
    /// `ssl-mode=disabled` (the server has no certificate).
    pub fn url(&self) -> String {
        self.url_for(DATABASE)
    }

    /// As [`url`](Self::url), for database `db`.
    pub fn url_for(&self, db: &str) -> String {
        format!(
            "mysql://{USER}:{}@127.0.0.1:{}/{db}?ssl-mode=disabled",
            self.password, self.port
        )
    }

    /// Creates a new, empty database (`ks_N`, numbered in this process) and
    /// returns its URL: a store of its own.
    pub fn fresh_url(&self) -> String {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let db = format!("ks_{}_{n}", std::process::id());
        self.sql(&format!("CREATE DATABASE {db}"));
        self.url_for(&db)
    }

    /// The password of [`USER`].
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The TCP port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's Unix socket, where root logs in without a password.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("mariadbd.sock")
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Runs SQL as root (over the socket, with the `mariadb` client) and
    /// returns what it printed: tab-separated rows, no header.
    ///
    /// # Panics
    /// When the statement fails.
    pub fn sql(&self, sql: &str) -> String {
        let out = Command::new(&self.bins.client)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket().display()))
            .args(["-uroot", "--batch", "--skip-column-names", "-e", sql])
            .stdin(Stdio::null())
            .output()
            .expect("cannot run the mariadb client");
        assert!(
            out.status.success(),
            "mariadb -e {sql:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether the server process is running.
    pub fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        match child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Kills the server with SIGKILL: no shutdown, clients cut off; the next
    /// start runs crash recovery. Returns when the process has exited.
    ///
    /// # Panics
    /// When the server is not running.
    pub fn kill(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let mut child = guard.take().expect("kill: the server is not running");
        signal(&child, libc::SIGKILL);
        wait_or_kill(&mut child, STOP_DEADLINE);
    }

    /// Starts the server again on the same port and data directory (after
    /// [`kill`](Self::kill): crash recovery first) and returns when it
    /// accepts connections.
    ///
    /// # Panics
    /// When it is running already, or does not come up.
    pub fn restart(&self) {
        assert!(!self.is_running(), "restart: the server is still running");
        if let Err(log) = self.launch() {
            panic!("MariaDB did not restart on port {}; log:\n{log}", self.port);
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("mariadbd.log")
    }

    /// The server's own temporary directory: concurrent bootstraps that
    /// share one (`/tmp`) can crash on each other's Aria temporary tables.
    fn tmp_dir(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    fn install(&self) {
        let tmp = self.tmp_dir();
        fs::create_dir_all(&tmp).expect("cannot create MariaDB's temporary directory");
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(&tmp, Some(uid), Some(gid))
                .expect("cannot hand MariaDB's temporary directory to its user");
        }
        let out = self
            .command(&self.bins.install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--tmpdir={}", self.tmp_dir().display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("cannot run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db failed ({}) in {}; if the MariaDB user cannot reach that directory, point TMPDIR elsewhere.\nstdout:\n{}\nstderr:\n{}",
            out.status,
            self.dir.path().display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Spawns the server and waits until it reports that it accepts
    /// connections. On failure the server is gone and the log since this
    /// launch comes back.
    fn launch(&self) -> Result<(), String> {
        let log_path = self.log_path();
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("cannot open the MariaDB log file");
        if let Some((uid, gid)) = self.run_as {
            let _ = std::os::unix::fs::chown(&log_path, Some(uid), Some(gid));
        }
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let mut cmd = self.command(&self.bins.server);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.data_dir().display()))
            .arg(format!("--tmpdir={}", self.tmp_dir().display()))
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--port={}", self.port))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", log_path.display()))
            .args([
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=1",
                "--innodb-doublewrite=1",
                "--innodb-buffer-pool-size=64M",
                "--max-connections=500",
                "--performance-schema=OFF",
            ])
            .args(self.tls.iter().flat_map(|[cert, key, ca]| {
                [
                    format!("--ssl-cert={}", cert.display()),
                    format!("--ssl-key={}", key.display()),
                    format!("--ssl-ca={}", ca.display()),
                ]
            }))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("cannot duplicate the log file"))
            .stderr(log);
        crate::die_with_parent(&mut cmd, libc::SIGKILL);
        let mut child = spawn_from_lasting_thread(cmd).expect("cannot start mariadbd");
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "mariadbd exited ({status}):\n{}",
                    read_from(&log_path, log_start)
                ));
            }
            if read_from(&log_path, log_start).contains("ready for connections") {
                break;
            }
            if Instant::now() > deadline {
                signal(&child, libc::SIGKILL);
                wait_or_kill(&mut child, STOP_DEADLINE);
                return Err(format!(
                    "mariadbd was not ready within {READY_DEADLINE:?}:\n{}",
                    read_from(&log_path, log_start)
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    /// A command for one of the MariaDB binaries, as the right user.
    fn command(&self, bin: &Path) -> Command {
        let mut cmd = Command::new(bin);
        cmd.env("LC_ALL", "C").current_dir(self.dir.path());
        for var in [
            "MYSQL_HOST",
            "MYSQL_TCP_PORT",
            "MYSQL_UNIX_PORT",
            "MYSQL_PWD",
        ] {
            cmd.env_remove(var);
        }
        if let Some((uid, gid)) = self.run_as {
            // SAFETY: only async-signal-safe calls after fork.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(gid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd
    }

    /// Kills the server, quickly; for drop and exit.
    fn halt(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = guard.take() {
            signal(&child, libc::SIGKILL);
            wait_or_kill(&mut child, STOP_DEADLINE);
        }
    }
}

impl Drop for TempMariaDb {
    fn drop(&mut self) {
        self.halt();
    }
}

/// 24 hex digits from the clock, the process id and the address space: not
/// a secret worth more than a throwaway server's.
fn random_password() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.write_u32(std::process::id());
    let a = h.finish();
    h.write_u64(a);
    format!("ks{:016x}{:08x}", a, h.finish() as u32)
}

/// Where mariadbd, mariadb-install-db and mariadb are, or why they are not.
fn find_bins() -> Result<Bins, String> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("KEYSMITH_MARIADB_BIN") {
        dirs.push(PathBuf::from(d));
    } else {
        dirs.push("/usr/sbin".into());
        dirs.push("/usr/bin".into());
        let path = std::env::var_os("PATH").unwrap_or_default();
        dirs.extend(std::env::split_paths(&path));
    }
    let find = |names: &[&str]| {
        dirs.iter()
            .flat_map(|d| names.iter().map(move |n| d.join(n)))
            .find(|p| p.is_file())
    };
    match (
        find(&["mariadbd", "mysqld"]),
        find(&["mariadb-install-db", "mysql_install_db"]),
        find(&["mariadb", "mysql"]),
    ) {
        (Some(server), Some(install), Some(client)) => Ok(Bins {
            server,
            install,
            client,
        }),
        _ => Err(format!(
            "MariaDB binaries (mariadbd, mariadb-install-db, mariadb) not found in {} (apt-get install mariadb-server)",
            dirs.iter()
                .take(3)
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The (uid, gid) to run MariaDB as when we are root, `None` when we are not.
fn unprivileged_user() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let wanted = std::env::var("KEYSMITH_MARIADB_USER").ok();
    let candidates: Vec<&str> = match &wanted {
        Some(u) => vec![u.as_str()],
        None => vec!["mysql", "nobody"],
    };
    for name in &candidates {
        if let Some((uid, gid)) = lookup_user(name).filter(|(uid, _)| *uid != 0) {
            return Ok(Some((uid, gid)));
        }
    }
    Err(format!(
        "running as root, and mariadbd refuses root; no unprivileged user among {candidates:?} to run it as (set KEYSMITH_MARIADB_USER)"
    ))
}
