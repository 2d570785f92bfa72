//! TLS on the listener: the certificate and key the server presents, and,
//! with a client CA, mutual TLS (a client certificate signed by that CA is
//! required).
//!
//! rustls with the ring provider (as the library's store connections),
//! TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`. The files are read when the
//! server starts ([`Config::validate`](crate::Config::validate) reports a
//! file that cannot be used) and again on
//! [`AppState::reload`](crate::AppState::reload): the configuration is
//! swapped whole, so a connection uses the files of one reading, the one
//! current when it was accepted; a reading that fails changes nothing.
//!
//! The handshake runs in the connection's own task, never in the accept
//! loop, bounded by [`Config::header_read_timeout`](crate::Config::header_read_timeout).
//! A client that does not speak TLS (plain HTTP) fails the handshake and is
//! disconnected without an answer.
//!
//! With mutual TLS, every request of a connection carries the verified
//! client certificate's subject (a crate-internal `ClientCert` extension,
//! for access rules and audit lines). The subject is written as x509-parser
//! prints it, RFC 4514 style: `TYPE=value` attributes in the order the
//! certificate holds them, joined by `, ` (those of one multi-valued RDN by
//! ` + `), the usual types by their short names (`CN`, `O`, `OU`, `C`, `L`,
//! `ST`, ...), values unescaped. A certificate whose subject is only the
//! common name `team-a` gives exactly `CN=team-a`.
//!
//! Every request, TLS or not, also carries the peer's address as an
//! `axum::extract::ConnectInfo<std::net::SocketAddr>` extension.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use crate::ServeError;

/// The files of a TLS listener: PEM files, read at start and on every
/// [`AppState::reload`](crate::AppState::reload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain: its own certificate first, then the
    /// intermediates, if any.
    pub cert: PathBuf,
    /// The private key of `cert` (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA certificates that sign client certificates. `Some`: every
    /// client must present a certificate one of them signed (mutual TLS);
    /// `None`: no client certificate is asked for.
    pub client_ca: Option<PathBuf>,
}

/// The verified client certificate of a connection (mutual TLS), in the
/// extensions of each of its requests.
///
/// `subject` is the certificate's subject, RFC 4514 style: `TYPE=value`
/// attributes in the order the certificate holds them, joined by `, ` (the
/// attributes of one multi-valued RDN by ` + `), the usual types by their
/// short names (`CN`, `O`, `OU`, `C`, `L`, `ST`, ...), values with RFC
/// 4514's special characters escaped (`O=acme\, CN=ops` is one attribute). A certificate whose subject is only the common
/// name `team-a` gives exactly `CN=team-a`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientCert {
    pub(crate) subject: String,
    /// The issuer's DN, written as `subject` is.
    pub(crate) issuer: String,
    /// The SHA-256 digest of the certificate's DER.
    pub(crate) sha256: [u8; 32],
}

/// A TLS listener's configuration, swappable while the server runs.
#[derive(Debug)]
pub(crate) struct Tls {
    files: TlsFiles,
    current: RwLock<Arc<ServerConfig>>,
    /// The subjects of the client CAs of `current`, if it asks for client
    /// certificates.
    cas: RwLock<Option<Vec<String>>>,
    /// When the server's own certificate of `current` expires (its
    /// `notAfter`, seconds since 1970).
    not_after: RwLock<i64>,
}

impl Tls {
    /// Reads `files`.
    ///
    /// # Errors
    /// As [`load`].
    pub(crate) fn new(files: TlsFiles) -> Result<Tls, ServeError> {
        let config = load(&files)?;
        let cas = files.client_ca.as_deref().map(ca_subjects).transpose()?;
        let not_after = not_after(&files.cert)?;
        Ok(Tls {
            files,
            current: RwLock::new(Arc::new(config)),
            cas: RwLock::new(cas),
            not_after: RwLock::new(not_after),
        })
    }

    /// Seconds from `now_unix` (seconds since 1970) until the certificate
    /// in use expires; negative once it has.
    pub(crate) fn expires_in(&self, now_unix: f64) -> f64 {
        *self.not_after.read().unwrap_or_else(|p| p.into_inner()) as f64 - now_unix
    }

    /// `keysmith_tls_cert_expiry_seconds` in the text exposition format:
    /// seconds until the certificate in use expires, at `now_unix`.
    pub(crate) fn metrics_text(&self, now_unix: f64) -> String {
        use prometheus::Encoder;
        let g = prometheus::Gauge::new(
            "keysmith_tls_cert_expiry_seconds",
            "Seconds until the server's TLS certificate in use expires (its notAfter); negative once it has.",
        )
        .expect("valid metric");
        g.set(self.expires_in(now_unix));
        let registry = prometheus::Registry::new();
        registry.register(Box::new(g)).expect("unique metric");
        let mut buf = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&registry.gather(), &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }

    /// The subjects of the client CAs in use (`None`: no client
    /// certificates are asked for).
    pub(crate) fn client_cas(&self) -> Option<Vec<String>> {
        self.cas.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the client CA bundle in use holds more than one CA.
    pub(crate) fn several_cas(&self) -> bool {
        self.cas
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|c| c.len() > 1)
    }

    /// The files this listener reads.
    pub(crate) fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Reads the files again and, if they can be used, makes them the
    /// configuration of connections accepted from now on.
    ///
    /// # Errors
    /// As [`load`]; then the configuration in use stays.
    pub(crate) fn reload(&self) -> Result<(), ServeError> {
        let config = Arc::new(load(&self.files)?);
        let cas = self
            .files
            .client_ca
            .as_deref()
            .map(ca_subjects)
            .transpose()?;
        let not_after = not_after(&self.files.cert)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = config;
        *self.cas.write().unwrap_or_else(|p| p.into_inner()) = cas;
        *self.not_after.write().unwrap_or_else(|p| p.into_inner()) = not_after;
        Ok(())
    }

    /// An acceptor with the configuration current now.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        tokio_rustls::TlsAcceptor::from(config)
    }
}

/// The server configuration `files` make.
///
/// # Errors
/// [`ServeError::Config`] naming the file and saying what is wrong with it:
/// it cannot be read, holds no certificate or key, a client CA is not a CA,
/// or the key is not the certificate's.
pub(crate) fn load(files: &TlsFiles) -> Result<ServerConfig, ServeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certificates(&files.cert, "TLS certificate")?;
    let key = private_key(&files.key)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::Config(format!("cannot set up TLS: {e}")))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let shown = path.display();
            let mut roots = RootCertStore::empty();
            for cert in certificates(path, "client CA")? {
                roots.add(cert).map_err(|e| {
                    ServeError::Config(format!(
                        "the client CA file {shown} holds a certificate that is not a usable CA: {e}; \
                         give the PEM file of the CA that signs the clients' certificates"
                    ))
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| {
                    ServeError::Config(format!(
                        "cannot check client certificates against the client CA file {shown}: {e}"
                    ))
                })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        let (cert, key) = (files.cert.display(), files.key.display());
        match e {
            rustls::Error::InconsistentKeys(_) => ServeError::Config(format!(
                "the TLS key file {key} is not the key of the certificate in {cert}; \
                 give the key the certificate was made for (after a renewal, both new files)"
            )),
            e => ServeError::Config(format!(
                "cannot use the TLS certificate {cert} with the key {key}: {e}; \
                 give a certificate chain (the server's own certificate first) and its key"
            )),
        }
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// When the first certificate of the chain in `path` (the server's own)
/// expires, in seconds since 1970.
///
/// # Errors
/// [`ServeError::Config`] naming the file when it cannot be read or its
/// first certificate cannot be parsed.
fn not_after(path: &Path) -> Result<i64, ServeError> {
    let chain = certificates(path, "TLS certificate")?;
    let (_, cert) = x509_parser::parse_x509_certificate(&chain[0]).map_err(|e| {
        ServeError::Config(format!(
            "cannot read the validity of the first certificate in the TLS certificate file {}: {e}; \
             give a PEM chain with the server's own X.509 certificate first",
            path.display()
        ))
    })?;
    Ok(cert.validity().not_after.timestamp())
}

/// The certificates of the PEM file `path` (`what`, for messages), at least one.
fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| {
        ServeError::Config(format!(
            "cannot read the {what} file {shown}: {e}; check the path and that this user may read it"
        ))
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| {
            ServeError::Config(format!(
                "the {what} file {shown} is not PEM: {e}; give a PEM file of certificates"
            ))
        })?;
    if certs.is_empty() {
        return Err(ServeError::Config(format!(
            "the {what} file {shown} holds no certificate; give a PEM file with \
             -----BEGIN CERTIFICATE----- blocks"
        )));
    }
    Ok(certs)
}

/// The subjects of the CA certificates in the PEM bundle `path`, written as
/// client certificates' subjects and issuers are: what an access file's
/// `client_cert_issuer` names.
///
/// # Errors
/// [`ServeError::Config`] naming the file when it cannot be read, is not
/// PEM, holds no certificate or one that cannot be parsed.
pub fn ca_subjects(path: &Path) -> Result<Vec<String>, ServeError> {
    certificates(path, "client CA")?
        .iter()
        .map(|der| {
            let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| {
                ServeError::Config(format!(
                    "the client CA file {} holds a certificate that cannot be parsed: {e}",
                    path.display()
                ))
            })?;
            subject_string(cert.subject()).map_err(ServeError::Config)
        })
        .collect()
}

/// The private key of the PEM file `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServeError> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| {
        ServeError::Config(format!(
            "cannot read the TLS key file {shown}: {e}; check the path and that this user may read it"
        ))
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        ServeError::Config(format!(
            "the TLS key file {shown} holds no usable private key ({e}); give the PEM key \
             (-----BEGIN PRIVATE KEY-----, RSA or EC) of the certificate"
        ))
    })
}

/// The subject of a connection's verified client certificate, if it
/// presented one.
///
/// # Errors
/// A message when the certificate's subject cannot be read (it passed the
/// chain check, so this is a certificate x509-parser cannot parse).
pub(crate) fn client_cert(conn: &rustls::ServerConnection) -> Result<Option<ClientCert>, String> {
    let Some(end_entity) = conn.peer_certificates().and_then(|c| c.first()) else {
        return Ok(None);
    };
    let (_, cert) = x509_parser::parse_x509_certificate(end_entity)
        .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
    use sha2::Digest;
    Ok(Some(ClientCert {
        subject: subject_string(cert.subject())?,
        issuer: subject_string(cert.issuer())?,
        sha256: sha2::Sha256::digest(end_entity.as_ref()).into(),
    }))
}

/// A subject as [`ClientCert::subject`] writes it: `TYPE=value` in the
/// certificate's order, RDNs joined by `, `, the attributes of one RDN by
/// ` + `, and in values the characters RFC 4514 escapes (`, + " \ < > ;`,
/// a leading `#` or space, a trailing space) escaped with `\`, so that no
/// value can pass for more attributes than it is. A value that is not a
/// string is written `#` and its DER bytes in hex, as RFC 4514 says.
fn subject_string(name: &x509_parser::x509::X509Name<'_>) -> Result<String, String> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let registry = x509_parser::objects::oid_registry();
    let mut rdns = Vec::new();
    for rdn in name.iter() {
        let mut attrs = Vec::new();
        for a in rdn.iter() {
            let ty = x509_parser::objects::oid2abbrev(a.attr_type(), registry)
                .map(str::to_owned)
                .unwrap_or_else(|_| a.attr_type().to_id_string());
            let v = a.attr_value();
            let text = match v.tag() {
                Tag::NumericString
                | Tag::VisibleString
                | Tag::PrintableString
                | Tag::GeneralString
                | Tag::GraphicString
                | Tag::T61String
                | Tag::VideotexString
                | Tag::Utf8String
                | Tag::Ia5String => std::str::from_utf8(v.data).ok().map(str::to_owned),
                Tag::BmpString => {
                    let units: Vec<u16> = v
                        .data
                        .chunks_exact(2)
                        .map(|c| u16::from_be_bytes([c[0], c[1]]))
                        .collect();
                    String::from_utf16(&units).ok()
                }
                _ => None,
            };
            let value = match text {
                Some(t) => escape_rfc4514(&t),
                None => format!(
                    "#{}",
                    v.data
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                ),
            };
            attrs.push(format!("{ty}={value}"));
        }
        rdns.push(attrs.join(" + "));
    }
    Ok(rdns.join(", "))
}

/// A string attribute value with RFC 4514's special characters escaped.
fn escape_rfc4514(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod subject_tests {
    use super::escape_rfc4514;

    #[test]
    fn values_cannot_pass_for_more_attributes() {
        assert_eq!(escape_rfc4514("team-a"), "team-a");
        assert_eq!(escape_rfc4514("acme, CN=ops"), "acme\\, CN=ops");
        assert_eq!(
            escape_rfc4514("a+b;c\"d\\e<f>"),
            "a\\+b\\;c\\\"d\\\\e\\<f\\>"
        );
        assert_eq!(escape_rfc4514("#x "), "\\#x\\ ");
        assert_eq!(escape_rfc4514(" "), "\\ ");
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::SocketAddr;
    use std::time::Duration;

    use axum::Router;
    use axum::extract::{ConnectInfo, Request};
    use axum::routing::get;
    use keysmith_testsupport::tls::{Certs, HttpsClient};

    use super::*;
    use crate::conn::{self, Limits};

    /// What a request knows of its connection: the client certificate's
    /// subject (or `-`) and the peer address.
    async fn who(ConnectInfo(peer): ConnectInfo<SocketAddr>, req: Request) -> String {
        let subject = req
            .extensions()
            .get::<ClientCert>()
            .map_or("-".to_owned(), |c| c.subject.clone());
        format!("{subject} {peer}")
    }

    /// Serves `who` with `tls` on 127.0.0.1 until the sender is dropped.
    async fn serve(
        tls: Option<Tls>,
        header_read_timeout: Duration,
    ) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let limits = Limits {
            header_read_timeout,
            idle_timeout: Duration::from_secs(60),
            max_connections: 8,
            max_connections_per_ip: 8,
        };
        tokio::spawn(conn::serve(
            listener,
            Router::new().route("/who", get(who)),
            tls.map(Arc::new),
            limits,
            Duration::from_secs(1),
            async {
                let _ = stopped.await;
            },
        ));
        (addr, stop)
    }

    fn files(certs: &Certs, client_ca: bool) -> TlsFiles {
        TlsFiles {
            cert: certs.server_cert.clone(),
            key: certs.server_key.clone(),
            client_ca: client_ca.then(|| certs.ca.clone()),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_carry_the_client_certificates_subject_and_the_peer_address() {
        let certs = Certs::generate(&["127.0.0.1"], "team-a");
        let tls = Tls::new(files(&certs, true)).unwrap();
        let (addr, _stop) = serve(Some(tls), Duration::from_secs(60)).await;
        let client = HttpsClient::new(
            &[&certs.ca],
            Some((&certs.client_cert, &certs.client_key)),
            &[b"http/1.1"],
        );
        let (local, answer) = tokio::task::spawn_blocking(move || {
            let mut conn = client.connect(addr).unwrap();
            (conn.local_addr(), conn.get("/who").unwrap())
        })
        .await
        .unwrap();
        assert_eq!(answer, (200, format!("CN=team-a {local}")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plain_connections_carry_the_peer_address_and_no_certificate() {
        let (addr, _stop) = serve(None, Duration::from_secs(60)).await;
        let (local, answer) = tokio::task::spawn_blocking(move || {
            let mut tcp = std::net::TcpStream::connect(addr).unwrap();
            tcp.write_all(b"GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut answer = String::new();
            tcp.read_to_string(&mut answer).unwrap();
            (tcp.local_addr().unwrap(), answer)
        })
        .await
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(answer.ends_with(&format!("\r\n\r\n- {local}")), "{answer}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_client_is_dropped_at_the_header_timeout_without_holding_up_others() {
        let certs = Certs::generate(&["127.0.0.1"], "team-a");
        let tls = Tls::new(files(&certs, false)).unwrap();
        let (addr, _stop) = serve(Some(tls), Duration::from_millis(300)).await;
        let client = HttpsClient::new(&[&certs.ca], None, &[]);
        tokio::task::spawn_blocking(move || {
            // Connects and never starts a handshake.
            let mut silent = std::net::TcpStream::connect(addr).unwrap();
            // Meanwhile another client is accepted and served.
            let (status, _) = client.get(addr, "/who").unwrap();
            assert_eq!(status, 200);
            // The silent one is closed by the server (end of stream), with
            // nothing sent.
            silent
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            let mut got = Vec::new();
            silent.read_to_end(&mut got).unwrap();
            assert!(got.is_empty(), "{got:?}");
        })
        .await
        .unwrap();
    }

    fn error(files: &TlsFiles) -> String {
        match load(files) {
            Ok(_) => panic!("{files:?} loaded"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unusable_files_are_named_with_what_is_wrong() {
        let certs = Certs::generate(&["127.0.0.1"], "team-a");
        let other = Certs::generate(&["127.0.0.1"], "team-b");
        let good = files(&certs, true);
        load(&good).unwrap();

        let missing = certs.dir().join("missing.pem");
        let e = error(&TlsFiles {
            cert: missing.clone(),
            ..good.clone()
        });
        assert!(
            e.contains(&format!(
                "cannot read the TLS certificate file {}",
                missing.display()
            )) && e.contains("check the path"),
            "{e}"
        );

        let e = error(&TlsFiles {
            key: other.server_key.clone(),
            ..good.clone()
        });
        assert!(
            e.contains(&format!(
                "the TLS key file {} is not the key of the certificate in {}",
                other.server_key.display(),
                certs.server_cert.display()
            )),
            "{e}"
        );

        let e = error(&TlsFiles {
            key: certs.server_cert.clone(),
            ..good.clone()
        });
        assert!(
            e.contains(&format!(
                "the TLS key file {} holds no usable private key",
                certs.server_cert.display()
            )),
            "{e}"
        );

        let e = error(&TlsFiles {
            client_ca: Some(certs.client_key.clone()),
            ..good.clone()
        });
        assert!(
            e.contains(&format!(
                "the client CA file {} holds no certificate",
                certs.client_key.display()
            )),
            "{e}"
        );
    }

    #[test]
    fn a_failed_reload_keeps_the_configuration_in_use() {
        let certs = Certs::generate(&["127.0.0.1"], "team-a");
        let dir = certs.dir();
        let (cert, key) = (dir.join("live.pem"), dir.join("live-key.pem"));
        std::fs::copy(&certs.server_cert, &cert).unwrap();
        std::fs::copy(&certs.server_key, &key).unwrap();
        let tls = Tls::new(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: None,
        })
        .unwrap();
        let before = Arc::as_ptr(&tls.current.read().unwrap().clone());
        std::fs::write(&key, "not a key").unwrap();
        let e = tls.reload().unwrap_err().to_string();
        assert!(e.contains(&key.display().to_string()), "{e}");
        assert_eq!(Arc::as_ptr(&tls.current.read().unwrap().clone()), before);
        std::fs::copy(&certs.server_key, &key).unwrap();
        tls.reload().unwrap();
        assert_ne!(Arc::as_ptr(&tls.current.read().unwrap().clone()), before);
    }

    /// A self-signed certificate for 127.0.0.1 valid until `year`-01-01
    /// 00:00 UTC, written to `cert` and `key`.
    fn write_cert_until(year: i32, cert: &Path, key: &Path) {
        let pair = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, 1, 1);
        let c = params.self_signed(&pair).unwrap();
        std::fs::write(cert, c.pem()).unwrap();
        std::fs::write(key, pair.serialize_pem()).unwrap();
    }

    #[test]
    fn the_expiry_gauge_counts_down_to_the_certificate_in_use_and_follows_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        write_cert_until(2030, &cert, &key);
        let tls = Tls::new(TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: None,
        })
        .unwrap();
        // 2030-01-01T00:00:00Z is 1 893 456 000 s after 1970.
        let now = 1_893_456_000.0 - 86_400.0 * 10.0;
        assert_eq!(tls.expires_in(now), 86_400.0 * 10.0);
        let text = tls.metrics_text(now);
        assert!(
            text.contains("# TYPE keysmith_tls_cert_expiry_seconds gauge")
                && text.contains("\nkeysmith_tls_cert_expiry_seconds 864000\n"),
            "{text}"
        );
        // Past it: negative.
        assert_eq!(tls.expires_in(1_893_456_000.0 + 5.0), -5.0);

        // Renewed until 2031: the gauge follows the reload ...
        write_cert_until(2031, &cert, &key);
        tls.reload().unwrap();
        assert_eq!(tls.expires_in(now), 86_400.0 * (10.0 + 365.0));
        // ... and a reload that fails keeps the expiry of the certificate in use.
        std::fs::write(&cert, "not a certificate").unwrap();
        assert!(tls.reload().is_err());
        assert_eq!(tls.expires_in(now), 86_400.0 * (10.0 + 365.0));
    }
}
