//! Shard key strings made and read with the server's secret.

mod common;

use common::TestServer;
use keysmith::shard_key::{IdType, KeySchema, ShardKey, ShardKeyCodec, ShardKeySecret};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const SECRET: &[u8; 32] = b"0123456789abcdef0123456789abcdef";

async fn with_secret(secret: &[u8]) -> TestServer {
    let secret = ShardKeySecret::new(secret.to_vec()).unwrap();
    TestServer::start_with(|c, _| c.shard_key_secret = Some(secret)).await
}

async fn encode(srv: &TestServer, body: Value) -> (StatusCode, Value) {
    srv.call(Method::POST, "/v1/shard-keys/encode", Some(body))
        .await
}

async fn decode(srv: &TestServer, body: Value) -> (StatusCode, Value) {
    srv.call(Method::POST, "/v1/shard-keys/decode", Some(body))
        .await
}

#[tokio::test]
async fn encode_and_decode_with_the_servers_secret() {
    let srv = with_secret(SECRET).await;
    let (st, v) = encode(
        &srv,
        json!({"origin": "c", "shard": 3, "record": 42, "children": [7]}),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["list"], json!(["c", 3, 42, 7]));
    let external = v["external"].as_str().unwrap().to_owned();

    // The library with the same secret reads it: it is the library's string.
    let codec = ShardKeyCodec::signed(&ShardKeySecret::new(SECRET.to_vec()).unwrap());
    let key = ShardKey::new('c', 3, 42i64)
        .unwrap()
        .with_child(7i64)
        .unwrap();
    assert_eq!(codec.decode_any(&external).unwrap(), key);

    let (st, d) = decode(&srv, json!({"external": external})).await;
    assert_eq!(st, StatusCode::OK, "{d}");
    assert_eq!(d["key"], v["key"]);
    assert_eq!(d["list"], json!(["c", 3, 42, 7]));
    assert_eq!(d["key"]["record"], json!({"type": "i64", "value": 42}));

    // Typed ids, three ways, all the same key.
    let a = encode(
        &srv,
        json!({"origin": "p", "shard": 1, "record": "u32:9", "children": ["string:a<b"]}),
    )
    .await
    .1;
    let b = encode(
        &srv,
        json!({"origin": "p", "shard": 1, "record": {"type": "u32", "value": 9},
               "children": [{"type": "string", "value": "a<b"}]}),
    )
    .await
    .1;
    assert_eq!(a["external"], b["external"]);
    let c = encode(&srv, json!({"origin": "p", "shard": 1, "record": a["key"]["record"], "children": a["key"]["children"]})).await.1;
    assert_eq!(a["external"], c["external"], "decode's form encodes back");
    assert_eq!(
        codec
            .decode(
                a["external"].as_str().unwrap(),
                &KeySchema::new('p', IdType::U32)
                    .unwrap()
                    .with_child(IdType::String)
                    .unwrap()
            )
            .unwrap()
            .to_json(),
        json!(["p", 1, 9, "a<b"])
    );

    // A schema in the request is checked.
    let ext = a["external"].clone();
    let (st, _) = decode(
        &srv,
        json!({"external": ext, "origin": "p", "record_type": "u32", "child_types": ["string"]}),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    for wrong in [
        json!({"external": ext, "origin": "q"}),
        json!({"external": ext, "origin": "p", "record_type": "i64", "child_types": ["string"]}),
        json!({"external": ext, "origin": "p", "record_type": "u32"}),
    ] {
        let (st, v) = decode(&srv, wrong.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{wrong}: {v}");
    }
}

/// Edited strings, strings signed with another secret and unsigned strings
/// are all rejected with a 400.
#[tokio::test]
async fn tampered_or_foreign_strings_are_rejected() {
    let srv = with_secret(SECRET).await;
    let other = with_secret(b"another-secret-of-enough-bytes!!").await;
    let (_, v) = encode(&srv, json!({"origin": "c", "shard": 3, "record": 42})).await;
    let external = v["external"].as_str().unwrap().to_owned();
    let (_, foreign) = encode(&other, json!({"origin": "c", "shard": 3, "record": 42})).await;
    let unsigned = ShardKeyCodec::unsigned().encode(&ShardKey::new('c', 3, 42i64).unwrap());
    let mut edited = external.clone().into_bytes();
    edited[4] = if edited[4] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    for bad in [
        edited.as_str(),
        foreign["external"].as_str().unwrap(),
        unsigned.as_str(),
        &external[..external.len() - 2],
        "",
        "!!!",
    ] {
        let (st, v) = decode(&srv, json!({"external": bad})).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad:?}: {v}");
        assert_eq!(v["error"]["code"], "invalid_argument", "{bad:?}: {v}");
    }
}

#[tokio::test]
async fn bad_key_parts_are_400() {
    let srv = with_secret(SECRET).await;
    for bad in [
        json!({"origin": "cc", "shard": 1, "record": 1}),
        json!({"origin": "", "shard": 1, "record": 1}),
        json!({"origin": "-", "shard": 1, "record": 1}),
        json!({"origin": "c", "shard": 70000, "record": 1}),
        json!({"origin": "c", "shard": -1, "record": 1}),
        json!({"origin": "c", "shard": 1, "record": 1.5}),
        json!({"origin": "c", "shard": 1, "record": "u8:300"}),
        json!({"origin": "c", "shard": 1, "record": "nonsense"}),
        json!({"origin": "c", "shard": 1, "record": {"type": "u8"}}),
        json!({"origin": "c", "shard": 1, "record": {"type": "u8", "value": 1, "x": 2}}),
        json!({"origin": "c", "shard": 1, "record": 1, "children": [1, 2, 3, 4]}),
        json!({"origin": "c", "shard": 1}),
        json!({"origin": "c", "shard": 1, "record": 1, "extra": true}),
    ] {
        let (st, v) = encode(&srv, bad.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {v}");
    }
    let (st, _) = decode(&srv, json!({"external": "x", "record_type": "u8"})).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
}

/// Without a secret the server makes no strings at all (unsigned ones could
/// be forged by anyone): 501, saying how to give it one.
#[tokio::test]
async fn no_secret_is_501() {
    let srv = TestServer::start().await;
    let (st, v) = encode(&srv, json!({"origin": "c", "shard": 3, "record": 42})).await;
    assert_eq!(st, StatusCode::NOT_IMPLEMENTED, "{v}");
    assert_eq!(v["error"]["code"], "no_secret");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("KEYSMITH_SHARD_KEY_SECRET")
    );
    let (st, _) = decode(&srv, json!({"external": "abc"})).await;
    assert_eq!(st, StatusCode::NOT_IMPLEMENTED);
}
