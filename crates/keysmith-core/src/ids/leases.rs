//! Worker-id leases as a service: [`WorkerLeases`], and what a group's
//! worker ids look like in the store: [`list_workers`].

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sequence::lease::LeaseKey;
use crate::store::{MAX_WORKERS, Store, WorkerClaim, check_times};
use crate::{Error, Result};

use super::{ms, wall_ms};

/// What worker-lease tokens are signed for (a token of another kind never
/// opens as one).
const DOMAIN: &str = "keysmith worker lease v1";

/// The TTL of a lease when none is given: 10 s.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// The size of a group when none is given: 1024 worker ids (10 bits, as
/// Twitter's snowflake and bwmarrin/snowflake).
pub const DEFAULT_GROUP_SIZE: i64 = 1024;

/// A worker id held: what [`WorkerLeases::lease`] and
/// [`WorkerLeases::renew`] return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldWorker {
    /// The group.
    pub group: String,
    /// The worker id, `0..max`.
    pub worker: i64,
    /// Bumped by every acquisition of this worker id.
    pub fence: i64,
    /// The size of the group the worker id was leased in.
    pub max: i64,
    /// Ids made with this worker id must use times at or above this (ms
    /// since the Unix epoch): the floor the previous holders left.
    pub not_before_ms: i64,
    /// Ids made with this worker id must use times below this; it moves
    /// forward with every renewal. The next holder starts at or above it.
    pub until_ms: i64,
    /// When the lease expires unless renewed (ms since the Unix epoch, by
    /// the clock of whoever leased it); a renewal after it is refused.
    pub expires_ms: i64,
    /// The lease's time to live, ms.
    pub ttl_ms: i64,
    /// The signed token that renews and releases the lease.
    pub lease: String,
}

/// What a token carries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Token {
    group: String,
    worker: i64,
    fence: i64,
    max: i64,
    not_before_ms: i64,
    ttl_ms: i64,
    expires_ms: i64,
}

impl Token {
    fn body(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n{}",
            self.group,
            self.worker,
            self.fence,
            self.max,
            self.not_before_ms,
            self.ttl_ms,
            self.expires_ms
        )
    }

    fn parse(body: &str) -> Option<Token> {
        let p: Vec<&str> = body.split('\n').collect();
        let [group, worker, fence, max, nb, ttl, exp] = p.as_slice() else {
            return None;
        };
        Some(Token {
            group: (*group).to_owned(),
            worker: worker.parse().ok()?,
            fence: fence.parse().ok()?,
            max: max.parse().ok()?,
            not_before_ms: nb.parse().ok()?,
            ttl_ms: ttl.parse().ok()?,
            expires_ms: exp.parse().ok()?,
        })
    }
}

/// Leases worker ids of groups to callers outside the process.
///
/// Worker-id leases as a service, for generators other than keysmith's own
/// (sonyflake, bwmarrin/snowflake, ...): lease a worker id of a group,
/// renew it, release it, each answer with a signed token.
///
/// A lease is [`crate::store::WorkerStore`]'s, unchanged: the worker id is
/// the lowest of `0..max` without a live lease, its fence is bumped by every
/// acquisition, and its time floor outlives holders. A [`HeldWorker`] says
/// what the holder may do with it: use the worker id only for ids whose
/// time lies in `not_before_ms..until_ms`, renew before `expires_ms` (a
/// third of the TTL is a good period), and stop issuing ids when a renewal
/// is refused or `until_ms` passes. Two holders of one worker id never have
/// overlapping windows: a new holder's `not_before_ms` is at or above every
/// `until_ms` an earlier holder was given.
///
/// The token ([`HeldWorker::lease`]) names the group, worker id, fence,
/// group size, TTL and expiry, signed with a [`LeaseKey`]: an edited or
/// forged token is refused, and so is one made for another group. A renewal
/// after the expiry the token carries, or after another holder acquired the
/// worker id, is refused with [`Error::LeaseRefused`].
#[derive(Debug, Clone)]
pub struct WorkerLeases {
    store: Arc<dyn Store>,
    key: LeaseKey,
    holder: String,
}

impl WorkerLeases {
    /// Leases from `store`, tokens signed with `key` (give every server of
    /// one store the same key, or a token opens only where it was made).
    pub fn new(store: Arc<dyn Store>, key: LeaseKey) -> Self {
        WorkerLeases {
            store,
            key,
            holder: format!("lease/{}", super::holder()),
        }
    }

    /// Leases the lowest worker id of `group` in `0..max` without a live
    /// lease, for `ttl` (1 ms to a day).
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] for a bad
    /// group, TTL or size (`1..=`[`MAX_WORKERS`]); [`Error::LeaseRefused`]
    /// naming the group and its size when every worker id is held; what
    /// the store fails with.
    pub async fn lease(&self, group: &str, ttl: Duration, max: i64) -> Result<HeldWorker> {
        crate::validate_name(group)?;
        crate::store::check_user_group(group)?;
        let now = wall_ms();
        let claim = WorkerClaim {
            group: group.to_owned(),
            max_workers: max,
            holder: self.holder.clone(),
            ttl,
            now_ms: now.max(0),
            window_ms: ms(ttl),
        };
        claim.validate()?;
        let l = match self.store.acquire_worker(&claim).await {
            Ok(l) => l,
            Err(Error::IdsUnavailable(m)) => return Err(Error::LeaseRefused(m)),
            Err(e) => return Err(e),
        };
        let until_ms = l.until_ms;
        Ok(self.held(
            Token {
                group: l.group,
                worker: l.worker,
                fence: l.fence,
                max,
                not_before_ms: l.start_ms,
                ttl_ms: ms(ttl),
                expires_ms: now.saturating_add(ms(ttl)),
            },
            until_ms,
        ))
    }

    /// Renews the lease of `token` (of `group`) for `ttl` (default: the
    /// lease's own): it expires `ttl` from now, and `until_ms` moves to at
    /// least now + `ttl`. Returns the lease with a new token; use that one
    /// from now on.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a token that is malformed, edited,
    /// forged, of another group, or a bad TTL; [`Error::LeaseRefused`] when
    /// the lease expired or another holder acquired the worker id since
    /// (stop issuing ids with it); what the store fails with.
    pub async fn renew(
        &self,
        group: &str,
        token: &str,
        ttl: Option<Duration>,
    ) -> Result<HeldWorker> {
        let t = self.open(group, token)?;
        let ttl = ttl.unwrap_or(Duration::from_millis(t.ttl_ms.max(0) as u64));
        let now = wall_ms();
        check_times(ttl, now.max(0), ms(ttl))?;
        if now >= t.expires_ms {
            return Err(Error::LeaseRefused(format!(
                "the lease of worker id {} of group {:?} (fence {}) expired at {} ({} ms ago) and can no longer \
                 be renewed; stop issuing ids with worker id {} and lease a worker id anew (renew every third of the TTL)",
                t.worker,
                t.group,
                t.fence,
                super::layout::rfc3339(t.expires_ms),
                now - t.expires_ms,
                t.worker
            )));
        }
        let renewed = self
            .store
            .renew_worker(&t.group, t.worker, t.fence, ttl, now.max(0), ms(ttl))
            .await?;
        let Some(until_ms) = renewed else {
            return Err(Error::LeaseRefused(format!(
                "worker id {} of group {:?} was leased by another holder since this lease (fence {}) was made; \
                 stop issuing ids with it and lease a worker id anew",
                t.worker, t.group, t.fence
            )));
        };
        Ok(self.held(
            Token {
                ttl_ms: ms(ttl),
                expires_ms: now.saturating_add(ms(ttl)),
                ..t
            },
            until_ms,
        ))
    }

    /// Ends the lease of `token` (of `group`) so its worker id can be
    /// leased again at once; its time floor stays, so the next holder
    /// starts at or above this lease's `until_ms`. Returns `false` when the
    /// lease was lost already (another holder acquired the worker id):
    /// nothing changed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad token, as [`WorkerLeases::renew`];
    /// what the store fails with.
    pub async fn release(&self, group: &str, token: &str) -> Result<bool> {
        let t = self.open(group, token)?;
        self.store
            .release_worker(&t.group, t.worker, t.fence, i64::MAX)
            .await
    }

    fn held(&self, t: Token, until_ms: i64) -> HeldWorker {
        let lease = self.key.seal_text(DOMAIN, &t.body());
        HeldWorker {
            until_ms,
            group: t.group,
            worker: t.worker,
            fence: t.fence,
            max: t.max,
            not_before_ms: t.not_before_ms,
            expires_ms: t.expires_ms,
            ttl_ms: t.ttl_ms,
            lease,
        }
    }

    fn open(&self, group: &str, token: &str) -> Result<Token> {
        crate::validate_name(group)?;
        let t = self
            .key
            .open_text(DOMAIN, token)
            .and_then(|b| Token::parse(&b))
            .filter(|t| (0..MAX_WORKERS).contains(&t.worker) && t.fence >= 1)
            .ok_or_else(|| {
                Error::invalid(
                    "invalid worker lease token: give back the token the last lease or renewal returned, unchanged \
                     (a token from another server or from before a restart opens only with a shared lease secret, \
                     KEYSMITH_LEASE_SECRET or a lease secret file, and one signed with a key since removed from \
                     that file no longer opens)",
                )
            })?;
        if t.group != group {
            return Err(Error::invalid(format!(
                "this worker lease token is for group {:?}, not {group:?}",
                t.group
            )));
        }
        Ok(t)
    }
}

/// One worker id of a group, as [`list_workers`] found it in the store. No
/// lease token: the store keeps none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedWorker {
    /// The worker id.
    pub worker: i64,
    /// Whether a live lease holds it (by the store's clock, as an
    /// acquisition decides it): a lease of the group would pass it over.
    pub held: bool,
    /// Who holds it, while held: `HOST/PID` of a keysmith id generator, or
    /// `lease/HOST/PID` of the keysmith server or command that leased it for
    /// another generator. `null` when not held (or not recorded).
    pub holder: Option<String>,
    /// The fence of its last acquisition; a renewal or release quoting an
    /// older one is refused.
    pub fence: i64,
    /// Its time floor (ms since the Unix epoch): every id made with the
    /// worker id lies below it, and its next holder starts at or above it.
    /// Kept when the worker id is released or its lease expires.
    pub until_ms: i64,
    /// While held: when the lease expires unless renewed (ms since the Unix
    /// epoch): this process's clock before the store was asked, plus
    /// `expires_in_ms`.
    pub expires_ms: Option<i64>,
    /// While held: how long the lease has left by the store's clock, ms
    /// (etcd: whole seconds, rounded down).
    pub expires_in_ms: Option<i64>,
}

/// The worker ids of a group: what [`list_workers`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerList {
    /// The group.
    pub group: String,
    /// Every worker id of the group ever acquired, ordered by worker id,
    /// held or not (a free one keeps its fence and time floor).
    pub workers: Vec<ListedWorker>,
}

/// Lists the worker ids of `group` as the store holds them: which are held,
/// by whom, until when, with what fence, and each one's time floor
/// ([`crate::store::WorkerStore::list_workers`]). Tokens are not in it.
/// Reads only.
///
/// A group no one ever leased a worker id of gives an empty list, not
/// [`Error::NotFound`]: groups are not created, a lease of any valid group
/// name succeeds, so a group exists only by its worker ids. Worker ids
/// leased by keysmith's own id generators (group `ids` by default) are
/// listed too.
///
/// # Errors
/// [`Error::InvalidName`] for a bad group name (as [`WorkerLeases::lease`]
/// checks it); what the store fails with.
pub async fn list_workers(store: &dyn Store, group: &str) -> Result<WorkerList> {
    crate::validate_name(group)?;
    let now = wall_ms();
    let entries = store.list_workers(group).await?;
    Ok(WorkerList {
        group: group.to_owned(),
        workers: entries
            .into_iter()
            .map(|e| ListedWorker {
                worker: e.worker,
                held: e.expires_in_ms.is_some(),
                holder: e.holder,
                fence: e.fence,
                until_ms: e.until_ms,
                expires_ms: e.expires_in_ms.map(|left| now.saturating_add(left)),
                expires_in_ms: e.expires_in_ms,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn leases() -> WorkerLeases {
        WorkerLeases::new(Arc::new(MemoryStore::new()), LeaseKey::random())
    }

    #[tokio::test]
    async fn lease_renew_release_and_take_over() {
        let l = leases();
        let ttl = Duration::from_secs(60);
        let a = l.lease("g", ttl, 2).await.unwrap();
        let b = l.lease("g", ttl, 2).await.unwrap();
        assert_eq!((a.worker, b.worker), (0, 1));
        assert!(a.not_before_ms < a.until_ms && a.until_ms <= a.expires_ms + 1);
        let e = l.lease("g", ttl, 2).await.unwrap_err();
        assert!(matches!(e, Error::LeaseRefused(_)), "{e}");
        assert!(
            e.to_string().contains("all 2 worker ids of group \"g\""),
            "{e}"
        );
        let a2 = l.renew("g", &a.lease, None).await.unwrap();
        assert_eq!((a2.worker, a2.fence), (a.worker, a.fence));
        assert!(a2.until_ms >= a.until_ms);
        // The old token still names the live lease.
        l.renew("g", &a.lease, None).await.unwrap();
        assert!(l.release("g", &a2.lease).await.unwrap());
        let c = l.lease("g", ttl, 2).await.unwrap();
        assert_eq!((c.worker, c.fence), (0, a.fence + 1));
        assert!(c.not_before_ms >= a2.until_ms, "{c:?} after {a2:?}");
        let e = l.renew("g", &a2.lease, None).await.unwrap_err();
        assert!(
            matches!(e, Error::LeaseRefused(_)) && e.to_string().contains("another holder"),
            "{e}"
        );
        assert!(!l.release("g", &a2.lease).await.unwrap(), "lost already");
    }

    #[tokio::test]
    async fn a_list_shows_holders_fences_and_floors_but_no_token() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let l = WorkerLeases::new(store.clone(), LeaseKey::random());
        let empty = list_workers(&*store, "g").await.unwrap();
        assert_eq!((empty.group.as_str(), empty.workers.len()), ("g", 0));
        let ttl = Duration::from_secs(60);
        let before = wall_ms();
        let a = l.lease("g", ttl, 4).await.unwrap();
        let b = l.lease("g", ttl, 4).await.unwrap();
        assert!(l.release("g", &a.lease).await.unwrap());
        let list = list_workers(&*store, "g").await.unwrap();
        let after = wall_ms();
        let [free, held] = list.workers.as_slice() else {
            panic!("{list:?}");
        };
        assert_eq!(
            (
                free.worker,
                free.held,
                &free.holder,
                free.fence,
                free.until_ms
            ),
            (0, false, &None, a.fence, a.until_ms)
        );
        assert_eq!((free.expires_ms, free.expires_in_ms), (None, None));
        assert_eq!((held.worker, held.held, held.fence), (1, true, b.fence));
        assert_eq!(held.until_ms, b.until_ms);
        assert!(held.holder.as_deref().unwrap().starts_with("lease/"));
        let left = held.expires_in_ms.unwrap();
        assert!(0 < left && left <= 60_000, "{held:?}");
        let at = held.expires_ms.unwrap();
        assert!(before + left <= at && at <= after + left, "{held:?}");
        let json = serde_json::to_string(&list).unwrap();
        assert!(
            !json.contains(&b.lease) && !json.contains(&a.lease),
            "{json}"
        );
        let e = list_workers(&*store, "a b").await.unwrap_err();
        assert!(matches!(e, Error::InvalidName { .. }), "{e}");
    }

    #[tokio::test]
    async fn a_renewal_after_expiry_is_refused() {
        let l = leases();
        let a = l.lease("g", Duration::from_millis(30), 4).await.unwrap();
        // Wait for the time itself: the expiry is a time, not an event.
        while wall_ms() < a.expires_ms {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let e = l.renew("g", &a.lease, None).await.unwrap_err();
        assert!(
            matches!(e, Error::LeaseRefused(_)) && e.to_string().contains("expired"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn bad_tokens_and_input_are_refused() {
        let l = leases();
        let a = l.lease("g", Duration::from_secs(60), 4).await.unwrap();
        for bad in ["", "x", "a.b", &a.lease[..a.lease.len() - 1]] {
            let e = l.renew("g", bad, None).await.unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{bad}: {e}");
        }
        let other = WorkerLeases::new(Arc::new(MemoryStore::new()), LeaseKey::random());
        assert!(other.renew("g", &a.lease, None).await.is_err());
        let e = l.renew("h", &a.lease, None).await.unwrap_err();
        assert!(e.to_string().contains("not \"h\""), "{e}");
        assert!(l.renew("g", &a.lease, Some(Duration::ZERO)).await.is_err());
        for (ttl, max) in [(0, 4), (1000, 0), (1000, MAX_WORKERS + 1)] {
            let e = l
                .lease("g", Duration::from_millis(ttl), max)
                .await
                .unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        assert!(l.lease("a b", Duration::from_secs(1), 4).await.is_err());
        // A sequence lease token never opens as a worker lease token.
        let seq = crate::sequence::lease::Lease {
            name: "g".into(),
            start: 1,
            end: 2,
            version: 1,
            step: 1,
            incarnation: 1,
        };
        assert!(l.renew("g", &l.key.seal(&seq), None).await.is_err());
    }
}
