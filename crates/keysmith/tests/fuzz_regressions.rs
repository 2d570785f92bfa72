//! Every input a fuzz run found a crash with, kept in
//! `fuzz/regressions/TARGET/` (`.ci/fuzz.sh` copies them there), replayed
//! through that target's check in the ordinary test run: once fixed, a
//! crash stays fixed.

#[path = "../../../fuzz/checks/mod.rs"]
mod checks;

/// A fuzz target's name and its check.
type Target = (&'static str, fn(&[u8]));

#[test]
fn fuzz_regressions_replay() {
    let targets: [Target; 6] = [
        ("row_name_parse", checks::row_name_parse),
        ("secret_keys_parse", checks::secret_keys_parse),
        ("shard_key_decode", checks::shard_key_decode),
        ("encoding_decode", checks::encoding_decode),
        ("template_parse", checks::template_parse),
        ("opaque_decode", checks::opaque_decode),
    ];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for entry in std::fs::read_dir(&dir).expect("fuzz/regressions") {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            name == "README.md" || targets.iter().any(|(t, _)| *t == name),
            "fuzz/regressions/{name} names no fuzz target"
        );
    }
    for (target, check) in targets {
        checks::replay(target, check);
    }
}

/// The replay runs the check on every kept input: one that fails its check
/// fails the test.
#[test]
#[should_panic(expected = "does not read back")]
fn a_failing_input_fails_the_replay() {
    fn broken(data: &[u8]) {
        assert_ne!(data, b"crash", "does not read back");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok"), b"fine").unwrap();
    std::fs::write(dir.path().join("crash-1"), b"crash").unwrap();
    checks::replay_dir(dir.path(), broken);
}
