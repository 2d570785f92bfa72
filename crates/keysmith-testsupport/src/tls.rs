//! Servers that require TLS and credentials, with certificates the test
//! makes ([`Certs`], with rcgen): a PostgreSQL that refuses plain
//! connections and wants a password ([`TlsPostgres`]), and an etcd node that
//! wants TLS, a client certificate and a user with a password ([`TlsEtcd`]);
//! and a client of keysmith's own HTTPS listener ([`HttpsClient`]) that
//! shows the certificate it was served.
//!
//! Both listen on 127.0.0.1 only and die with the test process, like the
//! plain servers of [`crate::postgres`] and [`crate::etcd`].

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::postgres::{SUPERUSER, Setup, TempPostgres};
use crate::{free_port, skip_or_fail};

/// Certificates for one test, as PEM files in a temporary directory: a CA,
/// a server certificate and a client certificate it signed, and a second CA
/// that signed neither (for the "wrong CA" case).
#[derive(Debug)]
pub struct Certs {
    dir: tempfile::TempDir,
    /// The CA that signed the server's and the client's certificates.
    pub ca: PathBuf,
    /// The server's certificate, for the names given to [`Certs::generate`].
    pub server_cert: PathBuf,
    /// The server certificate's key.
    pub server_key: PathBuf,
    /// A client certificate (extended key usage: client auth).
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// A CA that signed nothing here.
    pub other_ca: PathBuf,
}

impl Certs {
    /// Makes a CA, a server certificate valid for `server_names` (IP
    /// addresses or DNS names, e.g. `["127.0.0.1", "localhost"]`), a client
    /// certificate with the common name `client_name`, and another CA.
    ///
    /// # Panics
    /// When a certificate cannot be made or written (a bug, or a full disk).
    pub fn generate(server_names: &[&str], client_name: &str) -> Certs {
        Certs::generate_with_ca(server_names, client_name, "keysmith test CA")
    }

    /// [`Certs::generate`] with a CA of the common name `ca_name` (two sets
    /// of certificates whose CAs differ by name, e.g. for issuer checks).
    ///
    /// # Panics
    /// As [`Certs::generate`].
    pub fn generate_with_ca(server_names: &[&str], client_name: &str, ca_name: &str) -> Certs {
        let dir = tempfile::Builder::new()
            .prefix("keysmith-certs-")
            .tempdir()
            .expect("cannot create a directory for certificates");
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
            path
        };
        let ca = make_ca(ca_name);
        let other = make_ca("keysmith unrelated CA");

        let server_key = KeyPair::generate().expect("server key");
        let names: Vec<String> = server_names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("server names");
        params.distinguished_name.push(
            DnType::CommonName,
            server_names.first().copied().unwrap_or("server"),
        );
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let server = params
            .signed_by(&server_key, &ca)
            .expect("server certificate");

        let client_key = KeyPair::generate().expect("client key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params
            .distinguished_name
            .push(DnType::CommonName, client_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let client = params
            .signed_by(&client_key, &ca)
            .expect("client certificate");

        Certs {
            ca: write("ca.pem", ca.pem()),
            server_cert: write("server.pem", server.pem()),
            server_key: write("server-key.pem", server_key.serialize_pem()),
            client_cert: write("client.pem", client.pem()),
            client_key: write("client-key.pem", client_key.serialize_pem()),
            other_ca: write("other-ca.pem", other.pem()),
            dir,
        }
    }

    /// The directory holding the files (removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

fn make_ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let key = KeyPair::generate().expect("CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, key).expect("CA certificate")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The DER of the first certificate of the PEM file `path` (to compare with
/// [`HttpsConn::served_certificate`]).
///
/// # Panics
/// When the file cannot be read or holds no certificate.
pub fn first_certificate_der(path: &Path) -> Vec<u8> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_file_iter(path)
        .and_then(|mut it| it.next().transpose())
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("no certificate in {}", path.display()))
        .to_vec()
}

/// How long a [`HttpsConn`] waits for the server before it gives up: a
/// bound on a hang, not a performance threshold.
const HTTPS_DEADLINE: Duration = Duration::from_secs(60);

/// A blocking HTTPS/1.1 client (rustls, ring) for tests of `keysmith serve
/// --tls-cert`: trusts the given CAs only, checks the server's name
/// (`127.0.0.1`), may present a client certificate, and offers the ALPN
/// protocols it is told to.
#[derive(Debug, Clone)]
pub struct HttpsClient {
    config: std::sync::Arc<rustls::ClientConfig>,
}

impl HttpsClient {
    /// A client trusting the CA certificates in the PEM files `cas`,
    /// presenting `client` (certificate file, key file) when asked, and
    /// offering `alpn` (e.g. `[b"h2", b"http/1.1"]`; empty: no ALPN).
    ///
    /// # Panics
    /// When a file cannot be read or used.
    pub fn new(cas: &[&Path], client: Option<(&Path, &Path)>, alpn: &[&[u8]]) -> HttpsClient {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for ca in cas {
            for cert in CertificateDer::pem_file_iter(ca).expect("CA file") {
                roots
                    .add(cert.expect("CA certificate"))
                    .expect("a usable CA");
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
        let mut config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .expect("client certificate file")
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client certificate");
                let key = PrivateKeyDer::from_pem_file(key).expect("client key");
                builder
                    .with_client_auth_cert(chain, key)
                    .expect("client certificate and key")
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        HttpsClient {
            config: std::sync::Arc::new(config),
        }
    }

    /// Connects to `addr` (a server certificate for 127.0.0.1) and
    /// completes the handshake.
    ///
    /// # Errors
    /// The connection or the handshake failed (the message says why).
    pub fn connect(&self, addr: std::net::SocketAddr) -> Result<HttpsConn, String> {
        let tcp = TcpStream::connect_timeout(&addr, HTTPS_DEADLINE).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(HTTPS_DEADLINE))
            .map_err(|e| e.to_string())?;
        tcp.set_write_timeout(Some(HTTPS_DEADLINE))
            .map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let conn =
            rustls::ClientConnection::new(self.config.clone(), name).map_err(|e| e.to_string())?;
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| format!("TLS handshake: {e}"))?;
        }
        Ok(HttpsConn { stream })
    }

    /// One `GET path` on a new connection: the status and the body.
    ///
    /// # Errors
    /// As [`connect`](Self::connect) and [`HttpsConn::get`].
    pub fn get(&self, addr: std::net::SocketAddr, path: &str) -> Result<(u16, String), String> {
        self.connect(addr)?.get(path)
    }
}

/// An open HTTPS connection of an [`HttpsClient`]; requests on it reuse it
/// (HTTP/1.1 keep-alive).
#[derive(Debug)]
pub struct HttpsConn {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl HttpsConn {
    /// The DER of the certificate the server presented (its own, first of
    /// the chain).
    pub fn served_certificate(&self) -> Vec<u8> {
        self.stream
            .conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.to_vec())
            .expect("a server certificate after the handshake")
    }

    /// The client's end of the connection (the server sees it as the peer).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.stream.sock.local_addr().expect("a connected socket")
    }

    /// The protocol the server chose by ALPN.
    pub fn alpn(&self) -> Option<Vec<u8>> {
        self.stream.conn.alpn_protocol().map(<[u8]>::to_vec)
    }

    /// `GET path` over HTTP/1.1 (keep-alive): the status and the body, which
    /// must have a `content-length`.
    ///
    /// # Errors
    /// The server closed the connection or refused it (a TLS alert), or the
    /// answer is not HTTP/1.1 with a length.
    pub fn get(&mut self, path: &str) -> Result<(u16, String), String> {
        self.stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
            .and_then(|()| self.stream.flush())
            .map_err(|e| format!("sending the request: {e}"))?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match self.stream.read(&mut byte) {
                Ok(0) => {
                    return Err(format!(
                        "the server closed the connection after {:?}",
                        String::from_utf8_lossy(&head)
                    ));
                }
                Ok(_) => head.push(byte[0]),
                Err(e) => return Err(format!("reading the answer: {e}")),
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let status = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|s| s.get(..3))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("not an HTTP/1.1 answer: {head:?}"))?;
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .ok_or_else(|| format!("no content-length in {head:?}"))?;
        let mut body = vec![0u8; length];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| format!("reading the body: {e}"))?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// The password of the servers' users, also in [`TlsPostgres::password_file`]
/// and [`TlsEtcd::password_file`].
pub const PASSWORD: &str = "keysmith-tls-test-pw";

/// The names the servers' certificates are valid for.
pub const SERVER_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// The user [`TlsPostgres`] lets in with a client certificate alone
/// (`hostssl ... cert`): the common name of [`Certs::client_cert`]. The
/// server has no such role until a test creates it.
pub const CERT_USER: &str = "keysmith_cert";

/// A throwaway PostgreSQL that accepts only TLS connections
/// (`hostssl ... scram-sha-256`, `hostnossl ... reject`) and only with the
/// superuser's password, [`PASSWORD`]; the user [`CERT_USER`] logs in with
/// the client certificate instead (`hostssl ... cert`, the CA as
/// `ssl_ca_file`).
#[derive(Debug)]
pub struct TlsPostgres {
    pg: TempPostgres,
    certs: Certs,
    password_file: PathBuf,
}

impl TlsPostgres {
    /// Makes certificates (the server's for [`SERVER_NAMES`]) and starts the
    /// server with them.
    ///
    /// Returns `None` (after [`skip_or_fail`]) when PostgreSQL is not installed.
    ///
    /// # Panics
    /// As [`TempPostgres::start`].
    pub fn start() -> Option<TlsPostgres> {
        let certs = Certs::generate(&SERVER_NAMES, CERT_USER);
        let setup = Setup {
            superuser_password: Some(PASSWORD.to_owned()),
            files: vec![
                ("server.crt".to_owned(), read(&certs.server_cert)),
                ("server.key".to_owned(), read(&certs.server_key)),
                ("ca.crt".to_owned(), read(&certs.ca)),
            ],
            settings: vec![
                "ssl = on".to_owned(),
                "ssl_cert_file = 'server.crt'".to_owned(),
                "ssl_key_file = 'server.key'".to_owned(),
                "ssl_ca_file = 'ca.crt'".to_owned(),
                "password_encryption = 'scram-sha-256'".to_owned(),
            ],
            hba: Some(format!(
                "local all all trust\n\
                 hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
                 hostssl all all 127.0.0.1/32 scram-sha-256\n\
                 hostnossl all all 127.0.0.1/32 reject\n"
            )),
        };
        let pg = TempPostgres::start_with(&setup)?;
        let password_file = certs.dir().join("pg-password");
        std::fs::write(&password_file, format!("{PASSWORD}\n"))
            .expect("cannot write the password file");
        Some(TlsPostgres {
            pg,
            certs,
            password_file,
        })
    }

    /// One server for the whole test binary, started on first use, stopped
    /// and removed when the process exits.
    ///
    /// Returns `None` as [`start`](Self::start) does.
    pub fn shared() -> Option<&'static TlsPostgres> {
        static SHARED: std::sync::OnceLock<Option<TlsPostgres>> = std::sync::OnceLock::new();
        extern "C" fn cleanup() {
            if let Some(Some(pg)) = SHARED.get() {
                pg.pg.halt_and_remove();
                // A static is never dropped: its certificates' directory
                // (with the password file) goes here, as the server's does.
                let _ = std::fs::remove_dir_all(pg.certs.dir());
            }
        }
        SHARED
            .get_or_init(|| {
                let pg = TlsPostgres::start()?;
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(cleanup) };
                Some(pg)
            })
            .as_ref()
    }

    /// `postgres://keysmith@HOST:PORT/postgres` with `query` (no `?`) added
    /// when not empty. No password: give it in `query` or the user info.
    pub fn url(&self, host: &str, query: &str) -> String {
        let mut url = format!(
            "postgres://{SUPERUSER}@{host}:{}/{}",
            self.pg.port(),
            crate::postgres::DATABASE
        );
        if !query.is_empty() {
            url.push('?');
            url.push_str(query);
        }
        url
    }

    /// The certificates the server uses (and a client certificate, and another CA).
    pub fn certs(&self) -> &Certs {
        &self.certs
    }

    /// A file holding [`PASSWORD`] and a newline.
    pub fn password_file(&self) -> &Path {
        &self.password_file
    }

    /// The server underneath (its port, log, data directory).
    pub fn server(&self) -> &TempPostgres {
        &self.pg
    }
}

/// How long the TLS etcd node may take to come up.
const ETCD_DEADLINE: Duration = Duration::from_secs(60);

/// One etcd node that requires TLS with a client certificate signed by the
/// CA (`--client-cert-auth`), and has auth enabled with a user.
///
/// It is set up in two runs on the same data directory: first on plain HTTP,
/// where the users and roles are made and auth is enabled through etcd's
/// JSON gateway (no etcdctl needed), then, for the test, on HTTPS only.
#[derive(Debug)]
pub struct TlsEtcd {
    child: Option<Child>,
    port: u16,
    certs: Certs,
    user: String,
    password_file: PathBuf,
    // Removed on drop, after the node is dead.
    dir: tempfile::TempDir,
}

impl TlsEtcd {
    /// One node (with the user `keysmith`) for the whole test binary,
    /// started on first use, killed and removed, with its certificates, when
    /// the process exits (a static is never dropped).
    ///
    /// Returns `None` as [`start`](Self::start) does.
    pub fn shared() -> Option<&'static TlsEtcd> {
        static SHARED: std::sync::OnceLock<Option<TlsEtcd>> = std::sync::OnceLock::new();
        extern "C" fn cleanup() {
            if let Some(Some(etcd)) = SHARED.get() {
                if let Some(child) = &etcd.child {
                    crate::kill_and_reap(child);
                }
                let _ = std::fs::remove_dir_all(etcd.dir.path());
                let _ = std::fs::remove_dir_all(etcd.certs.dir());
            }
        }
        SHARED
            .get_or_init(|| {
                let etcd = TlsEtcd::start("keysmith")?;
                // SAFETY: registering a plain extern "C" function.
                unsafe { libc::atexit(cleanup) };
                Some(etcd)
            })
            .as_ref()
    }

    /// Makes certificates (the server's for [`SERVER_NAMES`]) and starts the
    /// node with them, a user `user` with [`PASSWORD`] that may read and
    /// write every key, and auth enabled.
    ///
    /// Returns `None` (after [`skip_or_fail`]) when etcd is not installed.
    ///
    /// # Panics
    /// When etcd does not start, or a setup request fails (the message says
    /// which, with the end of etcd's log).
    pub fn start(user: &str) -> Option<TlsEtcd> {
        let password = PASSWORD;
        let binary = match crate::etcd::etcd_binary() {
            Ok(b) => b,
            Err(why) => {
                skip_or_fail("etcd", &why);
                return None;
            }
        };
        crate::etcd::remove_stale_dirs();
        let dir = tempfile::Builder::new()
            .prefix(&format!("keysmith-etcd-{}-tls-", std::process::id()))
            .tempdir()
            .expect("cannot create a temporary directory for etcd");
        let certs = Certs::generate(&SERVER_NAMES, "keysmith-client");
        let password_file = certs.dir().join("etcd-password");
        std::fs::write(&password_file, format!("{PASSWORD}\n"))
            .expect("cannot write the password file");
        let mut node = TlsEtcd {
            child: None,
            port: free_port(),
            certs,
            user: user.to_owned(),
            password_file,
            dir,
        };
        // Run 1: plain HTTP, for the setup.
        let peer = free_port();
        let metrics = free_port();
        node.spawn(&binary, peer, metrics, false);
        node.wait_healthy(metrics);
        let b64 = |s: &str| base64(s.as_bytes());
        let steps = [
            ("/v3/auth/role/add", r#"{"name":"root"}"#.to_owned()),
            (
                "/v3/auth/user/add",
                format!(r#"{{"name":"root","password":{}}}"#, json_string(password)),
            ),
            (
                "/v3/auth/user/grant",
                r#"{"user":"root","role":"root"}"#.to_owned(),
            ),
            ("/v3/auth/role/add", r#"{"name":"keysmith-rw"}"#.to_owned()),
            (
                "/v3/auth/role/grant",
                format!(
                    r#"{{"name":"keysmith-rw","perm":{{"permType":"READWRITE","key":"{}","range_end":"{}"}}}}"#,
                    b64("\0"),
                    b64("\0")
                ),
            ),
            (
                "/v3/auth/user/add",
                format!(
                    r#"{{"name":{},"password":{}}}"#,
                    json_string(user),
                    json_string(password)
                ),
            ),
            (
                "/v3/auth/user/grant",
                format!(r#"{{"user":{},"role":"keysmith-rw"}}"#, json_string(user)),
            ),
            ("/v3/auth/enable", "{}".to_owned()),
        ];
        for (path, body) in &steps {
            if let Err(e) = post_json(node.port, path, body) {
                panic!(
                    "etcd setup request {path} failed: {e}; its log ends with:\n{}",
                    node.log_tail()
                );
            }
        }
        node.stop();
        // Run 2: HTTPS with client certificates, on the same data.
        node.spawn(&binary, peer, metrics, true);
        node.wait_healthy(metrics);
        Some(node)
    }

    /// The client endpoint, `127.0.0.1:PORT` (HTTPS).
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The certificates the node uses (and a client certificate, and another CA).
    pub fn certs(&self) -> &Certs {
        &self.certs
    }

    /// The user made at start, who may read and write every key.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// A file holding [`PASSWORD`] and a newline.
    pub fn password_file(&self) -> &Path {
        &self.password_file
    }

    fn spawn(&mut self, binary: &Path, peer: u16, metrics: u16, tls: bool) {
        let scheme = if tls { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", self.port);
        let peer = format!("http://127.0.0.1:{peer}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .expect("cannot create the etcd log file");
        let log2 = log.try_clone().expect("cannot clone the etcd log file");
        let mut cmd = Command::new(binary);
        cmd.arg("--name")
            .arg("tls")
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(format!("tls={peer}"))
            .arg("--listen-metrics-urls")
            .arg(format!("http://127.0.0.1:{metrics}"))
            .arg("--logger")
            .arg("zap")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        if tls {
            let c = &self.certs;
            cmd.arg("--cert-file")
                .arg(&c.server_cert)
                .arg("--key-file")
                .arg(&c.server_key)
                .arg("--trusted-ca-file")
                .arg(&c.ca)
                .arg("--client-cert-auth");
        }
        if let Some(arch) = crate::etcd::unsupported_go_arch() {
            cmd.env("ETCD_UNSUPPORTED_ARCH", arch);
        }
        let child = crate::etcd::spawn_tied_to_process(cmd)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        self.child = Some(child);
    }

    /// Waits until `GET /health` on the metrics port (plain HTTP whatever the
    /// client port speaks) says healthy.
    fn wait_healthy(&mut self, metrics: u16) {
        let deadline = Instant::now() + ETCD_DEADLINE;
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "the TLS etcd node exited during startup ({status}); its log ends with:\n{}",
                    self.log_tail()
                );
            }
            let last = match crate::etcd::health(metrics) {
                Ok(true) => return,
                Ok(false) => "not healthy yet".to_owned(),
                Err(e) => e,
            };
            if Instant::now() > deadline {
                panic!(
                    "the TLS etcd node was not healthy after {ETCD_DEADLINE:?} (last: {last}); its log ends with:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill on our own child's pid, not yet reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + ETCD_DEADLINE;
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() > deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for TlsEtcd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One POST of a JSON body to etcd's gateway over plain HTTP/1.0; an error
/// unless it answers 200.
fn post_json(port: u16, path: &str, body: &str) -> Result<(), String> {
    let timeout = Duration::from_secs(10);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    let status = answer.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(format!("answer: {}", answer.trim()))
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard() {
        assert_eq!(base64(b"\0"), "AA==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }
}
