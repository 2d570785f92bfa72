//! Helpers for running the real `keysmith` binary.
#![allow(dead_code)]

pub mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod load;

/// The binary under test.
pub const KEYSMITH: &str = env!("CARGO_BIN_EXE_keysmith");

/// A temporary directory with a database file in it.
pub struct Db {
    pub dir: tempfile::TempDir,
}

impl Db {
    pub fn new() -> Self {
        Db {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("k.db")
    }

    pub fn url(&self) -> String {
        format!("sqlite://{}", self.path().display())
    }

    /// A command with `--store` set to this database.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(KEYSMITH);
        c.arg("--store")
            .arg(self.url())
            .env_remove("KEYSMITH_STORE");
        c
    }

    /// Runs `keysmith --store URL args...` and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "keysmith {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs and expects failure; returns (exit code, stderr).
    pub fn fails(&self, args: &[&str]) -> (i32, String) {
        let out = self.run(args);
        assert!(!out.status.success(), "keysmith {args:?} should fail");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stderr).unwrap(),
        )
    }
}

// Each test binary uses some of these (the module is compiled into each).
#[allow(unused_imports)]
pub use keysmith_testsupport::processes::{DEADLINE, assert_increasing, complete_values};

pub fn file_bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_default()
}

/// `keysmith --store URL` with nothing from the environment.
pub fn keysmith(url: &str) -> Command {
    let mut c = Command::new(KEYSMITH);
    c.arg("--store").arg(url).env_remove("KEYSMITH_STORE");
    c
}

/// Runs `keysmith --store URL args...`, expects success, returns stdout.
pub fn ok(url: &str, args: &[&str]) -> String {
    let out = keysmith(url).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "keysmith {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `keysmith --store URL args...`, expects failure, returns stderr.
pub fn fails(url: &str, args: &[&str]) -> String {
    let out = keysmith(url).args(args).output().unwrap();
    assert!(!out.status.success(), "keysmith {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// The process and crash scenarios of `keysmith_testsupport::processes` on
/// `backend`, with the binary under test.
pub fn processes(
    backend: &dyn keysmith_testsupport::processes::ProcessBackend,
) -> keysmith_testsupport::processes::Processes<'_> {
    keysmith_testsupport::processes::Processes::new(KEYSMITH, backend)
}
