//! A small network of hosts on one machine, for partition tests: each host a
//! network namespace, all joined by veth pairs to one bridge that lives in a
//! namespace of its own (the *hub*).
//!
//! # What it touches
//!
//! Only what it creates. Every namespace is named `ksp<pid>-<random>-<label>`
//! (unique per run); the veth pairs are created inside the hub and the
//! host namespaces directly (`ip -n HUB link add ... peer ... netns HOST`), so
//! no interface, address or route ever appears in the machine's own
//! namespace. The subnet, `10.77.N.0/24` with a random `N`, exists only
//! inside these namespaces: no packet of a test can leave them. The test
//! process reaches the hosts from a thread that joined one of them
//! ([`Net::run_in`], `setns(2)` on that thread only).
//!
//! # Faults
//!
//! - [`Net::cut`] / [`Net::heal`]: all of a host's links (its veth's hub end
//!   down: every packet to or from it is dropped silently, as on a pulled
//!   cable; connections hang rather than fail).
//! - [`Net::cut_pair`] / [`Net::heal_pair`]: one pair of hosts. Each side's
//!   neighbour entry for the other is pinned to a MAC address no host has,
//!   so the bridge floods the frames and nobody takes them: silent loss in
//!   both directions, every other path untouched. (The kernel here may lack
//!   `sch_netem` and tc classifiers, so neither `tc netem loss` nor filters
//!   are used.)
//! - [`Net::slow`] / [`Net::unslow`]: a host's outgoing rate capped with
//!   `tc qdisc tbf`, so that every round trip to it takes long: a store
//!   transaction is then surely in flight for a while. ([`Net::delay`] uses
//!   `tc netem delay` where the kernel has netem.)
//!
//! # Processes
//!
//! [`Net::command`] is `ip netns exec NAME prog` (`ip` execs `prog` in place,
//! so the child's pid is the program's); [`Net::spawn`] starts it with
//! `SIGKILL` as its parent-death signal and keeps it. [`Net::signal`] pauses
//! (`SIGSTOP`) and resumes (`SIGCONT`) by pid.
//!
//! # Teardown
//!
//! Dropping the [`Net`] (also while a test panics) kills every process it
//! started (by pid, and anything still inside its namespaces), then deletes
//! the namespaces, which deletes their veths and the bridge. Namespaces left
//! by a test process that was killed are removed by the next [`Net::new`].
//!
//! Needs root and `ip netns`; [`Net::new`] calls [`crate::skip_or_fail`]
//! otherwise.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::etcd::spawn_tied_to_process;

/// The MAC address a pair cut pins: locally administered, on no host.
const NOWHERE_MAC: &str = "02:00:5e:00:00:01";

/// How long a process may take to go after its stop signal before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Why partition tests cannot run here, or `None` when they can: root and a
/// working `ip netns`, and `KEYSMITH_NETNS` not `off` (which says "not
/// here" on a machine that would allow it: for a run that must not touch
/// namespaces, and to test what `keysmith-bench partitions` says then).
pub fn unavailable() -> Option<String> {
    if std::env::var("KEYSMITH_NETNS").as_deref() == Ok("off") {
        return Some(
            "not available here: network namespaces are switched off (KEYSMITH_NETNS=off); \
             unset it"
                .to_owned(),
        );
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not available here: needs root and ip netns (not root)".to_owned());
    }
    match Command::new("ip").args(["netns", "list"]).output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!(
            "not available here: needs root and ip netns (`ip netns list` failed: {})",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Some(format!(
            "not available here: needs root and ip netns (no `ip`: {e}; Debian: apt-get install iproute2)"
        )),
    }
}

/// One host of a [`Net`]: a network namespace with one interface, `eth0`,
/// on the bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// What the test called it (`e0`, `s1`, ...).
    pub label: String,
    /// The namespace's name (`ip netns exec NAME ...`).
    pub ns: String,
    /// Its address on the bridge.
    pub ip: Ipv4Addr,
    /// The hub's end of its veth pair.
    hub_if: String,
}

/// A started process and the pipes the caller asked for.
#[derive(Debug)]
pub struct Proc {
    /// Its pid (the program's own: `ip netns exec` execs it in place).
    pub pid: u32,
    /// Its stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// Its stderr, when piped.
    pub stderr: Option<ChildStderr>,
}

struct Owned {
    child: Child,
    /// The signal that asks it to stop (SIGKILL after [`STOP_GRACE`]).
    stop: libc::c_int,
}

/// A network of namespaces, torn down on drop. See the module's header.
pub struct Net {
    prefix: String,
    subnet: u8,
    hub: String,
    hosts: Mutex<Vec<Host>>,
    procs: Mutex<HashMap<u32, Owned>>,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("prefix", &self.prefix)
            .field("subnet", &self.subnet())
            .finish()
    }
}

impl Net {
    /// A new network: the hub namespace and its bridge, no hosts yet.
    ///
    /// Returns `None` after [`crate::skip_or_fail`] when not root or `ip
    /// netns` does not work.
    ///
    /// # Panics
    /// When a namespace or the bridge cannot be made although `ip netns`
    /// works.
    pub fn new() -> Option<Net> {
        if let Some(why) = unavailable() {
            crate::skip_or_fail("partition", &why);
            return None;
        }
        remove_stale();
        let prefix = format!("ksp{}-{:04x}", std::process::id(), rand_u16());
        let subnet = 1 + (rand_u16() % 250) as u8;
        let hub = format!("{prefix}-hub");
        let dir = tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir()
            .expect("cannot create a temporary directory for the network");
        let net = Net {
            prefix,
            subnet,
            hub: hub.clone(),
            hosts: Mutex::new(Vec::new()),
            procs: Mutex::new(HashMap::new()),
            dir,
        };
        ip(&["netns", "add", &hub]);
        ip(&["-n", &hub, "link", "set", "lo", "up"]);
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        Some(net)
    }

    /// `10.77.N.0/24`.
    pub fn subnet(&self) -> String {
        format!("10.77.{}.0/24", self.subnet)
    }

    /// A directory removed with the network (logs, data).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a host: a namespace with `lo` and `eth0` up, `eth0` on the bridge
    /// with the next address of the subnet.
    pub fn add_host(&self, label: &str) -> Host {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        let i = hosts.len();
        assert!(i < 200, "at most 200 hosts");
        let host = Host {
            label: label.to_owned(),
            ns: format!("{}-{label}", self.prefix),
            ip: Ipv4Addr::new(10, 77, self.subnet, 10 + i as u8),
            hub_if: format!("v{i}"),
        };
        let ns = host.ns.as_str();
        ip(&["netns", "add", ns]);
        // Pushed before it is complete: drop deletes it whatever happens next.
        hosts.push(host.clone());
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        ip(&[
            "-n",
            &self.hub,
            "link",
            "add",
            &host.hub_if,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            ns,
        ]);
        ip(&[
            "-n",
            &self.hub,
            "link",
            "set",
            &host.hub_if,
            "master",
            "br0",
        ]);
        ip(&["-n", &self.hub, "link", "set", &host.hub_if, "up"]);
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/24", host.ip),
            "dev",
            "eth0",
        ]);
        ip(&["-n", ns, "link", "set", "eth0", "up"]);
        host
    }

    /// Cuts all of `host`'s links: every packet to or from it is dropped.
    pub fn cut(&self, host: &Host) {
        ip(&["-n", &self.hub, "link", "set", &host.hub_if, "down"]);
    }

    /// Undoes [`Net::cut`].
    pub fn heal(&self, host: &Host) {
        ip(&["-n", &self.hub, "link", "set", &host.hub_if, "up"]);
    }

    /// Cuts the link between `a` and `b` only, both ways.
    pub fn cut_pair(&self, a: &Host, b: &Host) {
        for (from, to) in [(a, b), (b, a)] {
            ip(&[
                "-n",
                &from.ns,
                "neigh",
                "replace",
                &to.ip.to_string(),
                "lladdr",
                NOWHERE_MAC,
                "dev",
                "eth0",
                "nud",
                "permanent",
            ]);
        }
    }

    /// Undoes [`Net::cut_pair`]: the neighbour entries go, ARP finds the
    /// hosts again.
    pub fn heal_pair(&self, a: &Host, b: &Host) {
        for (from, to) in [(a, b), (b, a)] {
            ip(&[
                "-n",
                &from.ns,
                "neigh",
                "del",
                &to.ip.to_string(),
                "dev",
                "eth0",
            ]);
        }
    }

    /// Splits the hosts into two sides that cannot reach each other (every
    /// pair across is cut); hosts in neither side keep all their links.
    pub fn partition(&self, left: &[&Host], right: &[&Host]) {
        for a in left {
            for b in right {
                self.cut_pair(a, b);
            }
        }
    }

    /// Undoes [`Net::partition`].
    pub fn heal_partition(&self, left: &[&Host], right: &[&Host]) {
        for a in left {
            for b in right {
                self.heal_pair(a, b);
            }
        }
    }

    /// Caps what `host` sends at `kbit` kilobits a second (`tc qdisc tbf`):
    /// its packets queue, so each round trip through it takes long.
    pub fn slow(&self, host: &Host, kbit: u32) {
        tc(
            &host.ns,
            &[
                "qdisc",
                "replace",
                "dev",
                "eth0",
                "root",
                "tbf",
                "rate",
                &format!("{kbit}kbit"),
                "burst",
                "1600",
                "latency",
                "30s",
            ],
        );
    }

    /// Undoes [`Net::slow`] (and [`Net::delay`]).
    pub fn unslow(&self, host: &Host) {
        tc(&host.ns, &["qdisc", "del", "dev", "eth0", "root"]);
    }

    /// Adds `ms` of latency to what `host` sends (`tc netem delay`), or says
    /// why not (a kernel without `sch_netem`).
    ///
    /// # Errors
    /// `tc`'s message.
    pub fn delay(&self, host: &Host, ms: u32) -> Result<(), String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &host.ns, "tc", "qdisc", "replace"])
            .args(["dev", "eth0", "root", "netem", "delay", &format!("{ms}ms")])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// `ip netns exec NAME prog`: a command that runs `prog` in `host`.
    pub fn command(&self, host: &Host, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &host.ns]).arg(prog);
        c
    }

    /// Starts `cmd` (from [`Net::command`]) and keeps it: killed (SIGKILL)
    /// when the network is dropped, or by [`Net::kill`]. Pipes are the
    /// caller's to set; stdin is null unless set.
    ///
    /// # Panics
    /// When it cannot be started.
    pub fn spawn(&self, cmd: Command) -> Proc {
        self.spawn_stopped_by(cmd, libc::SIGKILL)
    }

    /// As [`Net::spawn`], asking it to stop with `stop` first (SIGKILL after
    /// 10 s): PostgreSQL's postmaster takes its backends with it on SIGQUIT.
    pub fn spawn_stopped_by(&self, cmd: Command, stop: libc::c_int) -> Proc {
        let what = format!("{cmd:?}");
        let mut child =
            spawn_tied_to_process(cmd).unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let pid = child.id();
        let p = Proc {
            pid,
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
        };
        self.procs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pid, Owned { child, stop });
        p
    }

    /// Sends `sig` to a process this network started (SIGSTOP pauses it,
    /// SIGCONT resumes it). Does nothing for one that has exited and was
    /// reaped.
    pub fn signal(&self, pid: u32, sig: libc::c_int) {
        let procs = self.procs.lock().unwrap_or_else(|p| p.into_inner());
        if procs.contains_key(&pid) {
            // SAFETY: kill on our own child, not yet reaped (it is in the
            // map until waited for), so its pid is not reused.
            unsafe { libc::kill(pid as libc::pid_t, sig) };
        }
    }

    /// Its exit status, if it has exited (it is then forgotten).
    pub fn try_wait(&self, pid: u32) -> Option<ExitStatus> {
        let mut procs = self.procs.lock().unwrap_or_else(|p| p.into_inner());
        let status = procs.get_mut(&pid)?.child.try_wait().ok().flatten();
        if status.is_some() {
            procs.remove(&pid);
        }
        status
    }

    /// Waits for it to exit, at most `within` (then kills it): its status.
    pub fn wait(&self, pid: u32, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.try_wait(pid) {
                return Some(s);
            }
            if !self
                .procs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&pid)
            {
                return None;
            }
            if Instant::now() > deadline {
                self.kill(pid);
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills it with SIGKILL (a paused one too) and reaps it.
    pub fn kill(&self, pid: u32) -> Option<ExitStatus> {
        let owned = self
            .procs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&pid);
        let mut owned = owned?;
        let _ = owned.child.kill();
        owned.child.wait().ok()
    }

    /// Runs `f` on a new thread that has joined `host`'s namespace (and
    /// only that thread: sockets it opens live in `host`, threads it starts
    /// inherit the namespace), and returns what `f` returns.
    ///
    /// # Panics
    /// When the namespace cannot be joined, or `f` panics (with its
    /// message).
    pub fn run_in<T: Send>(&self, host: &Host, f: impl FnOnce() -> T + Send) -> T {
        let path = PathBuf::from("/run/netns").join(&host.ns);
        std::thread::scope(|s| {
            let t = std::thread::Builder::new()
                .name(format!("in-{}", host.label))
                .spawn_scoped(s, move || {
                    enter(&path);
                    f()
                })
                .expect("cannot start a thread");
            match t.join() {
                Ok(v) => v,
                Err(e) => std::panic::resume_unwind(e),
            }
        })
    }

    /// The hosts added so far.
    pub fn hosts(&self) -> Vec<Host> {
        self.hosts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let mut procs = std::mem::take(&mut *self.procs.lock().unwrap_or_else(|p| p.into_inner()));
        // Resume and ask each to stop, then SIGKILL what is left.
        for o in procs.values_mut() {
            // SAFETY: our own unreaped children.
            unsafe {
                libc::kill(o.child.id() as libc::pid_t, o.stop);
                libc::kill(o.child.id() as libc::pid_t, libc::SIGCONT);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        for o in procs.values_mut() {
            loop {
                match o.child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = o.child.kill();
                        let _ = o.child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        let hosts = std::mem::take(&mut *self.hosts.lock().unwrap_or_else(|p| p.into_inner()));
        let names: Vec<String> = hosts
            .into_iter()
            .map(|h| h.ns)
            .chain([self.hub.clone()])
            .collect();
        for ns in &names {
            kill_inside(ns);
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// SIGKILLs every process still in namespace `ns` (children of the processes
/// a network started, such as PostgreSQL's backends: nothing else can be in
/// a namespace of ours).
fn kill_inside(ns: &str) {
    let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() else {
        return;
    };
    for pid in String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<libc::pid_t>().ok())
    {
        // SAFETY: plain kill of a process in our own namespace.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Removes namespaces `ksp<pid>-...` whose process is gone (a test process
/// killed before its drop ran).
fn remove_stale() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("ksp")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            kill_inside(&name);
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
        }
    }
}

/// Joins the network namespace at `path`, on this thread only.
fn enter(path: &Path) {
    let f =
        std::fs::File::open(path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor of a network namespace.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "cannot join {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Runs `ip ARGS`, panicking with its message when it fails.
fn ip(args: &[&str]) {
    let out: Output = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run ip: {e}"));
    assert!(
        out.status.success(),
        "ip {} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Runs `tc ARGS` in namespace `ns`, panicking with its message.
fn tc(ns: &str, args: &[&str]) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "tc"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tc: {e}"));
    assert!(
        out.status.success(),
        "tc {} in {ns} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn rand_u16() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u16
}

/// Whether a status is death by `sig`.
pub fn killed_by(status: &ExitStatus, sig: libc::c_int) -> bool {
    status.signal() == Some(sig)
}

/// One `GET path` over plain HTTP/1.0 to `ip:port` from the calling thread's
/// namespace: the body, or why not.
pub fn http_get(ip: Ipv4Addr, port: u16, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let timeout = Duration::from_secs(2);
    let addr = std::net::SocketAddr::from((ip, port));
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {ip}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut body = String::new();
    s.read_to_string(&mut body).map_err(|e| e.to_string())?;
    Ok(body)
}

/// Where to find a value `"key":NUMBER` in JSON text (no JSON parser here).
fn json_number(text: &str, key: &str) -> Option<u64> {
    let at = text.find(&format!("\"{key}\":"))? + key.len() + 3;
    let rest = text[at..].trim_start();
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// An etcd cluster with one member per host of a [`Net`].
#[derive(Debug)]
pub struct EtcdNet {
    /// The members' hosts, in member order.
    pub hosts: Vec<Host>,
    pids: Vec<u32>,
}

/// The client port of every member.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// The peer port of every member.
pub const ETCD_PEER_PORT: u16 = 2380;

impl EtcdNet {
    /// Adds `n` hosts (`e0`, `e1`, ...) to `net`, starts an etcd member on
    /// each and waits (asking from `probe`) until every member is healthy.
    ///
    /// Returns `None` (after [`crate::skip_or_fail`]) without an etcd binary.
    ///
    /// # Panics
    /// When a member does not become healthy within 60 s (with its log).
    pub fn start(net: &Net, n: usize, probe: &Host) -> Option<EtcdNet> {
        let binary = match crate::etcd::etcd_binary() {
            Ok(b) => b,
            Err(why) => {
                crate::skip_or_fail("etcd", &why);
                return None;
            }
        };
        let hosts: Vec<Host> = (0..n).map(|i| net.add_host(&format!("e{i}"))).collect();
        let initial = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| format!("n{i}=http://{}:{ETCD_PEER_PORT}", h.ip))
            .collect::<Vec<_>>()
            .join(",");
        let token = format!("{}-etcd", net.prefix);
        let mut pids = Vec::new();
        for (i, h) in hosts.iter().enumerate() {
            let log = net.dir().join(format!("etcd-{i}.log"));
            let log = std::fs::File::create(&log).expect("cannot create the etcd log");
            let log2 = log.try_clone().expect("cannot clone the etcd log");
            let client = format!("http://{}:{ETCD_CLIENT_PORT}", h.ip);
            let peer = format!("http://{}:{ETCD_PEER_PORT}", h.ip);
            let mut cmd = net.command(h, &binary);
            cmd.args(["--name", &format!("n{i}")])
                .arg("--data-dir")
                .arg(net.dir().join(format!("etcd-{i}")))
                .args(["--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client])
                .args(["--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &initial])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                .args(["--logger", "zap"])
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(log2);
            if let Some(arch) = crate::etcd::unsupported_go_arch() {
                cmd.env("ETCD_UNSUPPORTED_ARCH", arch);
            }
            pids.push(net.spawn(cmd).pid);
        }
        let etcd = EtcdNet { hosts, pids };
        let deadline = Instant::now() + Duration::from_secs(60);
        for i in 0..n {
            loop {
                let ip = etcd.hosts[i].ip;
                let health = net.run_in(probe, || http_get(ip, ETCD_CLIENT_PORT, "/health"));
                if matches!(&health, Ok(b) if b.replace(' ', "").contains("\"health\":\"true\"")) {
                    break;
                }
                if let Some(status) = net.try_wait(etcd.pids[i]) {
                    panic!(
                        "etcd member {i} exited ({status}); log:\n{}",
                        etcd.log(net, i)
                    );
                }
                assert!(
                    Instant::now() < deadline,
                    "etcd member {i} not healthy within 60 s (last: {health:?}); log:\n{}",
                    etcd.log(net, i)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Some(etcd)
    }

    /// `etcd://IP:2379,IP:2379,...`
    pub fn url(&self) -> String {
        let eps: Vec<String> = self
            .hosts
            .iter()
            .map(|h| format!("{}:{ETCD_CLIENT_PORT}", h.ip))
            .collect();
        format!("etcd://{}", eps.join(","))
    }

    /// The end of member `i`'s log.
    pub fn log(&self, net: &Net, i: usize) -> String {
        let text =
            std::fs::read_to_string(net.dir().join(format!("etcd-{i}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// The pid of member `i`.
    pub fn pid(&self, i: usize) -> u32 {
        self.pids[i]
    }

    /// Which member is the leader as member `i` sees it (`etcdctl endpoint
    /// status` run in `probe`): `Some(j)` when `i` answers and names a
    /// member of this cluster.
    pub fn leader_seen_by(&self, net: &Net, probe: &Host, i: usize) -> Option<usize> {
        let out = net
            .command(probe, "etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!(
                "--endpoints={}:{ETCD_CLIENT_PORT}",
                self.hosts[i].ip
            ))
            .args(["--command-timeout=2s", "--dial-timeout=2s"])
            .args(["endpoint", "status", "-w", "json"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let leader = json_number(&text, "leader")?;
        // The member ids: ask each member for its own.
        (0..self.hosts.len()).find(|&j| {
            if j == i {
                json_number(&text, "member_id") == Some(leader)
            } else {
                self.member_id(net, probe, j) == Some(leader)
            }
        })
    }

    fn member_id(&self, net: &Net, probe: &Host, j: usize) -> Option<u64> {
        let out = net
            .command(probe, "etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!(
                "--endpoints={}:{ETCD_CLIENT_PORT}",
                self.hosts[j].ip
            ))
            .args(["--command-timeout=2s", "--dial-timeout=2s"])
            .args(["endpoint", "status", "-w", "json"])
            .output()
            .ok()?;
        json_number(&String::from_utf8_lossy(&out.stdout), "member_id")
    }
}

/// A PostgreSQL server on its own host of a [`Net`], listening on the
/// host's address, trusting the subnet.
#[derive(Debug)]
pub struct PostgresNet {
    /// Its host.
    pub host: Host,
    pid: u32,
    dir: PathBuf,
}

/// The port PostgreSQL listens on in its host.
pub const POSTGRES_PORT: u16 = 5432;

impl PostgresNet {
    /// Adds a host `label` to `net`, initialises a cluster and starts
    /// PostgreSQL there, and waits until it is ready.
    ///
    /// Returns `None` (after [`crate::skip_or_fail`]) when the server
    /// binaries or an unprivileged user to run them are missing.
    ///
    /// # Panics
    /// When initdb fails or the server is not ready within 90 s.
    pub fn start(net: &Net, label: &str) -> Option<PostgresNet> {
        let (bin, uid, gid) = match postgres_binaries() {
            Ok(found) => found,
            Err(why) => {
                crate::skip_or_fail("PostgreSQL", &why);
                return None;
            }
        };
        let host = net.add_host(label);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(net.dir(), std::fs::Permissions::from_mode(0o755))
            .expect("cannot open the network's directory to the PostgreSQL user");
        let dir = net.dir().join(format!("pg-{label}"));
        std::fs::create_dir(&dir).expect("cannot create PostgreSQL's directory");
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
            .expect("cannot hand PostgreSQL's directory to its user");
        let data = dir.join("data");
        let as_user = |prog: &Path| {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={uid}"))
                .arg(format!("--regid={gid}"))
                .arg("--clear-groups")
                .arg(prog)
                .env("LC_ALL", "C")
                .env_remove("PGDATA")
                .current_dir(&dir);
            c
        };
        let out = as_user(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                crate::postgres::SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
            ])
            .args(["--no-locale", "--no-sync", "--no-instructions"])
            .output()
            .expect("cannot run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hba = data.join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).expect("cannot read pg_hba.conf");
        text.push_str(&format!("host all all {} trust\n", net.subnet()));
        std::fs::write(&hba, text).expect("cannot write pg_hba.conf");
        let log = std::fs::File::create(dir.join("postgres.log")).expect("cannot create the log");
        let log2 = log.try_clone().expect("cannot clone the log");
        let mut cmd = net.command(&host, "setpriv");
        cmd.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--clear-groups")
            .arg(bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &POSTGRES_PORT.to_string()])
            .arg("-k")
            .arg(&dir)
            .args(["-c", &format!("listen_addresses={}", host.ip)])
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on"])
            .args(["-c", "max_connections=200", "-c", "shared_buffers=32MB"])
            .env("LC_ALL", "C")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        let pid = net.spawn_stopped_by(cmd, libc::SIGQUIT).pid;
        let pg = PostgresNet { host, pid, dir };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let text = std::fs::read_to_string(data.join("postmaster.pid")).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            if lines.first().and_then(|l| l.trim().parse::<u32>().ok()) == Some(pid)
                && lines.get(7).map(|l| l.trim()) == Some("ready")
            {
                return Some(pg);
            }
            if let Some(status) = net.try_wait(pid) {
                panic!("postgres exited ({status}):\n{}", pg.log());
            }
            assert!(
                Instant::now() < deadline,
                "postgres not ready within 90 s:\n{}",
                pg.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `postgres://keysmith@IP:5432/postgres`
    pub fn url(&self) -> String {
        format!(
            "postgres://{}@{}:{POSTGRES_PORT}/{}",
            crate::postgres::SUPERUSER,
            self.host.ip,
            crate::postgres::DATABASE
        )
    }

    /// The postmaster's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default()
    }
}

/// Why [`PostgresNet::start`] cannot start a server here, or `None` when it
/// can: the server binaries and an unprivileged user to run them.
pub fn postgres_unavailable() -> Option<String> {
    postgres_binaries().err()
}

/// PostgreSQL's bin directory and the uid and gid to run it as, or why not.
fn postgres_binaries() -> Result<(PathBuf, u32, u32), String> {
    let bin = pg_bin_dir().ok_or_else(|| {
        "no initdb and postgres in $KEYSMITH_PG_BIN or /usr/lib/postgresql/*/bin \
         (Debian: apt-get install postgresql)"
            .to_owned()
    })?;
    let user = std::env::var("KEYSMITH_PG_USER").unwrap_or_else(|_| "postgres".into());
    match (id_of(&user, "-u"), id_of(&user, "-g")) {
        (Some(uid), Some(gid)) => Ok((bin, uid, gid)),
        _ => Err(format!(
            "no user {user:?} to run PostgreSQL as (set KEYSMITH_PG_USER to a user other than root)"
        )),
    }
}

/// `id -u USER` or `id -g USER`, unless it is root's.
fn id_of(user: &str, flag: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, user]).output().ok()?;
    let id: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    (out.status.success() && id != 0).then_some(id)
}

/// `$KEYSMITH_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin` with
/// initdb and postgres.
fn pg_bin_dir() -> Option<PathBuf> {
    let complete = |d: &Path| d.join("initdb").is_file() && d.join("postgres").is_file();
    if let Some(d) = std::env::var_os("KEYSMITH_PG_BIN") {
        let d = PathBuf::from(d);
        return complete(&d).then_some(d);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
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
    versions.pop().map(|(_, d)| d)
}
