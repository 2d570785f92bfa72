//! keysmith-client against real keysmith servers (the service in process,
//! real sockets, TLS, SQLite files): TLS with client certificates and a
//! scoped token, failover, the leader's 421, typed errors, a blocking
//! client whose runtime is dropped, and no secret in any error.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;

use keysmith_client::{Client, Error, Token};
use keysmith_server::{Config, Server, TlsFiles};
use keysmith_testsupport::tls::Certs;
use sha2::Digest;
use tokio::sync::oneshot;

/// Team A's token: `team-a/*` and the ids group.
const TOKEN: &str = "team-a-secret-0123456789";
/// Team B's token: `team-b/*` only.
const OTHER: &str = "team-b-secret-0123456789";

struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    async fn stop(mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        let _ = self.task.await;
    }
}

/// A TLS server over `db` with an access file for the two teams; with
/// `client_ca`, it asks for client certificates.
async fn server(dir: &Path, certs: &Certs, client_ca: bool) -> Running {
    let hex = |t: &str| {
        sha2::Sha256::digest(t.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let access = dir.join("access.toml");
    std::fs::write(
        &access,
        format!(
            "[[principal]]\nname = \"team-a\"\ntoken_sha256 = \"{}\"\n\
             grants = [{{ names = \"team-a/*\", actions = [\"use\", \"read\", \"admin\"] }}, \
             {{ names = \"ids\", actions = [\"use\"] }}]\n\
             [[principal]]\nname = \"team-b\"\ntoken_sha256 = \"{}\"\n\
             grants = [{{ names = \"team-b/*\", actions = [\"use\", \"read\", \"admin\"] }}]\n",
            hex(TOKEN),
            hex(OTHER)
        ),
    )
    .unwrap();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        store_url: format!("sqlite://{}", dir.join("k.db").display()),
        access_file: Some(access),
        tls: Some(TlsFiles {
            cert: certs.server_cert.clone(),
            key: certs.server_key.clone(),
            client_ca: client_ca.then(|| certs.ca.clone()),
        }),
        lease_key: Some(
            keysmith::sequence::lease::LeaseKey::new(b"one key for every server of the store")
                .unwrap(),
        ),
        ..Config::default()
    };
    let server = Server::bind(config).await.unwrap();
    let addr = server.local_addr().unwrap();
    let (tx, rx) = oneshot::channel();
    let task = tokio::spawn(async move {
        server
            .run(async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Running {
        addr,
        stop: Some(tx),
        task,
    }
}

fn client(urls: &[String], certs: &Certs, token: &str) -> Client {
    let mut b = Client::builder()
        .token(Token::new(token).unwrap())
        .ca_file(&certs.ca);
    for u in urls {
        b = b.url(u);
    }
    b.build().unwrap()
}

fn certs() -> Certs {
    Certs::generate(&["127.0.0.1"], "team-a")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequences_over_mutual_tls_hand_out_each_value_once() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &certs, true).await;
    let c = Client::builder()
        .url(s.url())
        .token(Token::new(TOKEN).unwrap())
        .ca_file(&certs.ca)
        .client_cert(&certs.client_cert, &certs.client_key)
        .build()
        .unwrap();
    c.create_sequence(serde_json::json!({ "name": "team-a/orders", "start": 1 }))
        .await
        .unwrap();
    let (a, b) = (
        c.sequence("team-a/orders", Some(10)).unwrap(),
        c.sequence("team-a/orders", Some(7)).unwrap(),
    );
    let mut seen = HashSet::new();
    let mut last_a = 0;
    for _ in 0..40 {
        let v = a.next().await.unwrap();
        assert!(v > last_a, "{v} after {last_a}");
        last_a = v;
        assert!(seen.insert(v), "{v} twice");
        for v in b.next_n(3).await.unwrap() {
            assert!(seen.insert(v), "{v} twice");
        }
    }
    a.close().await.unwrap();
    b.close().await.unwrap();
    assert!(matches!(a.next().await, Err(Error::Closed(_))));
    // After the close, a new handle continues above every value seen.
    let again = c.sequence("team-a/orders", None).unwrap();
    let v = again.next().await.unwrap();
    assert!(!seen.contains(&v), "{v} twice");
    again.close().await.unwrap();

    // Without a client certificate the server refuses the handshake: a
    // setup error, not retried until the deadline.
    let bare = client(&[s.url()], &certs, TOKEN);
    let e = bare.show_sequence("team-a/orders").await.unwrap_err();
    assert!(matches!(e, Error::Setup(_)), "{e:?}");
    // The wrong CA: a setup error at once.
    let wrong = Client::builder()
        .url(s.url())
        .ca_file(&certs.other_ca)
        .client_cert(&certs.client_cert, &certs.client_key)
        .build()
        .unwrap();
    let e = wrong.show_sequence("team-a/orders").await.unwrap_err();
    assert!(matches!(e, Error::Setup(_)), "{e:?}");
    assert!(e.to_string().contains("ca_file"), "{e}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_errors_fail_at_construction_or_at_once() {
    let certs = certs();
    let missing = Client::builder()
        .url("https://127.0.0.1:1")
        .ca_file("/nonexistent/ca.pem")
        .build()
        .unwrap_err();
    assert!(
        matches!(missing, Error::Setup(ref m) if m.contains("ca_file")),
        "{missing:?}"
    );
    let not_pem = Client::builder()
        .url("https://127.0.0.1:1")
        .ca_file(&certs.server_key)
        .build()
        .unwrap_err();
    assert!(matches!(not_pem, Error::Setup(_)), "{not_pem:?}");
    for bad in ["ftp://x", "not a url", "https://user:pw@host:1"] {
        let e = Client::builder().url(bad).build().unwrap_err();
        assert!(matches!(e, Error::Setup(_)), "{bad}: {e:?}");
        assert!(!e.to_string().contains("pw"), "{e}");
    }
    assert!(Client::builder().build().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_errors_and_no_secret_in_any_message() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &certs, false).await;
    let c = client(&[s.url()], &certs, TOKEN);
    let mut errors: Vec<Error> = Vec::new();

    c.create_sequence(serde_json::json!({ "name": "team-a/x" }))
        .await
        .unwrap();
    let e = c
        .create_sequence(serde_json::json!({ "name": "team-a/x" }))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Conflict { code, .. } if code == "already_exists"),
        "{e:?}"
    );
    errors.push(e);
    let e = c.show_sequence("team-a/nope").await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    errors.push(e);
    let e = c.show_sequence("team-b/x").await.unwrap_err();
    assert!(matches!(e, Error::Forbidden(_)), "{e:?}");
    errors.push(e);
    let wrong = client(&[s.url()], &certs, "wrong-secret-0123456789");
    let e = wrong.show_sequence("team-a/x").await.unwrap_err();
    assert!(matches!(e, Error::Unauthorized(_)), "{e:?}");
    errors.push(e);
    // A lease taken, the name dropped: the hand-back is a 410.
    let lease = c.reserve("team-a/x", 10).await.unwrap();
    c.drop_sequence("team-a/x").await.unwrap();
    c.create_sequence(serde_json::json!({ "name": "team-a/x" }))
        .await
        .unwrap();
    let e = c
        .release("team-a/x", &lease.token, lease.start)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Dropped(_)), "{e:?}");
    errors.push(e);
    // A forged lease token: refused, and not repeated back.
    let forged = keysmith_client::LeaseToken::from_text("forged-lease-secret.abcdefABCDEF");
    let e = c.release("team-a/x", &forged, 1).await.unwrap_err();
    errors.push(e);
    // A worker lease: renewed with a token from another group.
    let w = c.lease_worker("team-a/w", None, Some(4)).await.unwrap();
    let e = c
        .renew_worker("team-a/v", &w.token, None)
        .await
        .unwrap_err();
    errors.push(e);
    // A gap-free ticket committed twice.
    c.create_sequence(serde_json::json!({ "name": "team-a/inv", "gapless": true }))
        .await
        .unwrap();
    let t = c.take_ticket("team-a/inv", None).await.unwrap();
    c.commit_ticket("team-a/inv", &t.ticket).await.unwrap();
    let e = c.release_ticket("team-a/inv", &t.ticket).await.unwrap_err();
    errors.push(e);
    // Ids need `use` on the group `ids`: team A has it, team B not.
    assert_eq!(c.next_ids(2, false).await.unwrap().len(), 2);
    let b = client(&[s.url()], &certs, OTHER);
    let e = b.next_ids(1, true).await.unwrap_err();
    assert!(matches!(e, Error::Forbidden(_)), "{e:?}");
    errors.push(e);

    // A name with `/` written as it is: the 404 says to write %2F.
    let e = c
        .request(
            keysmith_client::Method::POST,
            "/v1/sequences/team-a/x/next",
            None,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::NotFound { message, .. } if message.contains("/v1/sequences/team-a%2Fx/next")),
        "{e:?}"
    );

    let secrets = [
        TOKEN.to_owned(),
        OTHER.to_owned(),
        "wrong-secret".to_owned(),
        lease.token.expose().to_owned(),
        w.token.expose().to_owned(),
        "forged-lease-secret".to_owned(),
    ];
    for e in &errors {
        for text in [e.to_string(), format!("{e:?}")] {
            for secret in &secrets {
                assert!(!text.contains(secret.as_str()), "{text} holds a secret");
            }
        }
    }
    for text in [format!("{c:?}"), format!("{lease:?}"), format!("{w:?}")] {
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{text} holds a secret");
        }
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fails_over_to_the_next_server_of_the_store() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        server(dir.path(), &certs, false).await,
        server(dir.path(), &certs, false).await,
    );
    let c = client(&[a.url(), b.url()], &certs, TOKEN);
    c.create_sequence(serde_json::json!({ "name": "team-a/f" }))
        .await
        .unwrap();
    let seq = c.sequence("team-a/f", Some(5)).unwrap();
    let mut seen = HashSet::new();
    for _ in 0..12 {
        assert!(seen.insert(seq.next().await.unwrap()));
    }
    a.stop().await;
    // Server A is gone: the blocks come from B now.
    for _ in 0..12 {
        assert!(seen.insert(seq.next().await.unwrap()));
    }
    for v in c.next_values("team-a/f", 3).await.unwrap() {
        assert!(seen.insert(v.as_i64().unwrap()));
    }
    seq.close().await.unwrap();
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_s_421_is_followed_to_the_leader() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        server(dir.path(), &certs, false).await,
        server(dir.path(), &certs, false).await,
    );
    let to_a = client(&[a.url()], &certs, TOKEN);
    to_a.create_sequence(serde_json::json!({ "name": "team-a/led", "order": "leader" }))
        .await
        .unwrap();
    // A takes the lead with the first value.
    let first = to_a.next_values("team-a/led", 1).await.unwrap()[0]
        .as_i64()
        .unwrap();
    // A client that knows only B is sent to A and gets the next values.
    let to_b = client(&[b.url()], &certs, TOKEN);
    let got = to_b.next_values("team-a/led", 3).await.unwrap();
    let got: Vec<i64> = got.iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(got, vec![first + 1, first + 2, first + 3]);
    a.stop().await;
    b.stop().await;
}

#[test]
fn a_blocking_client_outlives_its_handles_and_its_runtime_drops_cleanly() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    // The server runs on a runtime of its own.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s = rt.block_on(server(dir.path(), &certs, false));
    let url = s.url();
    let c = keysmith_client::blocking::Client::new(
        Client::builder()
            .url(&url)
            .token(Token::new(TOKEN).unwrap())
            .ca_file(&certs.ca),
    )
    .unwrap();
    c.run(|c| c.create_sequence(serde_json::json!({ "name": "team-a/b" })))
        .unwrap();
    let seq = c.sequence("team-a/b", Some(4)).unwrap();
    let v1 = seq.next().unwrap();
    // The client (and its share of the runtime) goes; the handle keeps it.
    drop(c);
    let more = seq.next_n(9).unwrap();
    assert!(more.iter().all(|v| *v > v1));
    seq.close().unwrap();
    // The last handle dropped inside another runtime: no panic.
    rt.block_on(async move { drop(seq) });
    rt.block_on(s.stop());
}

/// Clones of one handle on many tasks take from shared blocks (the
/// library's lock-free block cache) in a residue class: every value once,
/// each in the class, each task's values increasing; the close hands the
/// block's unused rest back, so a new handle starts right after the last
/// value taken (nothing reserved after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_on_many_tasks_share_blocks_of_a_class_and_close_hands_back_the_rest() {
    let certs = certs();
    let dir = tempfile::tempdir().unwrap();
    let s = server(dir.path(), &certs, false).await;
    let c = client(&[s.url()], &certs, TOKEN);
    c.create_sequence(serde_json::json!({
        "name": "team-a/class", "start": 1, "increment": 3, "offset": 2
    }))
    .await
    .unwrap();
    let seq = c.sequence("team-a/class", Some(16)).unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let seq = seq.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..50 {
                    if (t + i) % 7 == 0 {
                        got.extend(seq.next_n(5).await.unwrap());
                    } else {
                        got.push(seq.next().await.unwrap());
                    }
                }
                got
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for t in tasks {
        let got = t.await.unwrap();
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "a task's values went down: {got:?}"
        );
        for v in got {
            assert_eq!(v.rem_euclid(3), 2, "{v} is not in the class");
            assert!(seen.insert(v), "{v} twice");
        }
    }
    let last = *seen.iter().max().unwrap();
    seq.close().await.unwrap();
    assert!(matches!(seq.next().await, Err(Error::Closed(_))));
    assert!(
        seq.try_next().is_none(),
        "a closed handle hands out nothing"
    );
    // (What went back depends on whether a block was reserved ahead: a
    // hand-back is taken only while nothing was reserved after it.)
    let again = c.sequence("team-a/class", Some(16)).unwrap();
    let first = again.next().await.unwrap();
    assert!(first > last, "{first} after {last}");
    // Five values of a block of 16 reach no prefetch mark: nothing is
    // reserved after the block, so its rest goes back whole.
    let mut five = vec![first];
    for _ in 0..4 {
        five.push(
            again
                .try_next()
                .expect("a value of the block, without a request"),
        );
    }
    assert_eq!(five, (0..5).map(|i| first + 3 * i).collect::<Vec<_>>());
    again.close().await.unwrap();
    let third = c.sequence("team-a/class", None).unwrap();
    assert_eq!(third.next().await.unwrap(), five[4] + 3);
    third.close().await.unwrap();
}
