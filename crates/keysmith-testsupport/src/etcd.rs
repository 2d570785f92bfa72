//! Throwaway etcd: one node or three.
//!
//! [`TempEtcd`] is a single node, [`EtcdCluster`] a cluster of any size whose
//! nodes can be killed with SIGKILL and restarted. Both start `etcd` from the
//! installed binary (`$KEYSMITH_ETCD_BIN`, else `etcd` on the `PATH`, else
//! `/usr/bin/etcd`), listen on free ports of 127.0.0.1 only, keep their data in
//! temporary directories and run with etcd's default durability (every commit
//! is fsynced; no `--unsafe-no-fsync`).
//!
//! No server outlives the test process: every node is spawned by one dedicated
//! thread that never exits, with `PR_SET_PDEATHSIG = SIGKILL`, so the kernel
//! kills the nodes when the process dies, however it dies. (The death signal
//! fires when the *spawning thread* exits; libtest runs each test on its own
//! thread, hence the dedicated spawner.) Dropping a [`TempEtcd`] or an
//! [`EtcdCluster`] kills and reaps its nodes and removes their data.
//!
//! Data directories are named `keysmith-etcd-<pid>-...` in the temp directory;
//! when a new server starts, directories left by processes that no longer run
//! (a test binary killed before it could clean up) are removed. The
//! process-wide [`TempEtcd::shared`] node is never dropped: it is stopped and
//! its data removed at exit.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::{free_port, skip_or_fail};

/// How long a node may take to become healthy before the test fails.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// The etcd binary to run, or why there is none.
pub fn etcd_binary() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("KEYSMITH_ETCD_BIN").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("KEYSMITH_ETCD_BIN={} is not a file", p.display()))
        };
    }
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("etcd"))
            .find(|p| p.is_file())
    });
    match from_path {
        Some(p) => Ok(p),
        None if Path::new("/usr/bin/etcd").is_file() => Ok(PathBuf::from("/usr/bin/etcd")),
        None => Err(
            "no etcd binary (looked at $KEYSMITH_ETCD_BIN, the PATH and /usr/bin/etcd; \
             Debian: apt-get install etcd-server)"
                .to_owned(),
        ),
    }
}

/// One etcd node, started for a test and killed when dropped.
#[derive(Debug)]
pub struct TempEtcd {
    cluster: EtcdCluster,
}

impl TempEtcd {
    /// Starts a one-node etcd and waits until it is healthy.
    ///
    /// Returns `None` (after printing why) when no etcd binary is installed; see
    /// [`skip_or_fail`], which panics instead under `KEYSMITH_REQUIRE_BACKENDS=1`.
    ///
    /// # Panics
    /// If etcd is installed but does not start or become healthy in time (the
    /// panic message carries the end of its log).
    pub fn start() -> Option<TempEtcd> {
        EtcdCluster::start(1).map(|cluster| TempEtcd { cluster })
    }

    /// One node shared by every caller in this process, started on first use
    /// and never stopped (the kernel kills it when the process exits). Use a
    /// fresh key prefix per test to keep tests apart.
    ///
    /// Returns `None` like [`TempEtcd::start`].
    pub fn shared() -> Option<&'static TempEtcd> {
        SHARED
            .get_or_init(|| {
                let etcd = TempEtcd::start();
                if etcd.is_some() {
                    // SAFETY: registers a plain extern "C" function.
                    unsafe { libc::atexit(stop_shared) };
                }
                etcd
            })
            .as_ref()
    }

    /// The client endpoint, `127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        self.cluster.endpoints().remove(0)
    }

    /// A keysmith store URL for this node with no prefix: `etcd://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.cluster.url()
    }

    /// A keysmith store URL whose keys live under `prefix`:
    /// `etcd://127.0.0.1:PORT/PREFIX`.
    pub fn url_with_prefix(&self, prefix: &str) -> String {
        format!("{}/{prefix}", self.cluster.url())
    }

    /// Kills the node with SIGKILL and reaps it; its data stays for
    /// [`TempEtcd::restart`]. Not for the [`shared`](Self::shared) node.
    ///
    /// # Panics
    /// If the node is not running.
    pub fn kill(&mut self) {
        self.cluster.kill(0);
    }

    /// Starts the node again on its old port and data and waits until it is
    /// healthy.
    ///
    /// # Panics
    /// If it is running, or does not become healthy in time.
    pub fn restart(&mut self) {
        self.cluster.restart(0);
    }
}

static SHARED: OnceLock<Option<TempEtcd>> = OnceLock::new();

/// At a normal exit (libtest's included), kills the shared node and removes
/// its data; the death signal alone would leave the data directory behind.
extern "C" fn stop_shared() {
    if let Some(Some(etcd)) = SHARED.get() {
        for node in &etcd.cluster.nodes {
            if let Some(child) = &node.child {
                crate::kill_and_reap(child);
            }
        }
        let _ = std::fs::remove_dir_all(etcd.cluster.dir.path());
    }
}

/// A cluster of etcd nodes on 127.0.0.1, for fault tests.
#[derive(Debug)]
pub struct EtcdCluster {
    nodes: Vec<Node>,
    binary: PathBuf,
    initial_cluster: String,
    token: String,
    // Removed (recursively) on drop, after the nodes are dead.
    dir: tempfile::TempDir,
}

/// How many times [`EtcdCluster::start`] tries fresh ports.
const PORT_ATTEMPTS: u32 = 4;

#[derive(Debug)]
struct Node {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

impl EtcdCluster {
    /// Starts an `n`-node cluster and waits until every node is healthy (has a
    /// leader).
    ///
    /// Returns `None` (after printing why) when no etcd binary is installed;
    /// under `KEYSMITH_REQUIRE_BACKENDS=1` that panics instead.
    ///
    /// # Panics
    /// If `n` is 0, or a node does not start or become healthy in time (the
    /// message carries the end of its log).
    pub fn start(n: usize) -> Option<EtcdCluster> {
        assert!(n > 0, "an etcd cluster needs at least one node");
        let binary = match etcd_binary() {
            Ok(b) => b,
            Err(why) => {
                skip_or_fail("etcd", &why);
                return None;
            }
        };
        remove_stale_dirs();
        // A port picked free can be taken by another process before etcd
        // binds it: start again on fresh ports, a few times.
        for attempt in 1.. {
            match Self::try_start(n, &binary) {
                Ok(cluster) => return Some(cluster),
                Err(why) if why.contains("address already in use") && attempt < PORT_ATTEMPTS => {
                    eprintln!(
                        "etcd: a port was taken before etcd bound it; starting again on others"
                    );
                }
                Err(why) => panic!("{why}"),
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// One attempt of [`Self::start`]: the cluster, or why a node did not
    /// come up (its log's end).
    fn try_start(n: usize, binary: &Path) -> Result<EtcdCluster, String> {
        let binary = binary.to_path_buf();
        let dir = tempfile::Builder::new()
            .prefix(&format!("keysmith-etcd-{}-", std::process::id()))
            .tempdir()
            .expect("cannot create a temporary directory for etcd");
        let nodes: Vec<Node> = (0..n)
            .map(|i| Node {
                name: format!("n{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let initial_cluster = nodes
            .iter()
            .map(|n| format!("{}=http://127.0.0.1:{}", n.name, n.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!(
            "keysmith-{}-{}",
            std::process::id(),
            dir.path().file_name().unwrap_or_default().to_string_lossy()
        );
        let mut cluster = EtcdCluster {
            nodes,
            binary,
            initial_cluster,
            token,
            dir,
        };
        // Members of a new cluster wait for each other: start all, then wait.
        for i in 0..n {
            cluster.spawn(i);
        }
        for i in 0..n {
            cluster.try_wait_healthy(i)?;
        }
        Ok(cluster)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no nodes (never: [`EtcdCluster::start`] needs one).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The client endpoints, `127.0.0.1:PORT`, in node order (also for nodes
    /// that are down).
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.client_port))
            .collect()
    }

    /// A keysmith store URL naming every node: `etcd://127.0.0.1:P1,127.0.0.1:P2,...`.
    pub fn url(&self) -> String {
        format!("etcd://{}", self.endpoints().join(","))
    }

    /// Whether node `i` has been started and not killed.
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// Kills node `i` with SIGKILL (no chance to flush or say goodbye) and reaps
    /// it. Its data directory stays, for [`EtcdCluster::restart`].
    ///
    /// # Panics
    /// If the node is not running.
    pub fn kill(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let mut child = node
            .child
            .take()
            .unwrap_or_else(|| panic!("etcd node {} is not running", node.name));
        // Child::kill sends SIGKILL.
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Starts node `i` again on its old ports and data, and waits until it is
    /// healthy (has rejoined and sees a leader).
    ///
    /// # Panics
    /// If the node is running, or does not become healthy in time.
    pub fn restart(&mut self, i: usize) {
        assert!(
            !self.is_running(i),
            "etcd node {} is still running; kill it first",
            self.nodes[i].name
        );
        self.spawn(i);
        self.wait_healthy(i);
    }

    /// Node `i`'s data directory (it stays when the node is killed).
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(&self.nodes[i].name)
    }

    /// Node `i`'s member name (`n0`, `n1`, ...).
    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// Node `i`'s peer URL, `http://127.0.0.1:PORT`.
    pub fn peer_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[i].peer_port)
    }

    /// The `--initial-cluster` every node started with.
    pub fn initial_cluster(&self) -> &str {
        &self.initial_cluster
    }

    /// The `--initial-cluster-token` every node started with.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Starts every node that is not running, on its old ports and data,
    /// then waits until each is healthy (started together: a cluster that
    /// lost its majority needs them all before any has a leader).
    ///
    /// # Panics
    /// If a node does not become healthy in time.
    pub fn restart_stopped(&mut self) {
        let stopped: Vec<usize> = (0..self.len()).filter(|&i| !self.is_running(i)).collect();
        for &i in &stopped {
            self.spawn(i);
        }
        for &i in &stopped {
            self.wait_healthy(i);
        }
    }

    fn log_path(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("{}.log", self.nodes[i].name))
    }

    fn spawn(&mut self, i: usize) {
        let node = &self.nodes[i];
        let client = format!("http://127.0.0.1:{}", node.client_port);
        let peer = format!("http://127.0.0.1:{}", node.peer_port);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .expect("cannot create the etcd log file");
        let log2 = log.try_clone().expect("cannot clone the etcd log file");
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--name")
            .arg(&node.name)
            .arg("--data-dir")
            .arg(self.data_dir(i))
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(&self.initial_cluster)
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--initial-cluster-token")
            .arg(&self.token)
            // No metrics/pprof listeners on other ports; plain logs.
            .arg("--logger")
            .arg("zap")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        if let Some(arch) = unsupported_go_arch() {
            cmd.env("ETCD_UNSUPPORTED_ARCH", arch);
        }
        let child = spawn_tied_to_process(cmd)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.nodes[i].child = Some(child);
    }

    /// [`Self::try_wait_healthy`], panicking with its message.
    fn wait_healthy(&mut self, i: usize) {
        if let Err(why) = self.try_wait_healthy(i) {
            panic!("{why}");
        }
    }

    /// Polls `GET /health` on node `i` until it says `"health":"true"`;
    /// why not, with the end of its log, when it exits or runs out of time.
    fn try_wait_healthy(&mut self, i: usize) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        let port = self.nodes[i].client_port;
        loop {
            let exited = match self.nodes[i].child.as_mut() {
                Some(child) => child.try_wait().ok().flatten(),
                None => None,
            };
            if let Some(status) = exited {
                self.nodes[i].child = None;
                return Err(format!(
                    "etcd node {} exited during startup ({status}); its log ends with:\n{}",
                    self.nodes[i].name,
                    self.log_tail(i)
                ));
            }
            let last = match health(port) {
                Ok(true) => return Ok(()),
                Ok(false) => "answers, but not healthy (no leader yet?)".to_owned(),
                Err(e) => e,
            };
            if Instant::now() > deadline {
                return Err(format!(
                    "etcd node {} on 127.0.0.1:{port} not healthy after {START_DEADLINE:?} \
                     (last: {last}); its log ends with:\n{}",
                    self.nodes[i].name,
                    self.log_tail(i)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_tail(&self, i: usize) -> String {
        let text = std::fs::read_to_string(self.log_path(i)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// One `GET /health` over plain HTTP/1.0: `Ok(true)` when healthy.
pub(crate) fn health(port: u16) -> Result<bool, String> {
    let timeout = Duration::from_secs(2);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut body = String::new();
    s.read_to_string(&mut body).map_err(|e| e.to_string())?;
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    Ok(compact.contains("\"health\":\"true\""))
}

/// The `GOARCH` name etcd 3.4 wants in `ETCD_UNSUPPORTED_ARCH` on architectures
/// it does not officially support (it refuses to start there otherwise).
pub(crate) fn unsupported_go_arch() -> Option<&'static str> {
    match std::env::consts::ARCH {
        "x86_64" | "aarch64" | "powerpc64" => None,
        "x86" => Some("386"),
        "arm" => Some("arm"),
        "s390x" => Some("s390x"),
        "riscv64" => Some("riscv64"),
        "mips64" => Some("mips64le"),
        "loongarch64" => Some("loong64"),
        _ => None,
    }
}

/// Removes `keysmith-etcd-<pid>-*` directories whose process is gone.
pub(crate) fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("keysmith-etcd-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from a dedicated thread that lives as long as the process,
/// with SIGKILL as the child's parent-death signal.
pub(crate) fn spawn_tied_to_process(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("keysmith-testsupport-spawner".into())
            .spawn(move || {
                // Never returns while the process lives: the sender sits in a
                // static, so recv only fails at process exit.
                while let Ok((mut cmd, reply)) = rx.recv() {
                    crate::die_with_parent(&mut cmd, libc::SIGKILL);
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the spawner thread");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}
