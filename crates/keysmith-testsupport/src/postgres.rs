//! Throwaway PostgreSQL: `initdb` into a temporary directory, a server on a
//! free port of 127.0.0.1, torn down when dropped.
//!
//! # Binaries
//!
//! `initdb`, `postgres` and `pg_ctl` are taken from `$KEYSMITH_PG_BIN` if set,
//! else from the newest `/usr/lib/postgresql/*/bin` (Debian's layout), else
//! from the directory of the `initdb` found on `PATH`. When none is found,
//! [`TempPostgres::start`] calls [`crate::skip_or_fail`] and returns `None`.
//!
//! # Running as root
//!
//! PostgreSQL refuses to run as root (initdb, postgres and pg_ctl all check).
//! When this process is root, every PostgreSQL binary is run as an
//! unprivileged user instead: `$KEYSMITH_PG_USER` if set, else `postgres` if
//! that account exists, else `nobody`. The temporary directory is handed to
//! that user (`chown`); the child drops its supplementary groups, then sets
//! its group and user id, before `exec` (the same thing `setpriv` does). The
//! temporary directory must therefore be reachable by that user: the default
//! temporary directory (`/tmp`) is. When this process is not root, the
//! binaries run as the current user.
//!
//! # No orphans
//!
//! The server is started with `PR_SET_PDEATHSIG` = `SIGQUIT` (PostgreSQL's
//! immediate shutdown), so it stops when the test process dies, however it
//! dies. The kernel sends that signal when the *thread* that spawned the
//! child exits, and libtest runs each test on its own thread: servers are
//! therefore spawned from one helper thread that lives as long as the
//! process. [`TempPostgres::shared`] gives one server per test binary; its
//! directory is removed by an `atexit` handler.
//!
//! # Durability
//!
//! The server runs with `fsync=on`, `synchronous_commit=on` and
//! `full_page_writes=on`, so crash tests ([`TempPostgres::stop_immediate`]
//! is `pg_ctl stop -m immediate`, a crash as far as the data files know) test
//! the real thing. Only `initdb` runs with `--no-sync`: it writes the empty
//! template cluster, which a machine crash during a test would discard anyway.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The superuser `initdb` creates; the URL logs in as it (trust auth).
pub const SUPERUSER: &str = "keysmith";

/// The database the URL names (the one `initdb` creates).
pub const DATABASE: &str = "postgres";

/// How long start-up (and recovery after a crash) may take.
const READY_DEADLINE: Duration = Duration::from_secs(90);

/// How long a stop may take before the server is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// A PostgreSQL server in a temporary directory, owned by this process.
///
/// Dropping it stops the server (immediate shutdown) and removes the
/// directory.
#[derive(Debug)]
pub struct TempPostgres {
    dir: TempDir,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    port: u16,
    child: Mutex<Option<Child>>,
}

impl TempPostgres {
    /// Initialises a cluster and starts a server on a free port.
    ///
    /// Returns `None` after [`crate::skip_or_fail`] when the PostgreSQL
    /// binaries are not installed (so it panics instead when
    /// `KEYSMITH_REQUIRE_BACKENDS=1`).
    ///
    /// # Panics
    /// When the binaries are there but fail (initdb errors, the server exits
    /// or is not ready within 90 s): the message holds their output.
    pub fn start() -> Option<TempPostgres> {
        TempPostgres::start_with(&Setup::default())
    }

    /// As [`start`](Self::start), with the cluster set up as `setup` says
    /// (a superuser password, files in the data directory, settings,
    /// pg_hba.conf) before the server first starts.
    ///
    /// Returns `None` (after [`crate::skip_or_fail`]) as [`start`](Self::start) does.
    ///
    /// # Panics
    /// As [`start`](Self::start), and when a file cannot be written.
    pub fn start_with(setup: &Setup) -> Option<TempPostgres> {
        let bin = match find_bin_dir() {
            Ok(b) => b,
            Err(why) => {
                crate::skip_or_fail("PostgreSQL", &why);
                return None;
            }
        };
        let run_as = match unprivileged_user() {
            Ok(u) => u,
            Err(why) => {
                crate::skip_or_fail("PostgreSQL", &why);
                return None;
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("keysmith-pg-")
            .tempdir()
            .expect("cannot create a temporary directory for PostgreSQL");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("cannot hand the temporary directory to the PostgreSQL user");
        }
        let mut pg = TempPostgres {
            dir,
            bin,
            run_as,
            port: 0,
            child: Mutex::new(None),
        };
        pg.initdb(setup.superuser_password.as_deref());
        pg.apply(setup);
        // The port is free when picked, but another process may take it
        // before the server binds it: then pick another.
        let mut last = String::new();
        for _ in 0..5 {
            pg.port = crate::free_port();
            match pg.launch() {
                Ok(()) => return Some(pg),
                Err(log) => last = log,
            }
        }
        panic!("PostgreSQL did not start after 5 attempts; last log:\n{last}");
    }

    /// One server for the whole test binary, started on first use, stopped
    /// and removed when the process exits. Tests that share it must not stop
    /// it; give each test its own schema or database instead.
    ///
    /// Returns `None` (after [`crate::skip_or_fail`]) as [`start`](Self::start) does.
    pub fn shared() -> Option<&'static TempPostgres> {
        static SHARED: OnceLock<Option<TempPostgres>> = OnceLock::new();
        extern "C" fn cleanup() {
            if let Some(Some(pg)) = SHARED.get() {
                pg.halt();
                let _ = fs::remove_dir_all(pg.dir.path());
            }
        }
        SHARED
            .get_or_init(|| {
                let pg = TempPostgres::start()?;
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(cleanup) };
                Some(pg)
            })
            .as_ref()
    }

    /// `postgres://keysmith@127.0.0.1:PORT/postgres`: the superuser, trust
    /// authentication, no password.
    pub fn url(&self) -> String {
        format!("postgres://{SUPERUSER}@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The TCP port the server listens on (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
    }

    /// Whether the server process is running.
    pub fn is_running(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        match child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Stops the server the hard way, `pg_ctl stop -m immediate`: no
    /// checkpoint, clients cut off; the next start runs crash recovery.
    /// Returns when the server process has exited.
    ///
    /// # Panics
    /// When the server is not running.
    pub fn stop_immediate(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let mut child = guard
            .take()
            .expect("stop_immediate: the server is not running");
        let out = self
            .command("pg_ctl")
            .arg("stop")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "-w", "-t", "30"])
            .output();
        let ok = matches!(&out, Ok(o) if o.status.success());
        if !ok {
            // pg_ctl sends SIGQUIT; do it ourselves.
            eprintln!("pg_ctl stop failed ({out:?}); sending SIGQUIT");
            signal(&child, libc::SIGQUIT);
        }
        wait_or_kill(&mut child, STOP_DEADLINE);
    }

    /// Starts the server again on the same port and data directory (after
    /// [`stop_immediate`](Self::stop_immediate): crash recovery first) and
    /// returns when it accepts connections.
    ///
    /// # Panics
    /// When it is running already, or does not come up.
    pub fn restart(&self) {
        assert!(!self.is_running(), "restart: the server is still running");
        if let Err(log) = self.launch() {
            panic!(
                "PostgreSQL did not restart on port {}; log:\n{log}",
                self.port
            );
        }
    }

    fn initdb(&self, password: Option<&str>) {
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale"])
            .args(["--no-sync", "--no-instructions"]);
        if let Some(password) = password {
            let pwfile = self.dir.path().join("superuser.pw");
            self.write_private(&pwfile, password.as_bytes());
            cmd.arg("--pwfile").arg(&pwfile);
        }
        let out = cmd.output().expect("cannot run initdb");
        assert!(
            out.status.success(),
            "initdb failed ({}) in {}; if the PostgreSQL user cannot reach that directory, point TMPDIR elsewhere.\nstdout:\n{}\nstderr:\n{}",
            out.status,
            self.dir.path().display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Writes the setup's files and settings into the data directory.
    fn apply(&self, setup: &Setup) {
        let data = self.data_dir();
        for (name, contents) in &setup.files {
            self.write_private(&data.join(name), contents);
        }
        if !setup.settings.is_empty() {
            let path = data.join("postgresql.conf");
            let mut conf = fs::read_to_string(&path).expect("cannot read postgresql.conf");
            conf.push_str("\n# keysmith-testsupport\n");
            for line in &setup.settings {
                conf.push_str(line);
                conf.push('\n');
            }
            fs::write(&path, conf).expect("cannot write postgresql.conf");
        }
        if let Some(hba) = &setup.hba {
            fs::write(data.join("pg_hba.conf"), hba).expect("cannot write pg_hba.conf");
        }
    }

    /// Writes a file only the server's user may read (as a key file must be).
    fn write_private(&self, path: &Path, contents: &[u8]) {
        use std::os::unix::fs::PermissionsExt;
        fs::write(path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("cannot restrict {}: {e}", path.display()));
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap_or_else(|e| {
                panic!("cannot hand {} to the PostgreSQL user: {e}", path.display())
            });
        }
    }

    /// Spawns the server and waits until it accepts connections. On failure
    /// the server is gone and the log since this launch comes back.
    fn launch(&self) -> Result<(), String> {
        let log_path = self.dir.path().join("postgres.log");
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("cannot open the PostgreSQL log file");
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let mut cmd = self.command("postgres");
        server_args(&mut cmd, &self.data_dir(), self.port, self.dir.path(), log);
        crate::die_with_parent(&mut cmd, libc::SIGQUIT);
        let mut child = spawn_from_lasting_thread(cmd).expect("cannot start postgres");
        let pid = child.id();
        let pid_file = self.data_dir().join("postmaster.pid");
        let deadline = Instant::now() + READY_DEADLINE;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "postgres exited ({status}):\n{}",
                    read_from(&log_path, log_start)
                ));
            }
            if is_ready(&pid_file, pid) {
                break;
            }
            if Instant::now() > deadline {
                signal(&child, libc::SIGQUIT);
                wait_or_kill(&mut child, STOP_DEADLINE);
                return Err(format!(
                    "postgres was not ready within {READY_DEADLINE:?}:\n{}",
                    read_from(&log_path, log_start)
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
        *self.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    /// A command for one of the PostgreSQL binaries, as the right user.
    fn command(&self, name: &str) -> Command {
        command_as(&self.bin, self.run_as, self.dir.path(), name)
    }

    /// Stops the server and removes its directory; for exit handlers.
    pub(crate) fn halt_and_remove(&self) {
        self.halt();
        let _ = fs::remove_dir_all(self.dir.path());
    }

    /// Stops the server however it can, quickly; for drop and exit.
    fn halt(&self) {
        let mut guard = self.child.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(mut child) = guard.take() {
            signal(&child, libc::SIGQUIT);
            wait_or_kill(&mut child, STOP_DEADLINE);
        }
    }
}

/// How [`TempPostgres::start_with`] sets a cluster up before its first
/// start. The default is what [`TempPostgres::start`] does: nothing more.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The superuser's password (`initdb --pwfile`); none by default.
    pub superuser_password: Option<String>,
    /// Files written into the data directory (name, contents), mode 0600 and
    /// owned by the server's user, as certificate keys must be.
    pub files: Vec<(String, Vec<u8>)>,
    /// Lines appended to postgresql.conf, e.g. `ssl = on`.
    pub settings: Vec<String>,
    /// The whole pg_hba.conf, replacing initdb's (which trusts everyone).
    pub hba: Option<String>,
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        self.halt();
    }
}

/// A command for the PostgreSQL binary `name` of `bin`, run in `dir` as
/// `run_as` (uid, gid) when given (see "Running as root").
pub(crate) fn command_as(
    bin: &Path,
    run_as: Option<(u32, u32)>,
    dir: &Path,
    name: &str,
) -> Command {
    let mut cmd = Command::new(bin.join(name));
    cmd.env_remove("PGDATA")
        .env_remove("PGPORT")
        .env_remove("PGHOST")
        .env("LC_ALL", "C")
        .current_dir(dir);
    if let Some((uid, gid)) = run_as {
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

/// Whether the postmaster with this pid reports "ready" in its pid file
/// (line 8, as pg_ctl reads it).
fn is_ready(pid_file: &Path, pid: u32) -> bool {
    let Ok(text) = fs::read_to_string(pid_file) else {
        return false;
    };
    let lines: Vec<&str> = text.lines().collect();
    lines.first().and_then(|l| l.trim().parse::<u32>().ok()) == Some(pid)
        && lines.get(7).map(|l| l.trim()) == Some("ready")
}

pub(crate) fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill on our own child's pid (not yet reaped, so not reused).
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

pub(crate) fn wait_or_kill(child: &mut Child, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

pub(crate) fn read_from(path: &Path, offset: u64) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.seek(SeekFrom::Start(offset));
        let _ = f.read_to_string(&mut s);
    }
    s
}

/// Spawns `cmd` from a thread that lives as long as the process, so that
/// `PR_SET_PDEATHSIG` fires when the process dies, not when a test's thread ends.
/// The arguments and output of a `postgres` server process: data in `data`,
/// TCP on 127.0.0.1:`port`, its socket in `socket_dir`, durable commits (as
/// keysmith's guarantees need), output appended to `log`.
pub(crate) fn server_args(
    cmd: &mut Command,
    data: &std::path::Path,
    port: u16,
    socket_dir: &std::path::Path,
    log: std::fs::File,
) {
    cmd.arg("-D")
        .arg(data)
        .arg("-p")
        .arg(port.to_string())
        .arg("-k")
        .arg(socket_dir)
        .args(["-c", "listen_addresses=127.0.0.1"])
        .args(["-c", "fsync=on"])
        .args(["-c", "synchronous_commit=on"])
        .args(["-c", "full_page_writes=on"])
        .args(["-c", "max_connections=200"])
        .args(["-c", "shared_buffers=32MB"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("cannot duplicate the log file"))
        .stderr(log);
}

pub(crate) fn spawn_from_lasting_thread(cmd: Command) -> io::Result<Child> {
    type Request = (Command, mpsc::Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        thread::Builder::new()
            .name("keysmith-pg-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the spawner thread");
        tx
    });
    let (tx, rx) = mpsc::channel();
    spawner
        .send((cmd, tx))
        .map_err(|_| io::Error::other("spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("spawner thread is gone"))?
}

/// Where initdb, postgres and pg_ctl are, or why they are not.
pub(crate) fn find_bin_dir() -> Result<PathBuf, String> {
    let complete = |d: &Path| {
        ["initdb", "postgres", "pg_ctl"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    if let Some(d) = std::env::var_os("KEYSMITH_PG_BIN") {
        let d = PathBuf::from(d);
        return if complete(&d) {
            Ok(d)
        } else {
            Err(format!(
                "KEYSMITH_PG_BIN={} lacks initdb, postgres or pg_ctl",
                d.display()
            ))
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| complete(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Ok(d);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let initdb = dir.join("initdb");
        if initdb.is_file() {
            // initdb looks for postgres beside its real location.
            let real = fs::canonicalize(&initdb).unwrap_or(initdb);
            if let Some(d) = real.parent().filter(|d| complete(d)) {
                return Ok(d.to_path_buf());
            }
        }
    }
    Err("PostgreSQL server binaries (initdb, postgres, pg_ctl) not found in $KEYSMITH_PG_BIN, /usr/lib/postgresql/*/bin or PATH (apt-get install postgresql)".into())
}

/// The (uid, gid) to run PostgreSQL as when we are root, `None` when we are not.
pub(crate) fn unprivileged_user() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let wanted = std::env::var("KEYSMITH_PG_USER").ok();
    let candidates: Vec<&str> = match &wanted {
        Some(u) => vec![u.as_str()],
        None => vec!["postgres", "nobody"],
    };
    for name in &candidates {
        if let Some((uid, gid)) = lookup_user(name).filter(|(uid, _)| *uid != 0) {
            return Ok(Some((uid, gid)));
        }
    }
    Err(format!(
        "running as root, and PostgreSQL refuses root; no unprivileged user among {candidates:?} to run it as (set KEYSMITH_PG_USER)"
    ))
}

pub(crate) fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the call; buf outlives the use of pwd.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 || result.is_null() {
        return None;
    }
    Some((pwd.pw_uid, pwd.pw_gid))
}
