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
use std::sync::Arc;

use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};

use super::MysqlUrl;
use keysmith_core::driver::credentials::pem_certificates;
use keysmith_core::driver::tls::{Check, Verifier, ca_roots, system_roots};
use keysmith_core::{Error, Result};

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
    let roots = match &u.ssl_ca {
        Some((bytes, path)) => ca_roots(pem_certificates(bytes, "ssl-ca", path)?, "ssl-ca", path)?,
        None => system_roots("ssl-ca")?,
    };
    let verifier = Arc::new(Verifier::new(
        Check::Chain,
        roots,
        provider.signature_verification_algorithms,
    ));
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
        .seen()
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
