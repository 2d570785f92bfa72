//! Per-host 64-bit counters behind a file lock.
//!
//! # The counter file
//!
//! A counter lives in one file, [`COUNTER_FILE`], in its directory. The file is
//! 67 bytes of ASCII text: a fixed header line and two fixed-width slots, each
//! a 20-digit zero-padded decimal number and a newline:
//!
//! ```text
//! keysmith host counter v1
//! 00000000000000000042
//! 00000000000000000041
//! ```
//!
//! The counter's value, the last number handed out (0 for a new counter), is
//! the larger of the two slots. Taking `n` numbers writes `value + n` over the
//! *other* slot, the one not holding the value, then `fdatasync`s the file,
//! and only then returns the numbers. All of this happens under an exclusive OS
//! file lock (`flock` on Unix) and, within a process, a mutex.
//!
//! Why this is crash-safe without assuming that the disk writes 21 bytes
//! atomically: the slot holding the largest number ever returned is never
//! overwritten until the other slot durably holds a larger one. A crash, power
//! loss or `SIGKILL` in the middle of a write can only damage the slot being
//! written. When the counter is read again, a damaged slot that no longer
//! parses is ignored (and is the next one overwritten, which repairs it); one
//! that still parses as some number is either below the intact slot (ignored:
//! the maximum wins) or above it (numbers are skipped, never repeated). So a
//! crash loses at most the numbers of the write in flight, and never repeats
//! one. A file that is the wrong size, has the wrong header or has no readable
//! slot at all is reported as [`Error::Corrupt`] and left untouched.
//!
//! The file is created whole: written to a temporary file, synced, hard-linked
//! into place (which fails if another process got there first) and the
//! directory synced, so a counter file is never seen half-written.
//!
//! The file is the counter: deleting or replacing it starts the numbers again
//! at 1 and so repeats names. Keep it with the host's other state (back it up
//! and restore it with the host); never delete it while names are in use.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::name::shorten;
use crate::store::MAX_RESERVATION;
use crate::{Error, Result};

/// The name of the counter file inside a counter directory.
pub const COUNTER_FILE: &str = "host-counter";

/// The longest host name accepted, in bytes (the longest DNS name is 253).
pub const MAX_HOSTNAME_BYTES: usize = 255;

/// The most numbers one [`HostCounter::next_n`] call may take: 2^40.
pub const MAX_COUNT: u64 = MAX_RESERVATION as u64;

const HEADER: &[u8] = b"keysmith host counter v1\n";
const DIGITS: usize = 20;
const SLOT_LEN: usize = DIGITS + 1;
const FILE_LEN: usize = HEADER.len() + 2 * SLOT_LEN;

/// A per-host 64-bit counter shared through a file lock by every thread and
/// process on the host that opens the same directory.
///
/// Each number is taken at most once, across threads, processes and crashes:
/// the new value is written and synced to disk before any number leaves
/// [`next`](Self::next) or [`next_n`](Self::next_n). Numbers taken by one
/// handle (or one thread) increase. A crash loses at most the numbers of the
/// call in flight. Names are `<hostname>/<number>` ([`CounterName`]), unique
/// across a cluster as long as host names are, and every process on a host
/// that hands out names uses the same counter directory.
///
/// A handle is `Send + Sync`; threads may share one. The calls block on file
/// I/O and on the lock, each for the time of one read, one write and one
/// `fdatasync`.
///
/// ```
/// # fn main() -> keysmith_core::Result<()> {
/// let dir = tempfile::tempdir().unwrap();
/// let counter = keysmith_core::names::HostCounter::open_with_host(dir.path(), "web1")?;
/// assert_eq!(counter.next()?.to_string(), "web1/1");
/// let names = counter.next_n(3)?;
/// assert_eq!(names.iter().map(|n| n.to_string()).collect::<Vec<_>>(), ["web1/2", "web1/3", "web1/4"]);
/// assert_eq!(counter.peek()?, 4);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HostCounter {
    host: String,
    path: PathBuf,
    file: Mutex<File>,
}

impl HostCounter {
    /// Opens (creating it if needed) the counter in `dir`, naming this host
    /// by the system host name ([`system_hostname`]).
    ///
    /// # Errors
    /// [`Error::InvalidName`] if the system host name is unusable (then use
    /// [`open_with_host`](Self::open_with_host)); [`Error::Unavailable`] if the
    /// directory or file cannot be created or opened; [`Error::Corrupt`] if the
    /// file is not a counter file.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let host = system_hostname()?;
        Self::open_with_host(dir, &host)
    }

    /// Opens (creating it if needed) the counter in the default directory
    /// ([`default_dir`](Self::default_dir)) with the system host name.
    ///
    /// # Errors
    /// As [`default_dir`](Self::default_dir) and [`open`](Self::open).
    pub fn open_default() -> Result<Self> {
        Self::open(Self::default_dir()?)
    }

    /// Opens (creating it if needed) the counter in `dir`, naming this host
    /// `host` instead of the system host name.
    ///
    /// The host name only prefixes the names; the numbers come from the one
    /// counter in `dir` whatever the host name.
    ///
    /// # Errors
    /// [`Error::InvalidName`] if `host` is not a valid host name
    /// ([`validate_hostname`]); [`Error::Unavailable`] if the directory or file
    /// cannot be created or opened; [`Error::Corrupt`] if the file is not a
    /// counter file.
    pub fn open_with_host(dir: impl AsRef<Path>, host: &str) -> Result<Self> {
        validate_hostname(host)?;
        let dir = dir.as_ref();
        let (file, path) = open_file(dir)?;
        let counter = HostCounter {
            host: host.to_owned(),
            path,
            file: Mutex::new(file),
        };
        // Check the format now rather than at the first call.
        counter.peek()?;
        Ok(counter)
    }

    /// The directory used when none is given:
    ///
    /// 1. `$KEYSMITH_COUNTER_DIR` if set and not empty,
    /// 2. else `$XDG_DATA_HOME/keysmith` if `XDG_DATA_HOME` is an absolute path,
    /// 3. else `$HOME/.local/share/keysmith`.
    ///
    /// This is a per-user directory: two users on one host have two counters
    /// and so may hand out the same names. Where several users (or services)
    /// must share a host's names, point them all at one directory, e.g.
    /// `KEYSMITH_COUNTER_DIR=/var/lib/keysmith`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if none of these variables is set.
    pub fn default_dir() -> Result<PathBuf> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var("KEYSMITH_COUNTER_DIR") {
            return Ok(dir.into());
        }
        if let Some(data) = var("XDG_DATA_HOME").map(PathBuf::from)
            && data.is_absolute()
        {
            return Ok(data.join("keysmith"));
        }
        if let Some(home) = var("HOME") {
            return Ok(PathBuf::from(home).join(".local/share/keysmith"));
        }
        Err(Error::invalid(
            "no host counter directory: set KEYSMITH_COUNTER_DIR (or HOME), or give a directory",
        ))
    }

    /// The host name that prefixes this counter's names.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The path of the counter file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the next number and returns its name, `<host>/<number>`. The
    /// first name of a new counter is `<host>/1`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the counter is at `u64::MAX` (it never
    /// wraps); [`Error::Corrupt`] if the counter file is damaged;
    /// [`Error::Unavailable`] if it cannot be read, written or synced.
    pub fn next(&self) -> Result<CounterName> {
        let names = self.next_n(1)?;
        Ok(CounterName {
            host: names.host,
            value: names.first,
        })
    }

    /// Takes `n` consecutive numbers at once (one write, one sync) and returns
    /// them as a range of names.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `n` is 0 or above [`MAX_COUNT`], or if
    /// fewer than `n` numbers are left below `u64::MAX` (nothing is taken
    /// then); [`Error::Corrupt`] if the counter file is damaged;
    /// [`Error::Unavailable`] if it cannot be read, written or synced.
    pub fn next_n(&self, n: u64) -> Result<CounterNames> {
        if !(1..=MAX_COUNT).contains(&n) {
            return Err(Error::invalid(format!(
                "the number of names to take must be between 1 and {MAX_COUNT}, got {n}"
            )));
        }
        self.with_lock(true, |file| {
            let slots = read_slots(file, &self.path)?;
            let current = slots.value();
            let last = current.checked_add(n).ok_or_else(|| {
                let left = u64::MAX - current;
                Error::invalid(format!(
                    "host counter {} has reached {current}: only {left} of the {n} names asked for are left before its maximum {}, and it never wraps; use another host name or counter directory",
                    self.path.display(),
                    u64::MAX
                ))
            })?;
            write_slot(file, &self.path, slots.slot_to_write(), last)?;
            Ok(CounterNames {
                host: self.host.clone(),
                first: current + 1,
                last,
            })
        })
    }

    /// The counter's value: the last number handed out by anyone, 0 for a new
    /// counter. Takes nothing; another process may take numbers right after.
    ///
    /// # Errors
    /// [`Error::Corrupt`] if the counter file is damaged;
    /// [`Error::Unavailable`] if it cannot be read.
    pub fn peek(&self) -> Result<u64> {
        self.with_lock(false, |file| Ok(read_slots(file, &self.path)?.value()))
    }

    fn with_lock<T>(&self, exclusive: bool, f: impl FnOnce(&mut File) -> Result<T>) -> Result<T> {
        // The mutex orders the threads of this process (flock does not: the
        // lock belongs to the open file, which they share); the file lock
        // orders processes. The file is re-read under the lock every time, so
        // a poisoned mutex guards nothing stale.
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        let locked = if exclusive {
            File::lock(&file)
        } else {
            File::lock_shared(&file)
        };
        locked.map_err(|e| io_error("lock", &self.path, &e))?;
        let result = f(&mut file);
        let unlocked = File::unlock(&file).map_err(|e| io_error("unlock", &self.path, &e));
        let value = result?;
        unlocked?;
        Ok(value)
    }
}

/// The two slots of a counter file; `None` is a slot that does not parse.
/// At least one is `Some`.
struct Slots([Option<u64>; 2]);

impl Slots {
    fn value(&self) -> u64 {
        self.0.iter().flatten().copied().max().unwrap_or(0)
    }

    /// The slot to overwrite: an unreadable one, else the smaller one. Never
    /// the only slot holding the value.
    fn slot_to_write(&self) -> usize {
        match self.0 {
            [None, _] => 0,
            [_, None] => 1,
            [Some(a), Some(b)] => usize::from(a > b),
        }
    }
}

fn read_slots(file: &mut File, path: &Path) -> Result<Slots> {
    let mut buf = Vec::with_capacity(FILE_LEN + 1);
    file.seek(SeekFrom::Start(0))
        .and_then(|_| file.take(FILE_LEN as u64 + 1).read_to_end(&mut buf))
        .map_err(|e| io_error("read", path, &e))?;
    let corrupt = |what: String| {
        Error::Corrupt(format!(
            "host counter file {} {what}; it was damaged or not written by keysmith. \
             Names may have been handed out from it: restore it from a backup, or write a number \
             at least as high as the last one handed out into both value lines (20 digits, zero-padded)",
            path.display()
        ))
    };
    if buf.len() != FILE_LEN {
        return Err(corrupt(format!(
            "is {}{} bytes long, expected {FILE_LEN}",
            buf.len(),
            if buf.len() > FILE_LEN { " or more" } else { "" }
        )));
    }
    if !buf.starts_with(HEADER) {
        return Err(corrupt(
            "does not start with the line \"keysmith host counter v1\"".to_owned(),
        ));
    }
    let slot = |i: usize| parse_slot(&buf[HEADER.len() + i * SLOT_LEN..][..SLOT_LEN]);
    let slots = Slots([slot(0), slot(1)]);
    if slots.0 == [None, None] {
        return Err(corrupt("has no readable value line".to_owned()));
    }
    Ok(slots)
}

fn parse_slot(line: &[u8]) -> Option<u64> {
    let (digits, end) = line.split_at(DIGITS);
    if end != b"\n" || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

fn write_slot(file: &mut File, path: &Path, slot: usize, value: u64) -> Result<()> {
    let line = format!("{value:0DIGITS$}\n");
    debug_assert_eq!(line.len(), SLOT_LEN);
    let offset = (HEADER.len() + slot * SLOT_LEN) as u64;
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.write_all(line.as_bytes()))
        .map_err(|e| io_error("write", path, &e))?;
    // The size never changes, so fdatasync covers everything a reader needs.
    file.sync_data().map_err(|e| io_error("sync", path, &e))
}

fn open_file(dir: &Path) -> Result<(File, PathBuf)> {
    fs::create_dir_all(dir).map_err(|e| io_error("create the directory", dir, &e))?;
    let path = dir.join(COUNTER_FILE);
    // Two rounds: if the file is missing, create it (or lose the race to
    // another creator), then open whichever file won.
    for _ in 0..2 {
        match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => return Ok((file, path)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => create_file(dir, &path)?,
            Err(e) => return Err(io_error("open", &path, &e)),
        }
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map(|file| (file, path.clone()))
        .map_err(|e| io_error("open", &path, &e))
}

/// Creates a new counter file whole: temporary file, sync, hard link into
/// place (a no-op if another process linked first), sync the directory.
fn create_file(dir: &Path, path: &Path) -> Result<()> {
    static TMP_SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{COUNTER_FILE}.{}.{}.tmp",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut content = HEADER.to_vec();
    for _ in 0..2 {
        content.extend_from_slice(format!("{:0DIGITS$}\n", 0).as_bytes());
    }
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(&content)?;
            f.sync_all()
        });
    let linked = written.and_then(|()| match fs::hard_link(&tmp, path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = fs::remove_file(&tmp);
    linked.map_err(|e| io_error("create", path, &e))?;
    sync_dir(dir).map_err(|e| io_error("sync the directory", dir, &e))
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

fn io_error(action: &str, path: &Path, e: &io::Error) -> Error {
    Error::Unavailable(format!(
        "cannot {action} host counter {}: {e}; check that the directory exists, is writable and is on a local file system",
        path.display()
    ))
}

/// The system's host name.
///
/// # Errors
/// [`Error::InvalidName`] if it is not UTF-8 or not a valid host name
/// ([`validate_hostname`]); give a host name explicitly then.
pub fn system_hostname() -> Result<String> {
    let raw = gethostname::gethostname();
    let host = raw.into_string().map_err(|raw| Error::InvalidName {
        name: shorten(&raw.to_string_lossy()),
        reason: "the system host name is not valid UTF-8; give a host name explicitly".to_owned(),
    })?;
    validate_hostname(&host).map_err(|e| match e {
        Error::InvalidName { name, reason } => Error::InvalidName {
            name,
            reason: format!(
                "the system host name is unusable: {reason}; give a host name explicitly"
            ),
        },
        other => other,
    })?;
    Ok(host)
}

/// Checks that `host` can prefix counter names: 1 to [`MAX_HOSTNAME_BYTES`]
/// bytes, no `/` (it separates host and number), no whitespace, no control
/// characters.
///
/// # Errors
/// [`Error::InvalidName`] saying what is wrong.
pub fn validate_hostname(host: &str) -> Result<()> {
    let reason = if host.is_empty() {
        "a host name must not be empty".to_owned()
    } else if host.len() > MAX_HOSTNAME_BYTES {
        format!(
            "a host name must be at most {MAX_HOSTNAME_BYTES} bytes, this one is {}",
            host.len()
        )
    } else if host.contains('/') {
        "a host name may not contain '/', which separates the host from the number in <host>/<number>".to_owned()
    } else if let Some(c) = host.chars().find(|c| c.is_whitespace() || c.is_control()) {
        format!("a host name may not contain whitespace or control characters (found {c:?})")
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: shorten(host),
        reason,
    })
}

/// One name from a host counter: `<host>/<number>`.
///
/// `Display` and `FromStr` round-trip.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterName {
    host: String,
    value: u64,
}

impl CounterName {
    /// A name from its parts.
    ///
    /// # Errors
    /// [`Error::InvalidName`] if `host` is not valid ([`validate_hostname`]).
    pub fn new(host: &str, value: u64) -> Result<Self> {
        validate_hostname(host)?;
        Ok(CounterName {
            host: host.to_owned(),
            value,
        })
    }

    /// The host part.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The number part.
    pub fn value(&self) -> u64 {
        self.value
    }
}

impl std::fmt::Display for CounterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.host, self.value)
    }
}

impl FromStr for CounterName {
    type Err = Error;

    /// Parses `<host>/<number>`; the number is decimal without leading zeros.
    ///
    /// # Errors
    /// [`Error::InvalidName`] saying which part is wrong.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |reason: String| Error::InvalidName {
            name: shorten(s),
            reason,
        };
        let (host, number) = s.rsplit_once('/').ok_or_else(|| {
            bad("a counter name is <host>/<number>, and this one has no '/'".to_owned())
        })?;
        let value = super::parse_decimal(number)
            .map_err(|why| bad(format!("the number {number:?} is not valid: {why}")))?;
        validate_hostname(host)
            .map_err(|e| bad(format!("the host {host:?} is not valid: {}", reason_of(e))))?;
        Ok(CounterName {
            host: host.to_owned(),
            value,
        })
    }
}

fn reason_of(e: Error) -> String {
    match e {
        Error::InvalidName { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// Consecutive names taken at once by [`HostCounter::next_n`]: `<host>/<first>`
/// to `<host>/<last>`, both included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterNames {
    host: String,
    first: u64,
    last: u64,
}

impl CounterNames {
    /// The host part of every name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The first number (inclusive).
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The last number (inclusive).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// How many names there are (at least 1).
    pub fn len(&self) -> u64 {
        self.last - self.first + 1
    }

    /// Always false: a range holds at least one name.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The numbers, ascending.
    pub fn values(&self) -> std::ops::RangeInclusive<u64> {
        self.first..=self.last
    }

    /// The names, ascending.
    pub fn iter(&self) -> impl Iterator<Item = CounterName> + '_ {
        self.values().map(|value| CounterName {
            host: self.host.clone(),
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn write_file(dir: &Path, content: &[u8]) {
        fs::write(dir.join(COUNTER_FILE), content).unwrap();
    }

    fn file_with(a: &str, b: &str) -> Vec<u8> {
        let mut v = HEADER.to_vec();
        v.extend_from_slice(a.as_bytes());
        v.extend_from_slice(b.as_bytes());
        v
    }

    #[test]
    fn new_counter_starts_at_one_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let c = HostCounter::open_with_host(dir.path(), "h").unwrap();
        assert_eq!(c.peek().unwrap(), 0);
        assert_eq!(c.next().unwrap().to_string(), "h/1");
        let r = c.next_n(5).unwrap();
        assert_eq!((r.first(), r.last(), r.len()), (2, 6, 5));
        drop(c);
        let c = HostCounter::open_with_host(dir.path(), "other").unwrap();
        assert_eq!(c.peek().unwrap(), 6);
        assert_eq!(c.next().unwrap().to_string(), "other/7");
        let text = fs::read_to_string(dir.path().join(COUNTER_FILE)).unwrap();
        assert_eq!(
            text,
            "keysmith host counter v1\n00000000000000000007\n00000000000000000006\n"
        );
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn writes_alternate_and_never_touch_the_maximum() {
        let dir = tempfile::tempdir().unwrap();
        let c = HostCounter::open_with_host(dir.path(), "h").unwrap();
        let path = dir.path().join(COUNTER_FILE);
        for expect in 1..=6u64 {
            let before = fs::read(&path).unwrap();
            assert_eq!(c.next().unwrap().value(), expect);
            let after = fs::read(&path).unwrap();
            let slots = |buf: &[u8]| {
                [0, 1].map(|i| parse_slot(&buf[HEADER.len() + i * SLOT_LEN..][..SLOT_LEN]).unwrap())
            };
            let (was, now) = (slots(&before), slots(&after));
            let max = was[0].max(was[1]);
            assert!(
                (0..2).any(|i| was[i] == max && now[i] == max),
                "value {expect}: a slot holding the maximum {max} was kept ({was:?} -> {now:?})"
            );
            assert_eq!(now[0].max(now[1]), expect);
        }
    }

    /// Threads sharing one handle and threads with handles of their own, on
    /// one directory: every number once, increasing per thread, no gaps.
    #[test]
    fn threads_and_handles_share_one_counter() {
        const PER_THREAD: u64 = 60;
        let dir = tempfile::tempdir().unwrap();
        let shared = std::sync::Arc::new(HostCounter::open_with_host(dir.path(), "h").unwrap());
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let counter = if i % 2 == 0 {
                    std::sync::Arc::clone(&shared)
                } else {
                    std::sync::Arc::new(HostCounter::open_with_host(dir.path(), "h").unwrap())
                };
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while (got.len() as u64) < PER_THREAD {
                        if got.len() % 3 == 0 {
                            got.extend(counter.next_n(2).unwrap().values());
                        } else {
                            got.push(counter.next().unwrap().value());
                        }
                    }
                    got
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in threads {
            let got = t.join().unwrap();
            assert!(got.windows(2).all(|w| w[0] < w[1]), "{got:?}");
            all.extend(got);
        }
        all.sort_unstable();
        let n = all.len() as u64;
        assert_eq!(all, (1..=n).collect::<Vec<_>>());
        assert_eq!(shared.peek().unwrap(), n);
    }

    #[test]
    fn torn_slot_is_ignored_then_repaired() {
        let dir = tempfile::tempdir().unwrap();
        // Slot B was being written when the machine died.
        write_file(
            dir.path(),
            &file_with("00000000000000000041\n", "0000000000\0\0\0\0\0\0\0\0\0\0\0"),
        );
        let c = HostCounter::open_with_host(dir.path(), "h").unwrap();
        assert_eq!(c.peek().unwrap(), 41);
        assert_eq!(c.next().unwrap().value(), 42);
        let text = fs::read_to_string(dir.path().join(COUNTER_FILE)).unwrap();
        assert!(
            text.ends_with("00000000000000000041\n00000000000000000042\n"),
            "{text:?}"
        );
        // A torn slot that still parses: the maximum wins either way.
        write_file(
            dir.path(),
            &file_with("00000000000000000100\n", "00000000000000000019\n"),
        );
        assert_eq!(c.next().unwrap().value(), 101);
    }

    #[test]
    fn corrupt_files_are_refused_and_left_alone() {
        let cases: [(&[u8], &str); 5] = [
            (b"", "0 bytes"),
            (
                &file_with("00000000000000000001\n", "00000000000000000002\nx"),
                "or more",
            ),
            (
                &[b"keysmith host counter v2\n".as_slice(), &[b'0'; 42]].concat(),
                "does not start",
            ),
            (
                &file_with("0000000000000000000x\n", "-0000000000000000001\n"),
                "no readable value",
            ),
            (
                &file_with("99999999999999999999\n", "0000000000000000001\n\n"),
                "no readable value",
            ),
        ];
        for (content, expect) in cases {
            let dir = tempfile::tempdir().unwrap();
            write_file(dir.path(), content);
            let err = HostCounter::open_with_host(dir.path(), "h").unwrap_err();
            assert!(matches!(err, Error::Corrupt(_)), "{err}");
            let msg = err.to_string();
            assert!(msg.contains(expect) && msg.contains("restore it"), "{msg}");
            assert_eq!(fs::read(dir.path().join(COUNTER_FILE)).unwrap(), content);
        }
    }

    #[test]
    fn stops_at_u64_max_without_wrapping() {
        let dir = tempfile::tempdir().unwrap();
        let near = format!("{:020}\n", u64::MAX - 2);
        write_file(dir.path(), &file_with(&near, &near));
        let c = HostCounter::open_with_host(dir.path(), "h").unwrap();
        let err = c.next_n(3).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("only 2 of the 3"), "{err}");
        assert_eq!(
            c.peek().unwrap(),
            u64::MAX - 2,
            "a failed call takes nothing"
        );
        assert_eq!(c.next_n(2).unwrap().last(), u64::MAX);
        let err = c.next().unwrap_err();
        assert!(err.to_string().contains("never wraps"), "{err}");
        assert_eq!(c.peek().unwrap(), u64::MAX);
    }

    #[test]
    fn bad_counts_and_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let c = HostCounter::open_with_host(dir.path(), "h").unwrap();
        for n in [0, MAX_COUNT + 1, u64::MAX] {
            assert!(matches!(c.next_n(n), Err(Error::InvalidArgument(_))), "{n}");
        }
        assert_eq!(c.peek().unwrap(), 0);
        let long = "x".repeat(256);
        for (host, expect) in [
            ("", "empty"),
            ("a/b", "'/'"),
            ("a b", "whitespace"),
            ("a\tb", "whitespace"),
            ("a\u{7}", "control"),
            (long.as_str(), "at most 255"),
        ] {
            let err = HostCounter::open_with_host(dir.path(), host).unwrap_err();
            assert!(matches!(err, Error::InvalidName { .. }), "{err}");
            assert!(err.to_string().contains(expect), "{host:?}: {err}");
        }
        for ok in ["web1", "web1.example.com", "ü", &"x".repeat(255)] {
            validate_hostname(ok).unwrap();
        }
    }

    #[test]
    fn unwritable_directory_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs::write(&file, b"x").unwrap();
        let err = HostCounter::open_with_host(&file, "h").unwrap_err();
        assert!(matches!(err, Error::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("not-a-dir"), "{err}");
    }

    #[test]
    fn system_hostname_is_valid() {
        // The machines keysmith is tested on have sane host names.
        let host = system_hostname().unwrap();
        validate_hostname(&host).unwrap();
    }

    #[test]
    fn counter_name_parse_errors() {
        for (bad, expect) in [
            ("nohost", "no '/'"),
            ("h/", "empty"),
            ("h/01", "leading zero"),
            ("h/-1", "digits"),
            ("/5", "host \"\""),
            ("a b/5", "whitespace"),
        ] {
            let err = bad.parse::<CounterName>().unwrap_err();
            assert!(err.to_string().contains(expect), "{bad:?}: {err}");
        }
    }

    proptest! {
        #[test]
        fn counter_names_round_trip(host in "[^/\\s\\p{Cc}]{1,40}", value: u64) {
            let name = CounterName::new(&host, value).unwrap();
            let text = name.to_string();
            prop_assert_eq!(text.parse::<CounterName>().unwrap(), name);
        }

        #[test]
        fn counter_name_parse_never_panics(s in "\\PC{0,60}") {
            if let Ok(n) = s.parse::<CounterName>() {
                prop_assert_eq!(n.to_string(), s);
            }
        }
    }
}
