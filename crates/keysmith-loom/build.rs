//! Sets `keysmith_loom` for this crate only: the block cache's source
//! (`keysmith-core/src/sequence/cache.rs`) then keeps one past epoch and
//! compiles its `loom_tests`.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(keysmith_loom)");
    println!("cargo::rustc-cfg=keysmith_loom");
}
