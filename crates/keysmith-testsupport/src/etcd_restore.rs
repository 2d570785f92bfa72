//! etcd snapshot save and restore, for tests: the test etcd of
//! [`crate::etcd`] (one node or several) goes back to an earlier snapshot at
//! the same endpoints, as an operator's disaster recovery does.
//!
//! [`EtcdTools::save`] is `etcdctl snapshot save` from one node.
//! [`EtcdTools::restore`] kills every node (SIGKILL), restores the snapshot
//! for each member into a fresh data directory (`etcdutl snapshot restore`
//! when `etcdutl` is installed, etcd 3.5 and later; else `etcdctl snapshot
//! restore`, etcd 3.4) with the cluster's own names, peer URLs,
//! `--initial-cluster` and token, puts each in place of the member's data
//! directory, and starts the nodes again on their old ports. Restored with
//! the same token and peer URLs, the members get the same member and
//! cluster ids as before ([`EtcdTools::cluster_id`] shows it): clients see
//! the same cluster, with the data of the snapshot.
//!
//! Tools are taken from `$KEYSMITH_ETCDCTL_BIN` / `$KEYSMITH_ETCDUTL_BIN`,
//! else beside the etcd binary, else from the `PATH`. A missing `etcdctl`
//! calls [`crate::skip_or_fail`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::etcd::{EtcdCluster, etcd_binary};

/// The etcd command-line tools.
#[derive(Debug, Clone)]
pub struct EtcdTools {
    etcdctl: PathBuf,
    etcdutl: Option<PathBuf>,
}

/// A snapshot file, removed when dropped.
#[derive(Debug)]
pub struct Snapshot {
    dir: tempfile::TempDir,
}

impl Snapshot {
    /// The snapshot file.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("snapshot.db")
    }
}

impl EtcdTools {
    /// Finds `etcdctl` (and `etcdutl` if installed). Returns `None` after
    /// [`crate::skip_or_fail`] when `etcdctl` is missing.
    pub fn find() -> Option<EtcdTools> {
        match find_tool("etcdctl", "KEYSMITH_ETCDCTL_BIN") {
            Some(etcdctl) => Some(EtcdTools {
                etcdctl,
                etcdutl: find_tool("etcdutl", "KEYSMITH_ETCDUTL_BIN"),
            }),
            None => {
                crate::skip_or_fail(
                    "etcd",
                    "no etcdctl (looked at $KEYSMITH_ETCDCTL_BIN, beside etcd and on the PATH)",
                );
                None
            }
        }
    }

    /// `etcdctl snapshot save` from node `node` of `cluster` (running).
    ///
    /// # Panics
    /// When etcdctl fails.
    pub fn save(&self, cluster: &EtcdCluster, node: usize) -> Snapshot {
        let dir = tempfile::Builder::new()
            .prefix(&format!("keysmith-etcd-{}-snap-", std::process::id()))
            .tempdir()
            .expect("cannot create a directory for the snapshot");
        let snap = Snapshot { dir };
        run(
            self.etcdctl(&cluster.endpoints()[node])
                .args(["snapshot", "save"])
                .arg(snap.path()),
            "etcdctl snapshot save",
        );
        snap
    }

    /// Restores `snapshot` into every member of `cluster`, at the same
    /// endpoints: kills the running nodes, restores each member into a fresh
    /// data directory that replaces its old one, and starts them all again;
    /// returns when every node is healthy.
    ///
    /// # Panics
    /// When the restore fails or a node does not come back.
    pub fn restore(&self, cluster: &mut EtcdCluster, snapshot: &Snapshot) {
        for i in 0..cluster.len() {
            if cluster.is_running(i) {
                cluster.kill(i);
            }
        }
        for i in 0..cluster.len() {
            let data = cluster.data_dir(i);
            let fresh = data.with_file_name(format!("{}.restored", cluster.name(i)));
            let _ = std::fs::remove_dir_all(&fresh);
            let mut cmd = match &self.etcdutl {
                Some(etcdutl) => Command::new(etcdutl),
                None => {
                    let mut c = Command::new(&self.etcdctl);
                    c.env("ETCDCTL_API", "3");
                    c
                }
            };
            cmd.args(["snapshot", "restore"])
                .arg(snapshot.path())
                .arg("--name")
                .arg(cluster.name(i))
                .arg("--initial-cluster")
                .arg(cluster.initial_cluster())
                .arg("--initial-cluster-token")
                .arg(cluster.token())
                .arg("--initial-advertise-peer-urls")
                .arg(cluster.peer_url(i))
                .arg("--data-dir")
                .arg(&fresh);
            run(&mut cmd, "snapshot restore");
            std::fs::remove_dir_all(&data).unwrap_or_else(|e| {
                panic!("cannot remove the old data of {}: {e}", cluster.name(i))
            });
            std::fs::rename(&fresh, &data).unwrap_or_else(|e| {
                panic!(
                    "cannot put the restored data of {} in place: {e}",
                    cluster.name(i)
                )
            });
        }
        cluster.restart_stopped();
    }

    /// The cluster id node `node` reports (`etcdctl endpoint status`).
    ///
    /// # Panics
    /// When etcdctl fails or prints no id.
    pub fn cluster_id(&self, cluster: &EtcdCluster, node: usize) -> u64 {
        let out = run(
            self.etcdctl(&cluster.endpoints()[node])
                .args(["endpoint", "status", "-w", "json"]),
            "etcdctl endpoint status",
        );
        let at = out
            .find("\"cluster_id\":")
            .unwrap_or_else(|| panic!("no cluster_id in {out}"))
            + "\"cluster_id\":".len();
        out[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect::<String>()
            .parse()
            .unwrap_or_else(|_| panic!("no cluster_id in {out}"))
    }

    fn etcdctl(&self, endpoint: &str) -> Command {
        let mut c = Command::new(&self.etcdctl);
        c.env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(endpoint)
            .args(["--dial-timeout", "5s", "--command-timeout", "30s"]);
        c
    }
}

/// Runs a tool; its stdout, or a panic with its output.
fn run(cmd: &mut Command, what: &str) -> String {
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
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn find_tool(name: &str, env: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let beside = etcd_binary()
        .ok()
        .and_then(|etcd| etcd.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file());
    beside.or_else(|| {
        let paths = std::env::var_os("PATH")?;
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p: &PathBuf| Path::is_file(p))
    })
}
