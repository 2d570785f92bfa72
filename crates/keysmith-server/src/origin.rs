//! Browsers cannot act for anyone: the `Origin`, `Sec-Fetch-*` and `Host`
//! checks, before any credential is looked at.
//!
//! A web page can make a visitor's browser send requests to any address,
//! the visitor's own loopback server included, with whatever credentials
//! the browser holds for it. Browsers mark such requests: every cross-site
//! request that is not a plain navigation carries `Origin` (a POST always
//! does, also the `text/plain` form posts that need no CORS preflight), and
//! current browsers add `Sec-Fetch-Site`. curl, the CLI and the clients send
//! neither. So, on every route:
//!
//! - a request whose `Origin` is listed in [`crate::Config::allow_origins`]
//!   (`--allow-origin`) goes on, and its answer carries
//!   `Access-Control-Allow-Origin` for that origin (a CORS preflight
//!   `OPTIONS` from it is answered here with 204);
//! - a navigation (`Sec-Fetch-Mode: navigate`) and a same-origin read
//!   (`Sec-Fetch-Site: same-origin` or `none`) by `GET` or `HEAD` go on:
//!   opening the status page and the page's own `fetch` of `/v1/status`
//!   need nothing (a same-origin `POST` is refused like any other: the page
//!   makes none);
//! - any other request with an `Origin`, or with `Sec-Fetch-Site:
//!   cross-site` or `same-site`, is refused with a 403 (`cross_origin`) that
//!   names the origin and says to add it to `--allow-origin`; nothing runs;
//! - without authentication (no token, no access file), the `Host` must be
//!   a loopback name or address (`localhost`, `127.0.0.0/8`, `[::1]`, any
//!   port), else a 403 (`forbidden_host`): a DNS-rebinding page (its own
//!   name pointed at 127.0.0.1) sends its own name. A server started with
//!   `--insecure-no-auth` also takes any IP address as `Host` (a page cannot
//!   be served from the server's own address, so that is not rebinding).
//!   A request without `Host` (HTTP/1.0; no browser) goes on.
//!
//! Refusals are audited as unknown callers' refusals.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::audit;
use crate::error::ApiError;

/// An origin as browsers send it: `scheme://host[:port]`, lower case.
///
/// # Errors
/// A message saying what is wrong with `origin`.
pub fn normalize(origin: &str) -> Result<String, String> {
    let o = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let Some((scheme, rest)) = o.split_once("://") else {
        return Err(format!(
            "the origin {origin:?} has no scheme; write it as a browser sends it, e.g. https://app.example.com"
        ));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(format!(
            "the origin {origin:?} must start with http:// or https://"
        ));
    }
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', '*', ' ']) {
        return Err(format!(
            "the origin {origin:?} must be scheme://host[:port], with no path, user or wildcard, e.g. https://app.example.com:8443"
        ));
    }
    Ok(o)
}

/// Whether `host` (a `Host` header value) names this machine's loopback:
/// `localhost`, an address of `127.0.0.0/8`, or `[::1]`, with any port.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    host_ip(host).is_some_and(|ip| ip.is_loopback())
        || strip_port(host).eq_ignore_ascii_case("localhost")
}

/// The address a `Host` value is, if it is an IP literal.
fn host_ip(host: &str) -> Option<IpAddr> {
    let h = strip_port(host);
    let h = h
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(h);
    h.parse().ok()
}

/// `host` without its `:port`, keeping an IPv6 literal's brackets.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return match host.find(']') {
            Some(i) => &host[..=i],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The decision for one request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Goes on; with an allowed origin to echo in the answer.
    Pass(Option<HeaderValue>),
    /// A CORS preflight of an allowed origin: answered here.
    Preflight(HeaderValue),
    /// A 403: the code and why.
    Refuse(&'static str, String),
}

/// What the browser headers of a request allow.
pub(crate) fn judge(
    method: &Method,
    headers: &HeaderMap,
    authority: Option<&str>,
    allowed: &[String],
    host_check: Option<bool>,
) -> Verdict {
    let host = headers
        .get(header::HOST)
        .cloned()
        .or_else(|| authority.and_then(|a| HeaderValue::from_str(a).ok()));
    if let Some(insecure) = host_check
        && let Some(host) = host
    {
        let ok = host
            .to_str()
            .is_ok_and(|h| is_loopback_host(h) || (insecure && host_ip(h).is_some()));
        if !ok {
            let shown = String::from_utf8_lossy(host.as_bytes());
            let shown: String = shown.chars().take(100).collect();
            return Verdict::Refuse(
                "forbidden_host",
                format!(
                    "this server has no token, so it answers only requests addressed to a loopback Host \
                     (localhost, 127.0.0.1, [::1]), not Host {shown:?} (a web page using DNS rebinding \
                     sends its own name); connect to 127.0.0.1, or give the server a token (--token-file \
                     or --access-file)"
                ),
            );
        }
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    let origin = headers.get(header::ORIGIN);
    if let Some(o) = origin
        && let Ok(text) = o.to_str()
        && allowed.iter().any(|a| a.eq_ignore_ascii_case(text))
    {
        if method == Method::OPTIONS && headers.contains_key("access-control-request-method") {
            return Verdict::Preflight(o.clone());
        }
        return Verdict::Pass(Some(o.clone()));
    }
    let reads = method == Method::GET || method == Method::HEAD;
    let navigates = headers
        .get("sec-fetch-mode")
        .is_some_and(|m| m.as_bytes().eq_ignore_ascii_case(b"navigate"));
    if reads && (navigates || matches!(site.as_deref(), Some("same-origin" | "none"))) {
        return Verdict::Pass(None);
    }
    let cross_site = matches!(site.as_deref(), Some("cross-site" | "same-site"));
    if origin.is_none() && !cross_site {
        return Verdict::Pass(None);
    }
    let who = match origin {
        Some(o) => {
            let s = String::from_utf8_lossy(o.as_bytes());
            let s: String = s.chars().take(200).collect();
            format!("from origin {s:?}")
        }
        None => "from another site (Sec-Fetch-Site: cross-site)".to_owned(),
    };
    Verdict::Refuse(
        "cross_origin",
        format!(
            "a browser sent this request {who}: a web page cannot act through this server; \
             to let that origin call it, start the server with --allow-origin ORIGIN \
             (scheme://host[:port], repeatable)"
        ),
    )
}

/// The middleware: [`judge`], then the request, or a 403 (audited).
pub(crate) async fn screen(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let s = state.shared();
    let host_check = s.access.load().file.is_none().then_some(s.insecure_no_auth);
    let authority = req.uri().authority().map(|a| a.as_str().to_owned());
    match judge(
        req.method(),
        req.headers(),
        authority.as_deref(),
        &s.allow_origins,
        host_check,
    ) {
        Verdict::Pass(None) => next.run(req).await,
        Verdict::Pass(Some(origin)) => {
            let mut res = next.run(req).await;
            let h = res.headers_mut();
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            h.append(header::VARY, HeaderValue::from_static("Origin"));
            res
        }
        Verdict::Preflight(origin) => {
            let mut res = StatusCode::NO_CONTENT.into_response();
            let h = res.headers_mut();
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("authorization, content-type, x-request-id"),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            h.append(header::VARY, HeaderValue::from_static("Origin"));
            res
        }
        Verdict::Refuse(code, why) => {
            let mut line = audit::Line::new(audit::Event::Refused);
            line.status = Some(403);
            line.reason = Some(why.clone());
            s.audit
                .write(line.of_request(req.method(), req.extensions()));
            ApiError::new(StatusCode::FORBIDDEN, code, why).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "LOCALHOST:7878",
            "127.0.0.1",
            "127.3.4.5:80",
            "[::1]",
            "[::1]:7878",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:7878",
            "localhost.attacker.example",
            "10.0.0.1:7878",
            "[::2]:1",
            "127.0.0.1.nip.io",
            "",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn origins_are_normalized_or_refused() {
        assert_eq!(
            normalize("HTTPS://App.Example.com/").unwrap(),
            "https://app.example.com"
        );
        for bad in [
            "app.example.com",
            "ftp://x",
            "https://x/path",
            "*",
            "https://*.x",
        ] {
            assert!(normalize(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn verdicts() {
        let allowed = vec!["https://app.example".to_owned()];
        let post = Method::POST;
        // curl: nothing.
        assert_eq!(
            judge(&post, &headers(&[]), None, &allowed, None),
            Verdict::Pass(None)
        );
        // A cross-site form post.
        let form = headers(&[("origin", "http://attacker.example")]);
        assert!(matches!(
            judge(&post, &form, None, &allowed, None),
            Verdict::Refuse("cross_origin", _)
        ));
        // Same-origin POST is refused too; GET of the page is fine.
        let same = headers(&[
            ("origin", "http://127.0.0.1:7878"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert!(matches!(
            judge(&post, &same, None, &allowed, None),
            Verdict::Refuse(..)
        ));
        assert_eq!(
            judge(&Method::GET, &same, None, &allowed, None),
            Verdict::Pass(None)
        );
        let nav = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ]);
        assert_eq!(
            judge(&Method::GET, &nav, None, &allowed, None),
            Verdict::Pass(None)
        );
        let img = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ]);
        assert!(matches!(
            judge(&Method::GET, &img, None, &allowed, None),
            Verdict::Refuse(..)
        ));
        // An allowed origin.
        let app = headers(&[
            ("origin", "https://app.example"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(matches!(
            judge(&post, &app, None, &allowed, None),
            Verdict::Pass(Some(_))
        ));
        // Host, without auth.
        let rebind = headers(&[("host", "attacker.example:7878")]);
        assert!(matches!(
            judge(&Method::GET, &rebind, None, &allowed, Some(false)),
            Verdict::Refuse("forbidden_host", _)
        ));
        assert_eq!(
            judge(&Method::GET, &rebind, None, &allowed, None),
            Verdict::Pass(None)
        );
        let ip = headers(&[("host", "10.1.2.3:7878")]);
        assert!(matches!(
            judge(&Method::GET, &ip, None, &allowed, Some(false)),
            Verdict::Refuse(..)
        ));
        assert_eq!(
            judge(&Method::GET, &ip, None, &allowed, Some(true)),
            Verdict::Pass(None)
        );
    }
}
