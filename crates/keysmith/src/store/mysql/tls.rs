//! `ssl-mode=verify_ca`: the server's certificate must chain to a trusted
//! CA, whatever host name it holds.
//!
//! The driver (`mysql_async` over rustls) checks chain and name together; its
//! "skip the name" switch matches rustls' error by a text that rustls 0.23
//! no longer prints, so it fails every certificate that does not name the
//! host. keysmith therefore opens one TLS connection of its own at open:
//! the MySQL handshake up to the `SSLRequest`, then a rustls handshake
//! whose verifier checks the chain against the trusted CAs (`ssl-ca`, else
//! the system's) and keeps the certificate. The driver's connections then
//! check the full chain again and the name *the certificate itself holds*
//! (its first DNS name): a server can only pass with a certificate the CA
//! signed, as `verify_ca` promises.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::MysqlUrl;
use crate::{Error, Result};

const CLIENT_LONG_PASSWORD: u32 = 0x0001;
const CLIENT_PROTOCOL_41: u32 = 0x0200;
const CLIENT_SSL: u32 = 0x0800;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;

/// The DNS name of the server's certificate, after checking that it chains
/// to a trusted CA; `None` when the server offers no TLS (the driver then
/// says so) or the certificate holds no DNS name (the driver then checks
/// the URL's host).
///
/// # Errors
/// [`Error::InvalidArgument`] when the certificate does not chain to a
/// trusted CA (or no CA is found); [`Error::Unavailable`] when the server
/// cannot be reached within the URL's timeout.
pub(crate) async fn certificate_name(u: &MysqlUrl) -> Result<Option<String>> {
    let u = u.clone();
    tokio::task::spawn_blocking(move || handshake(&u))
        .await
        .map_err(|e| Error::Unavailable(format!("checking the server's certificate: {e}")))?
}

fn handshake(u: &MysqlUrl) -> Result<Option<String>> {
    let t = u.target();
    let down = |e: std::io::Error| {
        Error::Unavailable(format!(
            "MySQL at {t}: {e}; check that the server is running and reachable, then retry"
        ))
    };
    let addr = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .map_err(down)?
        .next()
        .ok_or_else(|| Error::Unavailable(format!("MySQL at {t}: the host has no address")))?;
    let mut sock = TcpStream::connect_timeout(&addr, u.timeout).map_err(down)?;
    sock.set_read_timeout(Some(u.timeout)).map_err(down)?;
    sock.set_write_timeout(Some(u.timeout)).map_err(down)?;

    // The server's greeting: offers it TLS?
    let greeting = read_packet(&mut sock).map_err(down)?;
    if greeting.first() == Some(&0xff) || !offers_tls(&greeting) {
        return Ok(None);
    }
    let flags = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION;
    let mut request = vec![32, 0, 0, 1];
    request.extend_from_slice(&flags.to_le_bytes());
    request.extend_from_slice(&(16u32 << 20).to_le_bytes());
    request.push(45); // utf8mb4_general_ci
    request.extend_from_slice(&[0; 23]);
    sock.write_all(&request).map_err(down)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(ChainOnly {
        roots: Arc::new(roots(u)?),
        algorithms: provider.signature_verification_algorithms,
        seen: Mutex::new(None),
    });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::invalid(format!("TLS setup failed: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    let name = ServerName::try_from(u.host.clone())
        .map_err(|e| Error::invalid(format!("MySQL at {t}: {e}")))?;
    let mut tls = rustls::ClientConnection::new(Arc::new(config), name)
        .map_err(|e| Error::invalid(format!("TLS setup failed: {e}")))?;
    while tls.is_handshaking() {
        if let Err(e) = tls.complete_io(&mut sock) {
            if let Some(rustls_err) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                return Err(Error::invalid(format!(
                    "MySQL at {t}: TLS failed with ssl-mode=verify_ca: {rustls_err}; check ssl-ca (the CA that signed the server's certificate)"
                )));
            }
            return Err(down(e));
        }
    }
    let der = verifier
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| Error::invalid(format!("MySQL at {t}: the server sent no certificate")))?;
    let der = CertificateDer::from(der.as_slice());
    let cert = webpki::EndEntityCert::try_from(&der)
        .map_err(|e| Error::invalid(format!("MySQL at {t}: the server's certificate: {e}")))?;
    Ok(cert.valid_dns_names().next().map(str::to_owned))
}

/// Whether a greeting (protocol 10) offers `CLIENT_SSL`.
fn offers_tls(greeting: &[u8]) -> bool {
    // protocol version, server version (NUL-terminated), connection id (4),
    // auth data (8), filler (1), then the low two bytes of the capabilities.
    let Some(nul) = greeting.iter().skip(1).position(|b| *b == 0) else {
        return false;
    };
    let at = 1 + nul + 1 + 4 + 8 + 1;
    match greeting.get(at..at + 2) {
        Some(c) => u32::from(u16::from_le_bytes([c[0], c[1]])) & CLIENT_SSL != 0,
        None => false,
    }
}

fn read_packet(sock: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut header = [0u8; 4];
    sock.read_exact(&mut header)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut payload = vec![0u8; len];
    sock.read_exact(&mut payload)?;
    Ok(payload)
}

/// `ssl-ca`'s certificates, else the system's.
fn roots(u: &MysqlUrl) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match &u.ssl_ca {
        Some((bytes, path)) => {
            for cert in CertificateDer::pem_slice_iter(bytes) {
                let cert = cert.map_err(|e| {
                    Error::invalid(format!("cannot read certificates from ssl-ca={path}: {e}"))
                })?;
                roots.add(cert).map_err(|e| {
                    Error::invalid(format!(
                        "ssl-ca={path} holds a certificate that is not a usable CA: {e}"
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::invalid(
                    "no system CA certificates found; give the CA file with ssl-ca=PATH, or install the ca-certificates package",
                ));
            }
        }
    }
    Ok(roots)
}

/// Checks the chain only, and keeps the certificate it checked.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
    seen: Mutex<Option<Vec<u8>>>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
