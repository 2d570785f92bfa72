//! The cost per id of opaque values and readable encodings, beside a plain
//! cached `next()` in the same run: the keyed permutation alone, base32 and
//! base62 strings alone, opaque + base62, each applied to the value a cached
//! `next()` returns; and a whole opaque `next` on the memory store (one
//! store call per value, as every numbered sequence).
//!
//! `cargo bench -p keysmith --bench opaque`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keysmith::numbers::{
    self, Alphabet, Encoding, KeySecret, Numbering, Numbers, Opaque, OpaqueKey, OpaqueMap,
};
use keysmith::sequence::{self, BlockingSequence, Sequence};
use keysmith::store::{MAX_VALUE, SequenceSpec, Store, memory::MemoryStore};

/// A blocking handle that never leaves its cache (as benches/next.rs).
fn cached_handle() -> BlockingSequence {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let spec = SequenceSpec {
        block: 1 << 40,
        ..SequenceSpec::new("b")
    };
    rt.block_on(sequence::create(&*store, &spec)).unwrap();
    Sequence::builder()
        .store(store)
        .name("b")
        .build_blocking()
        .unwrap()
}

fn per_id(c: &mut Criterion) {
    let seq = cached_handle();
    let map = OpaqueMap::new(&Opaque {
        value_max: MAX_VALUE,
        keys: vec![OpaqueKey::with_secret(
            0,
            1,
            KeySecret::from_bytes(*b"0123456789abcdef"),
        )],
    })
    .unwrap();
    let b32 = Encoding::new(Alphabet::Base32, Some("ord")).unwrap();
    let b62 = Encoding::new(Alphabet::Base62, Some("ord")).unwrap();
    let mut g = c.benchmark_group("opaque_per_id");
    g.throughput(Throughput::Elements(1));
    g.bench_function("plain_next_cached", |b| {
        b.iter(|| black_box(seq.next().unwrap()))
    });
    g.bench_function("opaque", |b| {
        b.iter(|| black_box(map.value_of(seq.next().unwrap()).unwrap()))
    });
    g.bench_function("base32", |b| {
        b.iter(|| black_box(b32.encode(seq.next().unwrap()).unwrap()))
    });
    g.bench_function("base62", |b| {
        b.iter(|| black_box(b62.encode(seq.next().unwrap()).unwrap()))
    });
    g.bench_function("opaque_base62", |b| {
        b.iter(|| {
            let v = map.value_of(seq.next().unwrap()).unwrap();
            black_box(b62.encode(v).unwrap())
        })
    });
    g.finish();
}

fn whole_next(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let n = Numbering {
        opaque: Some(Opaque::default()),
        encoding: Some(Encoding::new(Alphabet::Base62, Some("ord")).unwrap()),
        ..Numbering::default()
    };
    rt.block_on(numbers::create(&*store, &SequenceSpec::new("o"), &n))
        .unwrap();
    let h = rt.block_on(Numbers::open(store, "o")).unwrap();
    let mut g = c.benchmark_group("opaque_next_memory_store");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("opaque_base62_next", |b| {
        b.iter(|| black_box(rt.block_on(h.next_n(1)).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, per_id, whole_next);
criterion_main!(benches);
