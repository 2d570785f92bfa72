//! The user guide's HTTP API chapter is made from the server's own OpenAPI
//! document, never written by hand: `docs/book/src/http-api/openapi.json` is
//! the document a default server serves at `/openapi.json`, and
//! `docs/book/src/http-api/routes.md` is the route list made from it, with
//! the grant each route needs from `access::requirement`. This test fails when
//! either file differs from what the code makes; run it with
//! `KEYSMITH_BLESS=1` to write both files again.

use std::path::{Path, PathBuf};

use axum::http::Method;
use keysmith_server::access::{Requirement, Target, requirement};
use serde_json::Value;

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

fn book_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/book/src/http-api")
}

/// The document as the guide keeps it: pretty-printed, one trailing newline.
fn document_text(doc: &Value) -> String {
    let mut text = serde_json::to_string_pretty(doc).expect("the document is JSON");
    text.push('\n');
    text
}

fn grant(method: &str, path: &str) -> String {
    let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes()).expect("a method");
    match requirement(&method, path) {
        Requirement::Open => "none (probe)".to_string(),
        Requirement::Grant(need) if need.target == Target::Known => {
            "any known principal".to_string()
        }
        Requirement::Grant(need) => {
            let on = match need.target {
                Target::Path => {
                    let param = path
                        .split('/')
                        .find(|p| p.starts_with('{'))
                        .unwrap_or("{name}");
                    format!("`{param}`")
                }
                Target::LeaseGroup => {
                    "`{group}` (the server's ids group: `admin` on `*`)".to_string()
                }
                Target::Body => "the body's `name`".to_string(),
                Target::IdsGroup => "the ids group".to_string(),
                Target::Fixed(name) => format!("`{name}`"),
                Target::Listed => "some name; lists only those".to_string(),
                Target::Known => unreachable!("answered above"),
            };
            format!("`{}` on {}", need.action, on)
        }
        Requirement::NoSuchMethod => {
            panic!("{method} {path} is in the API document but has no grant in access::requirement")
        }
    }
}

/// The route list: one row per operation of the document, in the document's
/// order (paths sorted, methods in a fixed order).
fn routes_markdown(doc: &Value) -> String {
    let info = &doc["info"];
    let mut out = String::new();
    out.push_str("# Routes\n\n");
    out.push_str(
        "<!-- Made by crates/keysmith-server/tests/book_api.rs from the server's OpenAPI \
         document: do not edit; run `KEYSMITH_BLESS=1 cargo test -p keysmith-server --test \
         book_api` after changing a route. -->\n\n",
    );
    out.push_str(&format!(
        "Every route of keysmith {} (OpenAPI {}), with the grant it needs when the server \
         has an access file ([Security](../operations/security.md)). The whole document, with \
         every parameter, body and answer: [openapi.json](openapi.json), the same as `GET \
         /openapi.json` of a server with the default limits.\n\n",
        info["version"].as_str().unwrap_or("?"),
        doc["openapi"].as_str().unwrap_or("?"),
    ));
    out.push_str("| route | what it does | grant |\n| --- | --- | --- |\n");
    let paths = doc["paths"].as_object().expect("paths");
    let mut names: Vec<&String> = paths.keys().collect();
    names.sort();
    for path in names {
        for method in METHODS {
            let Some(op) = paths[path].get(method) else {
                continue;
            };
            let mut summary = op["summary"].as_str().unwrap_or("").replace('|', "\\|");
            if op["deprecated"] == true {
                summary =
                    format!("**Deprecated** (the token or ticket would be in the URL): {summary}");
            }
            out.push_str(&format!(
                "| `{} {}` | {} | {} |\n",
                method.to_ascii_uppercase(),
                path,
                summary,
                grant(method, path)
            ));
        }
    }
    out
}

#[test]
fn the_guides_route_list_and_api_document_are_the_servers() {
    let doc = keysmith_server::openapi::document();
    let files = [
        ("openapi.json", document_text(&doc)),
        ("routes.md", routes_markdown(&doc)),
    ];
    let dir = book_dir();
    if std::env::var_os("KEYSMITH_BLESS").is_some() {
        for (name, text) in &files {
            std::fs::write(dir.join(name), text).expect("write the guide's file");
        }
        return;
    }
    for (name, text) in &files {
        let path = dir.join(name);
        let kept =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            kept == *text,
            "{} is not what the server's OpenAPI document makes: run \
             `KEYSMITH_BLESS=1 cargo test -p keysmith-server --test book_api` and commit it",
            path.display()
        );
    }
}

#[test]
fn every_route_of_the_document_is_in_the_route_list() {
    let doc = keysmith_server::openapi::document();
    let list = routes_markdown(&doc);
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in METHODS {
            if item.get(method).is_some() {
                operations += 1;
                let row = format!("| `{} {}` |", method.to_ascii_uppercase(), path);
                assert!(list.contains(&row), "{row} missing from the route list");
            }
        }
    }
    let rows = list
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("| `"))
        .count();
    assert_eq!(rows, operations, "one row per operation");
    assert!(
        operations > 30,
        "the document has the API's routes: {operations}"
    );
}
