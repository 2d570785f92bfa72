//! The route table of the server's module documentation names every route
//! the router serves, and no route it does not.

use std::collections::BTreeSet;

/// The paths of `.route("PATH", ...)` calls in the source.
fn routed(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = src;
    while let Some(i) = rest.find(".route(") {
        rest = &rest[i + ".route(".len()..];
        let Some(open) = rest.find('"') else { break };
        // The path is the first argument: only whitespace before its quote.
        if rest[..open].trim().is_empty() {
            let path = &rest[open + 1..];
            if let Some(close) = path.find('"') {
                out.insert(path[..close].to_owned());
            }
        }
    }
    out
}

/// The paths the `//! |` table rows name (after an HTTP method).
fn documented(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines().filter(|l| l.starts_with("//! | `")) {
        for method in ["GET ", "POST ", "PATCH ", "DELETE "] {
            let mut rest = line;
            while let Some(i) = rest.find(method) {
                rest = &rest[i + method.len()..];
                let end = rest.find(['`', '?', ' ']).unwrap_or(rest.len());
                out.insert(rest[..end].to_owned());
            }
        }
    }
    out
}

#[test]
fn the_module_doc_names_every_route() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let routes = routed(&src);
    assert!(routes.len() > 20, "{routes:?}");
    let docs = documented(&src);
    let missing: Vec<_> = routes.difference(&docs).collect();
    let stale: Vec<_> = docs.difference(&routes).collect();
    assert!(
        missing.is_empty(),
        "routes the table does not name: {missing:?}"
    );
    assert!(stale.is_empty(), "table rows with no route: {stale:?}");
}

#[test]
fn the_readers_see_what_they_should() {
    let src = r#"
//! | `POST /v1/a` `{"x"}`, `GET /v1/a/{n}` | one |
//! | `GET /v1/b?count=N` | two |
fn r() { Router::new().route("/v1/a", post(x)).route(
    "/v1/a/{n}", get(y)).route("/v1/c", get(z)) }
"#;
    assert_eq!(
        routed(src),
        ["/v1/a", "/v1/a/{n}", "/v1/c"].map(String::from).into()
    );
    assert_eq!(
        documented(src),
        ["/v1/a", "/v1/a/{n}", "/v1/b"].map(String::from).into()
    );
}
