//! What a PostgreSQL store's own sessions hold, against a real server.

use keysmith_postgres::PostgresStore;

/// The session settings hold even when the role's defaults say otherwise
/// (`ALTER ROLE ... SET` is applied at login, before keysmith's `SET`).
#[tokio::test]
async fn sessions_commit_synchronously_whatever_the_role_defaults_are() {
    let Some(pg) = keysmith_testsupport::postgres::TempPostgres::shared() else {
        return;
    };
    let (admin, conn) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    admin
        .batch_execute(
            "CREATE ROLE lazy LOGIN;
             ALTER ROLE lazy SET synchronous_commit = off;
             ALTER ROLE lazy SET statement_timeout = 0;
             GRANT CREATE ON DATABASE postgres TO lazy;",
        )
        .await
        .unwrap();
    let url = pg.url().replace("keysmith@", "lazy@") + "?schema=lazy&timeout=7";
    let store = PostgresStore::open(&url).await.unwrap();
    let c = store.client().await.unwrap();
    let show = |what: &'static str| {
        let c = &c;
        async move {
            c.query_one(&format!("SHOW {what}"), &[])
                .await
                .unwrap()
                .get::<_, String>(0)
        }
    };
    assert_eq!(show("synchronous_commit").await, "on");
    assert_eq!(show("statement_timeout").await, "7s");
    assert_eq!(show("idle_in_transaction_session_timeout").await, "7s");
    assert_eq!(show("fsync").await, "on");
}
