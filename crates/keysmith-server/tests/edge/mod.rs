//! What the tests of browsers, strangers and the audit trail share: the
//! store's every row (what "changes nothing" is checked against), a token
//! server with an audit log, and the audit log's lines.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common::TestServer;

/// A token long enough to pass for one.
pub const TOKEN: &str = "edge-token-0123456789abcdef";

/// Every row of every table of the store, as text.
pub fn store_state(db: &Path) -> BTreeMap<String, Vec<String>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = BTreeMap::new();
    for t in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let cols = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |r| {
                let mut line = Vec::new();
                for i in 0..cols {
                    let v: rusqlite::types::Value = r.get(i)?;
                    line.push(format!("{v:?}"));
                }
                Ok(line.join("|"))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        rows.sort();
        out.insert(t, rows);
    }
    out
}

/// A server with [`TOKEN`] and an audit log beside its database.
pub async fn token_server(tweak: impl FnOnce(&mut keysmith_server::Config)) -> TestServer {
    TestServer::start_with(|c, db| {
        c.token = Some(keysmith_server::Token::new(TOKEN).unwrap());
        c.audit_log = Some(db.parent().unwrap().join("audit.log"));
        tweak(c);
    })
    .await
}

/// The lines of a server's audit log (beside its database), raw.
pub fn audit_text(srv: &TestServer) -> String {
    std::fs::read_to_string(srv.db_path().parent().unwrap().join("audit.log")).unwrap_or_default()
}

/// The lines of a server's audit log, parsed.
pub fn audit_lines(srv: &TestServer) -> Vec<Value> {
    audit_text(srv)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
