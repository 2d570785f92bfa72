//! Why a connection to etcd failed, read from the driver's error before it
//! becomes text: the TLS error (`rustls`), the I/O error kind, the HTTP/2
//! and hyper errors and the gRPC status code in the error and its source
//! chain. [`super::Hints::explain`] turns a [`Cause`] into advice.

use std::error::Error as StdError;
use std::io::ErrorKind;

use rustls::{AlertDescription, CertificateError};
use tonic::Code;

/// etcd's status message for a wrong user name or password (code
/// `InvalidArgument`, shared with other refusals: the message tells them
/// apart).
const ETCD_AUTH_FAILED: &str = "etcdserver: authentication failed, invalid user ID or password";
/// etcd's status message for a request without a user when auth is on
/// (code `InvalidArgument`).
const ETCD_USER_EMPTY: &str = "etcdserver: user name is empty";

/// Why a request or a connection failed, as far as it is a TLS, login or
/// connection problem the user can fix. Ordered from the most specific: of
/// several causes in one error chain the smallest decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cause {
    /// etcd's certificate is not signed by a CA the client trusts
    /// (`UnknownIssuer`, `BadSignature`).
    UntrustedServer,
    /// etcd's certificate does not name the host connected to.
    WrongHostName,
    /// etcd asked for a client certificate (alert `certificate_required`).
    ClientCertRequired,
    /// etcd refused the client certificate, or got none where it needs one
    /// (alerts `bad_certificate`, `unknown_ca`).
    ClientCertRefused,
    /// etcd refused the user name or password.
    BadLogin,
    /// etcd has auth enabled and the request named no user.
    UserEmpty,
    /// etcd refused the request for want of a permission.
    PermissionDenied,
    /// The peer closed or reset the connection (reset, broken pipe, hyper's
    /// closed or incomplete message).
    Closed,
    /// The request was cancelled under the client (gRPC `Cancelled`, hyper's
    /// canceled): what a connection closed during the handshake looks like.
    Cancelled,
    /// An HTTP/2 protocol error: what a plain client reads from a TLS server.
    Http2,
}

/// The cause of `e`, if any part of it is one (see [`Cause`]).
pub(crate) fn classify(e: &etcd_client::Error) -> Option<Cause> {
    let mut found = Vec::new();
    match e {
        etcd_client::Error::GRpcStatus(s) => visit(s, &mut found, 0),
        etcd_client::Error::TransportError(t) => visit(t, &mut found, 0),
        etcd_client::Error::IoError(io) => visit(io, &mut found, 0),
        _ => {}
    }
    found.into_iter().min()
}

/// How deep a chain is followed: error chains are short; this only stops a
/// chain that points at itself.
const MAX_DEPTH: usize = 32;

fn visit(e: &(dyn StdError + 'static), found: &mut Vec<Cause>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        found.extend(tls_cause(tls));
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        if matches!(
            io.kind(),
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ) {
            found.push(Cause::Closed);
        }
        // An io::Error's source() skips the error it wraps (a rustls error
        // inside an InvalidData one): look at that one itself.
        if let Some(inner) = io.get_ref() {
            if inner.downcast_ref::<rustls::Error>().is_none() {
                found.extend(tls_cause_from_text(&inner.to_string()));
            }
            visit(inner, found, depth + 1);
        }
    }
    if let Some(h2) = e.downcast_ref::<h2::Error>() {
        match h2.get_io() {
            Some(io) => visit(io, found, depth + 1),
            None => found.push(Cause::Http2),
        }
    }
    if let Some(h) = e.downcast_ref::<hyper::Error>() {
        if h.is_canceled() {
            found.push(Cause::Cancelled);
        } else if h.is_closed() || h.is_incomplete_message() {
            found.push(Cause::Closed);
        }
    }
    if let Some(status) = e.downcast_ref::<tonic::Status>() {
        found.extend(status_cause(status));
    }
    if let Some(next) = e.source() {
        visit(next, found, depth + 1);
    }
}

fn tls_cause(e: &rustls::Error) -> Option<Cause> {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                Some(Cause::UntrustedServer)
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                Some(Cause::WrongHostName)
            }
            _ => None,
        },
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            Some(Cause::ClientCertRequired)
        }
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate | AlertDescription::UnknownCA,
        ) => Some(Cause::ClientCertRefused),
        _ => None,
    }
}

/// The cause of a rustls error that reaches keysmith only as its message
/// (some paths of hyper and tokio-rustls make an `io::Error` from the
/// text, depending on when the alert arrives): the text is compared with
/// what rustls itself prints for each error [`tls_cause`] knows.
fn tls_cause_from_text(text: &str) -> Option<Cause> {
    [
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired),
        rustls::Error::AlertReceived(AlertDescription::BadCertificate),
        rustls::Error::AlertReceived(AlertDescription::UnknownCA),
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        rustls::Error::InvalidCertificate(CertificateError::BadSignature),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName),
    ]
    .iter()
    .find(|e| e.to_string() == text)
    .and_then(tls_cause)
}

fn status_cause(s: &tonic::Status) -> Option<Cause> {
    match s.code() {
        Code::InvalidArgument if s.message() == ETCD_AUTH_FAILED => Some(Cause::BadLogin),
        Code::InvalidArgument if s.message() == ETCD_USER_EMPTY => Some(Cause::UserEmpty),
        Code::PermissionDenied => Some(Cause::PermissionDenied),
        Code::Cancelled => Some(Cause::Cancelled),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The downcasts find `h2`, `hyper`, `rustls` and `tonic` errors only
    /// while this crate links the very versions etcd-client builds on: a
    /// second version of any of them in the workspace's lock would switch
    /// those hints off without a compile error.
    #[test]
    fn the_error_types_matched_are_the_ones_etcd_client_uses() {
        let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
        let Ok(lock) = std::fs::read_to_string(lock) else {
            return; // built outside the workspace (a packaged crate)
        };
        for krate in ["h2", "hyper", "rustls", "tonic"] {
            let versions = lock.matches(&format!("\nname = \"{krate}\"\n")).count();
            assert_eq!(
                versions, 1,
                "{versions} versions of {krate} in Cargo.lock: keysmith-etcd must match the one etcd-client uses"
            );
        }
    }

    #[test]
    fn a_rustls_error_inside_io_inside_a_status_is_found() {
        let io = std::io::Error::new(
            ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let mut status = tonic::Status::unknown("transport error");
        status.set_source(std::sync::Arc::new(io));
        assert_eq!(
            classify(&etcd_client::Error::GRpcStatus(status)),
            Some(Cause::UntrustedServer)
        );
    }

    /// Seen in CI: the alert came as an `io::Error` holding rustls's text,
    /// not the rustls error.
    #[test]
    fn a_rustls_alert_that_came_as_text_is_found() {
        let text = rustls::Error::AlertReceived(AlertDescription::BadCertificate).to_string();
        assert_eq!(text, "received fatal alert: BadCertificate");
        let io = std::io::Error::new(ErrorKind::InvalidData, text);
        let mut status = tonic::Status::unknown("transport error");
        status.set_source(std::sync::Arc::new(io));
        assert_eq!(
            classify(&etcd_client::Error::GRpcStatus(status)),
            Some(Cause::ClientCertRefused)
        );
        let other = std::io::Error::new(ErrorKind::InvalidData, "received fatal alert: Nonsense");
        let mut status = tonic::Status::unknown("transport error");
        status.set_source(std::sync::Arc::new(other));
        assert_eq!(classify(&etcd_client::Error::GRpcStatus(status)), None);
    }

    #[test]
    fn etcd_auth_refusals_are_told_apart_by_their_exact_message() {
        let of = |code, msg: &str| {
            classify(&etcd_client::Error::GRpcStatus(tonic::Status::new(
                code, msg,
            )))
        };
        assert_eq!(
            of(Code::InvalidArgument, ETCD_AUTH_FAILED),
            Some(Cause::BadLogin)
        );
        assert_eq!(
            of(Code::InvalidArgument, ETCD_USER_EMPTY),
            Some(Cause::UserEmpty)
        );
        assert_eq!(
            of(Code::InvalidArgument, "etcdserver: key is not provided"),
            None
        );
        assert_eq!(
            of(Code::PermissionDenied, "etcdserver: permission denied"),
            Some(Cause::PermissionDenied)
        );
        assert_eq!(
            of(Code::Unavailable, ETCD_AUTH_FAILED),
            None,
            "the code decides first"
        );
    }

    #[test]
    fn the_most_specific_cause_wins() {
        // A reset connection whose chain also holds the TLS alert.
        let io = std::io::Error::new(
            ErrorKind::ConnectionReset,
            rustls::Error::AlertReceived(AlertDescription::CertificateRequired),
        );
        assert_eq!(
            classify(&etcd_client::Error::IoError(io)),
            Some(Cause::ClientCertRequired)
        );
        let reset = std::io::Error::from(ErrorKind::BrokenPipe);
        assert_eq!(
            classify(&etcd_client::Error::IoError(reset)),
            Some(Cause::Closed)
        );
    }
}
