//! The server-certificate check of the backends that run their own rustls
//! verifier (PostgreSQL's connector, MySQL's `verify_ca` probe), written
//! once: what is checked ([`Check`]), the verifier ([`Verifier`]) and the
//! trust anchors it checks against ([`ca_roots`], [`system_roots`]).

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::{Error, Result};

/// What the client checks of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the connection is encrypted but the server is not known.
    Nothing,
    /// That it chains to a trusted CA.
    Chain,
    /// That it chains to a trusted CA and names the host.
    ChainAndName,
}

/// Checks the server's certificate as [`Check`] says, and its handshake
/// signatures always (so that even an unchecked connection talks to the
/// holder of the certificate's key). Keeps the last certificate whose
/// chain it checked ([`Verifier::seen`]).
#[derive(Debug)]
pub struct Verifier {
    check: Check,
    roots: Arc<RootCertStore>,
    algorithms: WebPkiSupportedAlgorithms,
    seen: Mutex<Option<Vec<u8>>>,
}

impl Verifier {
    /// A verifier doing `check` against `roots`, with the signature
    /// algorithms of `algorithms` (the crypto provider's).
    pub fn new(
        check: Check,
        roots: RootCertStore,
        algorithms: WebPkiSupportedAlgorithms,
    ) -> Verifier {
        Verifier {
            check,
            roots: Arc::new(roots),
            algorithms,
            seen: Mutex::new(None),
        }
    }

    /// The DER of the last certificate whose chain was checked and held
    /// (MySQL's `verify_ca` probe reads the name it holds).
    pub fn seen(&self) -> Option<Vec<u8>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        if self.check == Check::Nothing {
            return Ok(ServerCertVerified::assertion());
        }
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        if self.check == Check::ChainAndName {
            verify_server_name(&cert, server_name)?;
        }
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

/// `certs` (read from `param=shown`) as trust anchors.
///
/// # Errors
/// [`Error::InvalidArgument`] for a certificate that is not a usable CA.
pub fn ca_roots(
    certs: Vec<CertificateDer<'static>>,
    param: &str,
    shown: &str,
) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            Error::invalid(format!(
                "{param}={shown} holds a certificate that is not a usable CA: {e}; give the PEM file of the CA that signed the server's certificate"
            ))
        })?;
    }
    Ok(roots)
}

/// The CA certificates this system trusts.
///
/// # Errors
/// [`Error::InvalidArgument`] when there are none, saying to give them
/// with `param=PATH`.
pub fn system_roots(param: &str) -> Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(Error::invalid(format!(
            "no system CA certificates found{why}; give the CA file with {param}=PATH, or install the ca-certificates package"
        )));
    }
    Ok(roots)
}
