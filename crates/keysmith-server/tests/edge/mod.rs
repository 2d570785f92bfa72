//! What the tests of browsers, strangers and the audit trail share: the
//! store's every row (what "changes nothing" is checked against), a token
//! server with an audit log, and the audit log's lines.
#![allow(dead_code)]

use serde_json::Value;

use crate::common::TestServer;

/// A token long enough to pass for one.
pub const TOKEN: &str = "edge-token-0123456789abcdef";

pub use crate::common::store_state;

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
