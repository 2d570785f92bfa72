//! Reloading what the server reads from files when a file changes.
//!
//! SIGHUP is one way to ask for a reload; the other is to change a file: a
//! task looks at the files' metadata (modification time, size, inode) every
//! [`POLL`] and reloads when any of them differs from the last look. Editors
//! and `kubectl` (which swaps a symlink) both show up this way. A file that
//! cannot be looked at (being replaced) counts as changed the next time it
//! can.

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
        let mut last: Vec<Option<Stamp>> = files.iter().map(stamp).collect();
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let Some(shared) = weak.upgrade() else { return };
            let now: Vec<Option<Stamp>> = files.iter().map(stamp).collect();
            // A file missing right now (being swapped) waits for the next look.
            if now != last && now.iter().all(Option::is_some) {
                last = now;
                reload(&AppState { shared });
            }
        }
    });
}
