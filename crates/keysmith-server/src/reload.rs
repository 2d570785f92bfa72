//! Reloading what the server reads from files when a file changes.
//!
//! SIGHUP is one way to ask for a reload; the other is to change a file: a
//! task looks at the files' metadata (modification time, size, inode) every
//! [`POLL`] and reloads once they differ from what the last reload saw and
//! have stayed the same for one more look, so that a file being written is
//! not read half way (replace files by renaming a finished one over them to
//! be sure). Editors and `kubectl` (which swaps a symlink) both show up this
//! way. A file that is missing counts as a change too: the reload fails,
//! says why, and keeps what was in use. However a reload is asked for
//! (SIGHUP or a change seen here), the access file itself is read until two
//! readings in a row agree ([`crate::access::AccessFile::load`]), so a file
//! written in place is never applied half way.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::AppState;

/// How often the files are looked at.
pub const POLL: Duration = Duration::from_secs(1);

/// What tells that a file changed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &PathBuf) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode,
    })
}

/// Watches `files` while `state` lives, calling `reload` on a change.
pub(crate) fn watch(state: &AppState, files: Vec<PathBuf>, reload: fn(&AppState)) {
    if files.is_empty() {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = std::sync::Arc::downgrade(&state.shared);
    rt.spawn(async move {
        // What the last reload (or the start) saw, and the look before.
        let mut loaded: Vec<Option<Stamp>> = files.iter().map(stamp).collect();
        let mut seen = loaded.clone();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let Some(shared) = weak.upgrade() else { return };
            let now: Vec<Option<Stamp>> = files.iter().map(stamp).collect();
            // Changed, and settled since the last look.
            if now != loaded && now == seen {
                loaded = now.clone();
                reload(&AppState { shared });
            }
            seen = now;
        }
    });
}
