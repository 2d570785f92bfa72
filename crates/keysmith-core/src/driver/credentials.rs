//! Files and URL text every networked backend reads the same way: PEM
//! certificates and keys, password files, `%XX` escapes.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::{Error, Result};

/// The certificates of a PEM file, at least one.
pub fn certificates(path: &Path, param: &str) -> Result<Vec<CertificateDer<'static>>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        Error::invalid(format!(
            "cannot read certificates (PEM) from {param}={shown}: {e}; check the path and that this user may read it"
        ))
    })?;
    pem_certificates(&bytes, param, &shown)
}

/// The certificates of PEM text read from `param=shown`, at least one.
pub fn pem_certificates(
    bytes: &[u8],
    param: &str,
    shown: &str,
) -> Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bytes)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| {
            Error::invalid(format!(
                "cannot read certificates (PEM) from {param}={shown}: {e}; give a PEM file of certificates"
            ))
        })?;
    if certs.is_empty() {
        return Err(Error::invalid(format!(
            "{param}={shown} holds no certificate; give a PEM file with -----BEGIN CERTIFICATE----- blocks"
        )));
    }
    Ok(certs)
}

/// The private key of a PEM file.
pub fn private_key(path: &Path, param: &str) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        Error::invalid(format!(
            "cannot read a private key (PEM) from {param}={}: {e}; give the key file of the certificate, readable by this user",
            path.display()
        ))
    })
}

/// The password a file holds: its text without one trailing newline.
pub fn read_password_file(path: &Path, param: &str) -> Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::invalid(format!(
            "cannot read {param}={}: {e}; give a file that holds the password alone, readable by this user",
            path.display()
        ))
    })?;
    let password = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(Error::invalid(format!(
            "{param}={} is empty; write the password into it",
            path.display()
        )));
    }
    Ok(password.to_owned())
}

/// `%XX` escapes decoded (a path may need them for `&`, `#` or `%`).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
