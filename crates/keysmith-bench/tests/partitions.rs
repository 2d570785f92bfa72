//! `keysmith-bench partitions` (once `keysmith verify --partitions`): the
//! run for real where the machine allows it, and a plain refusal where it
//! does not.
//!
//! The servers of the scenario are the product binary, `keysmith`, found
//! beside `keysmith-bench` (as `cargo test --workspace` or `cargo build -p
//! keysmith-cli -p keysmith-bench` leaves it) or named by `KEYSMITH_BIN`.
//!
//! `cargo build -p keysmith-cli && cargo test -p keysmith-bench --test partitions`

use std::path::PathBuf;
use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_keysmith-bench");

/// The `keysmith` binary the scenario will run, if there is one.
fn keysmith_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEYSMITH_BIN") {
        return Some(PathBuf::from(p));
    }
    let beside = PathBuf::from(BENCH).parent()?.join("keysmith");
    beside.is_file().then_some(beside)
}

/// The scenario for real: a throwaway PostgreSQL and three servers in
/// network namespaces, PostgreSQL cut off from one for 5 s. It passes, and
/// its report says what it saw. Skips (with why) where namespaces,
/// PostgreSQL or the keysmith binary are not available, unless
/// `KEYSMITH_REQUIRE_BACKENDS=1`.
#[test]
fn partitions_passes_with_no_duplicates() {
    if let Some(why) = keysmith_testsupport::netns::unavailable()
        .or_else(keysmith_testsupport::netns::postgres_unavailable)
    {
        keysmith_testsupport::skip_or_fail("partition", &why);
        return;
    }
    if keysmith_binary().is_none() {
        keysmith_testsupport::skip_or_fail(
            "partition",
            "no keysmith binary beside keysmith-bench and no KEYSMITH_BIN \
             (cargo build -p keysmith-cli first)",
        );
        return;
    }
    let out = Command::new(BENCH)
        .args(["partitions", "--seconds", "5"])
        .env_remove("KEYSMITH_STORE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "partitions failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().expect("a verdict line");
    assert_eq!(last, "duplicates 0 order violations 0 ok", "{stdout}");
    let s0 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("s0: "))
        .unwrap_or_else(|| panic!("no line about s0: {stdout}"));
    assert!(s0.contains("after the cut"), "{stdout}");
    assert!(s0.contains("s after the heal"), "{stdout}");
    println!("{stdout}");
}

/// Runs `cmd partitions --seconds 5` (with `extra` after it) and expects the
/// refusal naming `reason`: exit 2, nothing on stdout, nothing started.
fn not_here(cmd: &mut Command, extra: &[&str], reason: &str) {
    let out = cmd
        .args(["partitions", "--seconds", "5"])
        .args(extra)
        .env_remove("KEYSMITH_STORE")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("keysmith-bench partitions cannot run on this machine"),
        "{err}"
    );
    assert!(err.contains(reason), "{err}");
    assert!(err.contains("It needs Linux, root"), "{err}");
    assert!(err.contains("Nothing was started"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Where the machine does not allow it, `partitions` says what is missing
/// and what would make it work, starts nothing, and exits 2: switched off
/// with `KEYSMITH_NETNS=off`, without a keysmith binary, and run as a user
/// other than root (as is where the tests do not run as root; as `nobody`
/// through `setpriv` where they do).
#[test]
fn partitions_says_plainly_when_the_machine_does_not_allow_it() {
    not_here(
        Command::new(BENCH).env("KEYSMITH_NETNS", "off"),
        &[],
        "KEYSMITH_NETNS=off",
    );
    let nowhere = std::env::temp_dir().join("no-such-dir-keysmith-bench/keysmith");
    not_here(
        &mut Command::new(BENCH),
        &["--keysmith", nowhere.to_str().unwrap()],
        &format!("cannot run the keysmith binary {}", nowhere.display()),
    );
    // A binary that runs but is not keysmith.
    not_here(
        &mut Command::new(BENCH),
        &["--keysmith", BENCH],
        "is not a keysmith binary",
    );
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        not_here(&mut Command::new(BENCH), &[], "not root");
        return;
    }
    let mut as_nobody = Command::new("setpriv");
    as_nobody
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(BENCH)
        .current_dir(std::env::temp_dir());
    // `nobody` must be able to run the binary (a target directory under a
    // private home may not let it).
    let runs = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(BENCH)
        .arg("--version")
        .output();
    match runs {
        Ok(o) if o.status.success() => not_here(&mut as_nobody, &[], "not root"),
        Ok(o) => eprintln!(
            "SKIP the not-root half: nobody cannot run {BENCH}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("SKIP the not-root half: no setpriv: {e}"),
    }
}

#[test]
fn bad_seconds_are_usage_errors() {
    for bad in ["0", "-1", "soon", "86401"] {
        let out = Command::new(BENCH)
            .args(["partitions", "--seconds", bad])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--seconds"), "{bad}: {err}");
        assert!(out.stdout.is_empty(), "{bad}");
    }
}
