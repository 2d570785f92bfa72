//! Store failovers and restores of PostgreSQL, for tests: a throwaway
//! primary with a streaming standby ([`PgReplicaSet`]), a TCP proxy whose
//! upstream can be cut or switched ([`TcpProxy`], what HAProxy or a virtual
//! IP does in front of a database), and point-in-time restore from a base
//! backup and a WAL archive.
//!
//! # What the faults are
//!
//! - **Replication cut** ([`PgReplicaSet::cut_replication`]): the standby
//!   streams WAL from the primary through a [`TcpProxy`]; cutting it closes
//!   the replication connection and refuses new ones, as a network blip
//!   between the two would. The primary keeps committing (replication is
//!   asynchronous, PostgreSQL's default), so the standby falls behind.
//! - **Primary crash** ([`PgReplicaSet::crash_primary`]): `pg_ctl stop -m
//!   immediate`, no checkpoint, clients cut off.
//! - **Promotion** ([`PgReplicaSet::promote_standby`]): `pg_ctl promote`, then
//!   `pg_is_in_recovery()` polled until false. The promoted standby starts a
//!   new timeline; what the primary committed during the cut is lost.
//! - **Point-in-time restore** ([`PgReplicaSet::restore_primary`]): the
//!   primary archives every WAL segment (`archive_command`, into a directory
//!   of the temporary directory); [`PgReplicaSet::base_backup`] takes a base
//!   backup; the restore stops the primary, puts the backup in place of its
//!   data directory and recovers from the archive up to a target (an LSN or
//!   a time), then promotes: the same port, the same system identifier, a new
//!   timeline, the data of an earlier moment.
//!
//! # Binaries, users, no orphans
//!
//! As [`crate::postgres`]: the same binaries (`initdb`, `postgres`, `pg_ctl`,
//! plus `pg_basebackup` and `psql` from the same directory), the same
//! unprivileged user when running as root, servers spawned from one
//! long-lived thread with `PR_SET_PDEATHSIG = SIGQUIT`. A missing binary
//! calls [`crate::skip_or_fail`]. Dropping a [`PgReplicaSet`] stops both
//! servers and removes everything (also when the test panics: it is a drop).

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::postgres::{
    DATABASE, SUPERUSER, command_as, find_bin_dir, read_from, signal, spawn_from_lasting_thread,
    unprivileged_user, wait_or_kill,
};

/// How long start-up, recovery, promotion or catching up may take: a bound
/// on a hang, not a performance threshold.
const DEADLINE: Duration = Duration::from_secs(90);

/// How long a stop may take before the server is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// Where a point-in-time restore stops replaying the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryTarget {
    /// `recovery_target_lsn`, e.g. `0/3000148` (from [`PgReplicaSet::current_lsn`]).
    Lsn(String),
    /// `recovery_target_time`, a timestamp PostgreSQL parses, e.g.
    /// `2026-11-24 17:30:00.123+00` (from [`PgReplicaSet::current_time`]).
    Time(String),
}

/// A base backup taken by [`PgReplicaSet::base_backup`] (plain format, with
/// the WAL it needs), kept until the set is dropped.
#[derive(Debug, Clone)]
pub struct BaseBackup {
    dir: PathBuf,
}

impl BaseBackup {
    /// The backup's directory (a data directory with a `backup_label`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// One server of the set: a data directory, a port, maybe a process.
#[derive(Debug)]
struct Node {
    name: &'static str,
    data: PathBuf,
    port: u16,
    child: Mutex<Option<Child>>,
}

/// A PostgreSQL primary (archiving its WAL) and, unless started with
/// [`PgReplicaSet::start_primary_only`], a hot standby streaming from it
/// through a [`TcpProxy`]. All on 127.0.0.1, in one temporary directory.
#[derive(Debug)]
pub struct PgReplicaSet {
    dir: TempDir,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    primary: Node,
    standby: Option<Node>,
    replication: Option<TcpProxy>,
    archive: PathBuf,
    backups: Mutex<u32>,
}

impl PgReplicaSet {
    /// A primary with a streaming standby: `initdb`, the primary started
    /// (WAL archived), `pg_basebackup -R` through the replication proxy, the
    /// standby started on its own port; returns once the standby streams.
    ///
    /// Returns `None` after [`crate::skip_or_fail`] when the binaries are
    /// missing (a panic under `KEYSMITH_REQUIRE_BACKENDS=1`).
    ///
    /// # Panics
    /// When a binary fails or a server does not come up (with its log).
    pub fn start() -> Option<PgReplicaSet> {
        let mut set = PgReplicaSet::start_primary_only()?;
        let proxy = TcpProxy::start(set.primary.port);
        let data = set.dir.path().join("standby");
        set.run_ok(
            set.command("pg_basebackup")
                .args(["-h", "127.0.0.1", "-p"])
                .arg(proxy.port().to_string())
                .args(["-U", SUPERUSER, "-D"])
                .arg(&data)
                .args(["-X", "stream", "-c", "fast", "-R", "--no-sync"]),
            "pg_basebackup of the standby",
        );
        let standby = Node {
            name: "standby",
            data,
            port: 0,
            child: Mutex::new(None),
        };
        set.replication = Some(proxy);
        set.standby = Some(standby);
        set.launch_on_free_port(Role::Standby);
        set.wait_streaming();
        Some(set)
    }

    /// The primary alone (archiving its WAL), for point-in-time restores.
    ///
    /// Returns `None` as [`start`](Self::start) does.
    pub fn start_primary_only() -> Option<PgReplicaSet> {
        let missing = |why: &str| {
            crate::skip_or_fail("PostgreSQL", why);
            None
        };
        let bin = match find_bin_dir() {
            Ok(b) => b,
            Err(why) => return missing(&why),
        };
        for tool in ["pg_basebackup", "psql"] {
            if !bin.join(tool).is_file() {
                return missing(&format!("{tool} is not in {}", bin.display()));
            }
        }
        let run_as = match unprivileged_user() {
            Ok(u) => u,
            Err(why) => return missing(&why),
        };
        let dir = tempfile::Builder::new()
            .prefix("keysmith-pgrep-")
            .tempdir()
            .expect("cannot create a temporary directory for PostgreSQL");
        let archive = dir.path().join("archive");
        fs::create_dir(&archive).expect("cannot create the WAL archive directory");
        if let Some((uid, gid)) = run_as {
            for d in [dir.path(), archive.as_path()] {
                std::os::unix::fs::chown(d, Some(uid), Some(gid))
                    .expect("cannot hand the temporary directory to the PostgreSQL user");
            }
        }
        let mut set = PgReplicaSet {
            primary: Node {
                name: "primary",
                data: dir.path().join("primary"),
                port: 0,
                child: Mutex::new(None),
            },
            dir,
            bin,
            run_as,
            standby: None,
            replication: None,
            archive,
            backups: Mutex::new(0),
        };
        set.run_ok(
            set.command("initdb")
                .arg("-D")
                .arg(&set.primary.data)
                .args(["-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale"])
                .args(["--no-sync", "--no-instructions"]),
            "initdb",
        );
        // initdb's pg_hba.conf trusts replication connections from
        // 127.0.0.1; wal_level=replica and max_wal_senders=10 are the
        // defaults. Every segment is archived, complete or not at all (copy,
        // then rename: a segment seen in the archive is whole); the standby
        // may lag up to 1 GB and catch up from the primary alone.
        let archive = set.archive.display().to_string();
        set.append_conf(
            &set.primary.data.join("postgresql.conf"),
            &format!(
                "wal_level = replica\n\
                 max_wal_senders = 10\n\
                 wal_keep_size = 1024\n\
                 archive_mode = on\n\
                 archive_command = 'test ! -f {archive}/%f && cp %p {archive}/%f.part && mv {archive}/%f.part {archive}/%f'\n\
                 wal_retrieve_retry_interval = 500\n"
            ),
        );
        set.launch_on_free_port(Role::Primary);
        Some(set)
    }

    /// `postgres://keysmith@127.0.0.1:PORT/postgres` of the primary (its
    /// port stays the same across crashes and restores).
    pub fn primary_url(&self) -> String {
        url(self.primary.port)
    }

    /// The primary's port.
    pub fn primary_port(&self) -> u16 {
        self.primary.port
    }

    /// The standby's URL.
    ///
    /// # Panics
    /// Without a standby.
    pub fn standby_url(&self) -> String {
        url(self.standby().port)
    }

    /// The standby's port.
    ///
    /// # Panics
    /// Without a standby.
    pub fn standby_port(&self) -> u16 {
        self.standby().port
    }

    /// The primary's log so far.
    pub fn primary_log(&self) -> String {
        fs::read_to_string(self.log_path(&self.primary)).unwrap_or_default()
    }

    /// The standby's log so far (empty without a standby).
    pub fn standby_log(&self) -> String {
        self.standby
            .as_ref()
            .map(|s| fs::read_to_string(self.log_path(s)).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Runs one SQL statement with `psql` on the server at `port` and
    /// returns its output (unaligned, tuples only, trimmed).
    ///
    /// # Panics
    /// When psql fails.
    pub fn sql(&self, port: u16, sql: &str) -> String {
        self.try_sql(port, sql)
            .unwrap_or_else(|e| panic!("psql on port {port} failed ({sql}): {e}"))
    }

    /// [`sql`](Self::sql), or psql's error.
    pub fn try_sql(&self, port: u16, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-U", SUPERUSER, "-d", DATABASE, "-c", sql])
            .env("PGCONNECT_TIMEOUT", "5")
            .env_remove("PGPASSWORD")
            .env_remove("PGSERVICE")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Waits until the standby has replayed everything the primary has
    /// written so far (its replay LSN at or past the primary's current LSN).
    ///
    /// # Panics
    /// Without a standby, or when it does not catch up in time.
    pub fn wait_standby_caught_up(&self) {
        let target = self.current_lsn();
        let standby = self.standby().port;
        let sql = format!("select pg_last_wal_replay_lsn() >= '{target}'::pg_lsn");
        self.poll(&format!("the standby to replay up to {target}"), || {
            self.try_sql(standby, &sql).ok().as_deref() == Some("t")
        });
    }

    /// The network blip: closes the standby's replication connection and
    /// refuses new ones, and returns once the primary sees no standby. The
    /// primary keeps serving; the standby keeps its data and falls behind.
    ///
    /// # Panics
    /// Without a standby.
    pub fn cut_replication(&self) {
        self.replication
            .as_ref()
            .expect("cut_replication: no standby")
            .cut();
        let primary = self.primary.port;
        self.poll("the primary to lose its standby", || {
            self.try_sql(primary, "select count(*) from pg_stat_replication")
                .ok()
                .as_deref()
                == Some("0")
        });
    }

    /// Ends the blip: the standby may connect again (it retries on its own)
    /// and returns once it streams.
    ///
    /// # Panics
    /// Without a standby, or when it does not reconnect in time.
    pub fn restore_replication(&self) {
        self.replication
            .as_ref()
            .expect("restore_replication: no standby")
            .resume(self.primary.port);
        self.wait_streaming();
    }

    /// How many bytes of WAL the standby has not replayed (primary's current
    /// LSN minus the standby's replay LSN), both servers running.
    pub fn standby_lag_bytes(&self) -> i64 {
        let primary = self.current_lsn();
        let lag = self.sql(
            self.standby().port,
            &format!(
                "select pg_wal_lsn_diff('{primary}'::pg_lsn, pg_last_wal_replay_lsn())::bigint"
            ),
        );
        lag.parse().unwrap_or_else(|_| panic!("lag {lag:?}"))
    }

    /// The primary crashes: `pg_ctl stop -m immediate` (SIGQUIT if pg_ctl
    /// fails); returns when the process has exited.
    ///
    /// # Panics
    /// When the primary is not running.
    pub fn crash_primary(&self) {
        self.stop_immediate(&self.primary);
    }

    /// Whether the primary's process is running.
    pub fn primary_running(&self) -> bool {
        running(&self.primary)
    }

    /// `pg_ctl promote` on the standby, then polls `pg_is_in_recovery()`
    /// until it says false: the standby is a primary on a new timeline.
    ///
    /// # Panics
    /// Without a standby, or when it does not leave recovery in time.
    pub fn promote_standby(&self) {
        let standby = self.standby();
        // Nothing more comes from the old primary's side.
        if let Some(p) = &self.replication {
            p.cut();
        }
        self.run_ok(
            self.command("pg_ctl")
                .arg("promote")
                .arg("-D")
                .arg(&standby.data)
                .args(["-w", "-t", "60"]),
            "pg_ctl promote",
        );
        self.poll("the standby to leave recovery", || {
            self.try_sql(standby.port, "select pg_is_in_recovery()")
                .ok()
                .as_deref()
                == Some("f")
        });
    }

    /// The timeline the primary at `port` writes (from the name of its
    /// current WAL file: `pg_control_checkpoint()` would lag a promotion
    /// until the next checkpoint). Not for a server in recovery.
    pub fn timeline(&self, port: u16) -> u32 {
        let t = self.sql(
            port,
            "select substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)",
        );
        u32::from_str_radix(&t, 16).unwrap_or_else(|_| panic!("timeline {t:?}"))
    }

    /// The primary's current WAL location (`pg_current_wal_lsn()`).
    pub fn current_lsn(&self) -> String {
        self.sql(self.primary.port, "select pg_current_wal_lsn()")
    }

    /// The primary's clock, as a recovery target time (`clock_timestamp()`).
    pub fn current_time(&self) -> String {
        self.sql(self.primary.port, "select clock_timestamp()::text")
    }

    /// A base backup of the primary (`pg_basebackup -X stream -c fast`,
    /// plain format) into the temporary directory.
    pub fn base_backup(&self) -> BaseBackup {
        let n = {
            let mut n = self.backups.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        let dir = self.dir.path().join(format!("backup-{n}"));
        self.run_ok(
            self.command("pg_basebackup")
                .args(["-h", "127.0.0.1", "-p"])
                .arg(self.primary.port.to_string())
                .args(["-U", SUPERUSER, "-D"])
                .arg(&dir)
                .args(["-X", "stream", "-c", "fast", "--no-sync"]),
            "pg_basebackup",
        );
        BaseBackup { dir }
    }

    /// Closes the primary's current WAL segment (`pg_switch_wal()`) and
    /// returns once the archive holds it: everything written so far can be
    /// replayed from the archive.
    pub fn archive_now(&self) {
        let segment = self.sql(self.primary.port, "select pg_walfile_name(pg_switch_wal())");
        let path = self.archive.join(&segment);
        self.poll(&format!("WAL segment {segment} in the archive"), || {
            path.is_file()
        });
    }

    /// The WAL archive's directory.
    pub fn archive_dir(&self) -> &Path {
        &self.archive
    }

    /// A point-in-time restore of the primary, on its port: stops it
    /// (immediate), moves its data directory aside, copies `backup` in its
    /// place, recovers from the archive up to `target` (inclusive) and
    /// promotes there (a new timeline). Returns once it accepts writes.
    ///
    /// Call [`archive_now`](Self::archive_now) after the target, or the
    /// archive may end before it (PostgreSQL then refuses to start).
    ///
    /// # Panics
    /// When the restored server does not come up (with its log).
    pub fn restore_primary(&self, backup: &BaseBackup, target: &RecoveryTarget) {
        if running(&self.primary) {
            self.stop_immediate(&self.primary);
        }
        let mut aside = self.dir.path().join("primary.before-restore");
        let mut i = 1;
        while aside.exists() {
            i += 1;
            aside = self.dir.path().join(format!("primary.before-restore-{i}"));
        }
        fs::rename(&self.primary.data, &aside).expect("cannot move the primary's data aside");
        self.run_ok(
            // As the servers' user, so that the copy is theirs.
            command_as(Path::new("/bin"), self.run_as, self.dir.path(), "cp")
                .arg("-a")
                .arg(&backup.dir)
                .arg(&self.primary.data),
            "copying the base backup",
        );
        let archive = self.archive.display();
        let target = match target {
            RecoveryTarget::Lsn(lsn) => format!("recovery_target_lsn = '{lsn}'"),
            RecoveryTarget::Time(t) => format!("recovery_target_time = '{t}'"),
        };
        self.append_conf(
            &self.primary.data.join("postgresql.auto.conf"),
            &format!(
                "restore_command = 'cp {archive}/%f %p'\n\
                 {target}\n\
                 recovery_target_inclusive = on\n\
                 recovery_target_action = 'promote'\n"
            ),
        );
        let signal_file = self.primary.data.join("recovery.signal");
        fs::write(&signal_file, b"").expect("cannot write recovery.signal");
        self.hand_over(&signal_file);
        // "ready" in postmaster.pid comes after the promotion at the target.
        if let Err(log) = self.launch(&self.primary, Role::Primary) {
            panic!("the restored primary did not come up; log:\n{log}");
        }
        self.poll("the restored primary to leave recovery", || {
            self.try_sql(self.primary.port, "select pg_is_in_recovery()")
                .ok()
                .as_deref()
                == Some("f")
        });
    }

    fn standby(&self) -> &Node {
        self.standby.as_ref().expect("this set has no standby")
    }

    /// Waits until the primary has a streaming standby.
    fn wait_streaming(&self) {
        let primary = self.primary.port;
        self.poll("the standby to stream from the primary", || {
            self.try_sql(
                primary,
                "select count(*) from pg_stat_replication where state = 'streaming'",
            )
            .ok()
            .as_deref()
                == Some("1")
        });
    }

    /// Polls `ok` every 20 ms until it holds; panics with `what` and both
    /// logs' ends after [`DEADLINE`].
    fn poll(&self, what: &str, mut ok: impl FnMut() -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !ok() {
            if Instant::now() > deadline {
                panic!(
                    "waited {DEADLINE:?} for {what}\nprimary log ends:\n{}\nstandby log ends:\n{}",
                    tail(&self.primary_log()),
                    tail(&self.standby_log())
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A PostgreSQL binary, as the servers' user.
    fn command(&self, name: &str) -> Command {
        command_as(&self.bin, self.run_as, self.dir.path(), name)
    }

    fn run_ok(&self, cmd: &mut Command, what: &str) {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Appends `text` to a configuration file of a data directory.
    fn append_conf(&self, path: &Path, text: &str) {
        let mut f = OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        writeln!(f, "\n# keysmith-testsupport\n{text}")
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    /// Gives a file we wrote to the servers' user.
    fn hand_over(&self, path: &Path) {
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .unwrap_or_else(|e| panic!("cannot hand {} over: {e}", path.display()));
        }
    }

    fn log_path(&self, node: &Node) -> PathBuf {
        self.dir.path().join(format!("{}.log", node.name))
    }

    fn node(&self, role: Role) -> &Node {
        match role {
            Role::Primary => &self.primary,
            Role::Standby => self.standby(),
        }
    }

    /// Starts a node on a free port (another, if one was taken meanwhile).
    fn launch_on_free_port(&mut self, role: Role) {
        let mut last = String::new();
        for _ in 0..5 {
            let port = crate::free_port();
            match role {
                Role::Primary => self.primary.port = port,
                Role::Standby => {
                    if let Some(s) = self.standby.as_mut() {
                        s.port = port;
                    }
                }
            }
            match self.launch(self.node(role), role) {
                Ok(()) => return,
                Err(log) => last = log,
            }
        }
        panic!("PostgreSQL ({role:?}) did not start after 5 attempts; last log:\n{last}");
    }

    /// Spawns the node's server and waits until it accepts connections (a
    /// standby: read-only ones). On failure the server is gone and its log
    /// since this launch comes back.
    fn launch(&self, node: &Node, role: Role) -> Result<(), String> {
        let log_path = self.log_path(node);
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("cannot open the PostgreSQL log file");
        let log_start = log.seek(SeekFrom::End(0)).unwrap_or(0);
        let mut cmd = self.command("postgres");
        crate::postgres::server_args(&mut cmd, &node.data, node.port, self.dir.path(), log);
        crate::die_with_parent(&mut cmd, libc::SIGQUIT);
        let mut child = spawn_from_lasting_thread(cmd).expect("cannot start postgres");
        let pid = child.id();
        let pid_file = node.data.join("postmaster.pid");
        let wanted: &[&str] = match role {
            Role::Primary => &["ready"],
            Role::Standby => &["standby", "ready"],
        };
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "postgres exited ({status}):\n{}",
                    read_from(&log_path, log_start)
                ));
            }
            if status_of(&pid_file, pid).is_some_and(|s| wanted.contains(&s.as_str())) {
                break;
            }
            if Instant::now() > deadline {
                signal(&child, libc::SIGQUIT);
                wait_or_kill(&mut child, STOP_DEADLINE);
                return Err(format!(
                    "postgres was not ready within {DEADLINE:?}:\n{}",
                    read_from(&log_path, log_start)
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
        *node.child.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }

    fn stop_immediate(&self, node: &Node) {
        let mut guard = node.child.lock().unwrap_or_else(|p| p.into_inner());
        let mut child = guard
            .take()
            .unwrap_or_else(|| panic!("the {} is not running", node.name));
        let out = self
            .command("pg_ctl")
            .arg("stop")
            .arg("-D")
            .arg(&node.data)
            .args(["-m", "immediate", "-w", "-t", "30"])
            .output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!("pg_ctl stop failed ({out:?}); sending SIGQUIT");
            signal(&child, libc::SIGQUIT);
        }
        wait_or_kill(&mut child, STOP_DEADLINE);
    }
}

impl Drop for PgReplicaSet {
    fn drop(&mut self) {
        for node in std::iter::once(&self.primary).chain(self.standby.as_ref()) {
            let mut guard = node.child.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(mut child) = guard.take() {
                signal(&child, libc::SIGQUIT);
                wait_or_kill(&mut child, STOP_DEADLINE);
            }
        }
        // The proxy and the directory go with the fields.
    }
}

#[derive(Debug, Clone, Copy)]
enum Role {
    Primary,
    Standby,
}

fn url(port: u16) -> String {
    format!("postgres://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}")
}

fn running(node: &Node) -> bool {
    let mut child = node.child.lock().unwrap_or_else(|p| p.into_inner());
    match child.as_mut() {
        Some(c) => matches!(c.try_wait(), Ok(None)),
        None => false,
    }
}

/// The status (line 8) of the postmaster with this pid in its pid file:
/// `starting`, `standby`, `ready`, `stopping`.
fn status_of(pid_file: &Path, pid: u32) -> Option<String> {
    let text = fs::read_to_string(pid_file).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    if lines.first().and_then(|l| l.trim().parse::<u32>().ok()) != Some(pid) {
        return None;
    }
    lines.get(7).map(|l| l.trim().to_owned())
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// A TCP forwarder on 127.0.0.1 whose upstream can be switched or cut, as
/// HAProxy or a virtual IP in front of a database: clients keep one
/// address while the server behind it changes.
///
/// Every accepted connection is joined to a new connection to the upstream
/// of the moment, two threads copying bytes. [`switch_to`](Self::switch_to)
/// and [`cut`](Self::cut) close every open connection at once (as a failover
/// does to a client's sockets); after [`cut`](Self::cut), connections are
/// accepted and closed at once until [`resume`](Self::resume). Dropping the
/// proxy closes everything and stops its threads.
#[derive(Debug)]
pub struct TcpProxy {
    port: u16,
    shared: Arc<ProxyShared>,
    acceptor: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct ProxyShared {
    /// Where new connections go; `None`: cut.
    upstream: Mutex<Option<u16>>,
    /// Both sockets of every connection still open.
    open: Mutex<Vec<TcpStream>>,
    stop: AtomicBool,
}

impl ProxyShared {
    fn close_all(&self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for s in open.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl TcpProxy {
    /// A proxy on a free port of 127.0.0.1, forwarding to `127.0.0.1:upstream`.
    ///
    /// # Panics
    /// When no port can be bound.
    pub fn start(upstream: u16) -> TcpProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind the proxy's port");
        let port = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(ProxyShared {
            upstream: Mutex::new(Some(upstream)),
            open: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let acceptor = {
            let shared = shared.clone();
            thread::Builder::new()
                .name(format!("keysmith-proxy-{port}"))
                .spawn(move || accept_loop(listener, shared))
                .expect("cannot start the proxy thread")
        };
        TcpProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://keysmith@127.0.0.1:PORT/postgres` through the proxy.
    pub fn postgres_url(&self) -> String {
        url(self.port)
    }

    /// Sends new connections to `127.0.0.1:upstream` and closes the open
    /// ones (their clients reconnect, to the new upstream).
    pub fn switch_to(&self, upstream: u16) {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(upstream);
        self.shared.close_all();
    }

    /// Closes every open connection and refuses new ones (accepted, then
    /// closed at once) until [`resume`](Self::resume) or
    /// [`switch_to`](Self::switch_to).
    pub fn cut(&self) {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        self.shared.close_all();
    }

    /// Forwards new connections to `127.0.0.1:upstream` again.
    pub fn resume(&self, upstream: u16) {
        *self
            .shared
            .upstream
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(upstream);
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_secs(1),
        );
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
        self.shared.close_all();
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<ProxyShared>) {
    for client in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else { continue };
        let upstream = *shared.upstream.lock().unwrap_or_else(|p| p.into_inner());
        let Some(upstream) = upstream else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], upstream));
        let Ok(server) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        {
            let mut open = shared.open.lock().unwrap_or_else(|p| p.into_inner());
            // Forget connections both of whose pumps ended (shut down already).
            open.retain(|s| s.peer_addr().is_ok());
            open.push(c3);
            open.push(s3);
        }
        thread::spawn(move || pump(client, server));
        thread::spawn(move || pump(s2, c2));
    }
}

/// Copies `from` to `to` until either ends, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
