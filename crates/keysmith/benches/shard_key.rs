//! Shard key external strings: encodes and decodes per second, with and
//! without a secret.
//!
//! Run: `cargo bench -p keysmith --bench shard_key`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keysmith::shard_key::{IdType, KeySchema, ShardKey, ShardKeyCodec, ShardKeySecret};
use uuid::Uuid;

fn codecs() -> Vec<(&'static str, ShardKeyCodec)> {
    let secret = ShardKeySecret::new(*b"0123456789abcdef0123456789abcdef").expect("32 bytes");
    vec![
        ("signed", ShardKeyCodec::signed(&secret)),
        ("unsigned", ShardKeyCodec::unsigned()),
    ]
}

fn keys() -> Vec<(&'static str, ShardKey, KeySchema)> {
    let small = ShardKey::new('c', 3, 42i64).expect("valid key");
    let small_schema = KeySchema::new('c', IdType::I64).expect("valid schema");
    let compound = ShardKey::new(
        'p',
        1234,
        Uuid::from_u128(0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8),
    )
    .and_then(|k| k.with_child(7i64))
    .and_then(|k| k.with_child("line-0001"))
    .expect("valid key");
    let compound_schema = KeySchema::new('p', IdType::Uuid)
        .and_then(|s| s.with_child(IdType::I64))
        .and_then(|s| s.with_child(IdType::String))
        .expect("valid schema");
    vec![
        ("small", small, small_schema),
        ("compound", compound, compound_schema),
    ]
}

fn external_strings(c: &mut Criterion) {
    let mut group = c.benchmark_group("shard_key");
    group.throughput(Throughput::Elements(1));
    for (codec_name, codec) in codecs() {
        for (key_name, key, schema) in keys() {
            group.bench_function(format!("encode/{codec_name}/{key_name}"), |b| {
                b.iter(|| codec.encode(black_box(&key)))
            });
            let external = codec.encode(&key);
            group.bench_function(format!("decode/{codec_name}/{key_name}"), |b| {
                b.iter(|| {
                    codec
                        .decode(black_box(&external), &schema)
                        .expect("decodes")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, external_strings);
criterion_main!(benches);
