//! The pool algorithms of the SQL stores (PostgreSQL, MySQL), written once
//! over the statements each dialect runs, the way [`crate::store::NumbersTx`]
//! carries the numbered sequences' fence.
//!
//! - [`sample_members_on`]: a sample as one statement, drawn again while the
//!   statement reports another size than the one the slots were drawn from
//!   (the pool was dropped and created again), over [`PoolReads`];
//! - [`create_pool_in`], [`fence_pool_in`], [`drop_pool_in`]: creating a
//!   pool above its name's tombstone, fencing it (claim, bound check, move),
//!   and dropping it with its tombstone raised, inside one transaction, over
//!   [`PoolTx`];
//! - [`swap_member_with`]: a swap and what the pool's generation then asks
//!   for ([`PoolGeneration`]), over [`PoolSwaps`].
//!
//! A backend keeps its statements and its row decoding; it opens and
//! commits the transactions and takes the connections
//! ([`super::conn::with_conn`]).

use async_trait::async_trait;
use rand::seq::SliceRandom;

use super::remembered::Remembered;
use crate::store::{
    PoolGeneration, PoolRow, PoolSpec, PoolStore, Residue, Tombstone, fence_exhausts,
    fenced_member, pool_fence_rounds, pool_generation, sample_slots,
};
use crate::{Error, Result};

/// How often a sample is drawn again when its statement reports another
/// size than the one its slots were drawn from, before
/// [`Error::Contention`].
pub const POOL_SAMPLE_RERUNS: u32 = 3;

/// The statements of a sample, on one connection of a SQL store: what
/// [`sample_members_on`] runs.
#[async_trait]
pub trait PoolReads: Send {
    /// The pool's size as the store holds it now, or `None` when there is
    /// no such pool.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn pool_size(&mut self, name: &str) -> Result<Option<i64>>;

    /// In one snapshot: the pool's size and the members of `slots` (in any
    /// order), or `None` when there is no such pool. `slots` may be empty.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the store does not answer.
    async fn sample(&mut self, name: &str, slots: &[i64]) -> Result<Option<(i64, Vec<i64>)>>;

    /// [`Error::Corrupt`] naming the store, for tables that hold what
    /// keysmith never writes; `what` says what was found.
    fn corrupt(&self, what: &str) -> Error;
}

/// [`PoolStore::sample_members`] over `reads`: draws `min(k, size)` slots
/// from the size `sizes` remembers (or a read of it) and reads their members
/// in one statement; while the statement reports another size, draws again
/// from that one. The members come back in random order.
///
/// # Errors
/// [`Error::NotFound`] when there is no such pool; [`Error::Contention`]
/// after [`POOL_SAMPLE_RERUNS`] sizes that kept changing; [`Error::Corrupt`]
/// when a drawn slot holds no member; those of [`PoolReads`].
pub async fn sample_members_on<T: PoolReads + ?Sized>(
    reads: &mut T,
    sizes: &Remembered<i64>,
    name: &str,
    k: usize,
) -> Result<Vec<i64>> {
    let mut size = match sizes.get(name) {
        Some(size) => size,
        None => reads
            .pool_size(name)
            .await?
            .ok_or_else(|| Error::not_found("pool", name))?,
    };
    for _ in 0..POOL_SAMPLE_RERUNS {
        let slots = sample_slots(size, k);
        let Some((seen, mut picked)) = reads.sample(name, &slots).await? else {
            sizes.forget(name);
            return Err(Error::not_found("pool", name));
        };
        sizes.remember(name, seen);
        if seen != size {
            size = seen;
            continue;
        }
        if picked.len() != slots.len() {
            return Err(reads.corrupt(&format!(
                "pool {name:?} of size {size} has {} of the {} slots drawn; drop the pool and create it again",
                picked.len(),
                slots.len()
            )));
        }
        // Callers get random order, not slot order.
        picked.shuffle(&mut rand::rng());
        return Ok(picked);
    }
    Err(Error::Contention {
        name: name.to_owned(),
        attempts: POOL_SAMPLE_RERUNS,
    })
}

/// What [`PoolTx::claim_fence`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceClaim {
    /// This caller recorded the store's generation on the pool: it moves the
    /// members of this size and residue class.
    Claimed {
        /// The pool's size.
        size: i64,
        /// The pool's residue class, if any.
        residue: Option<Residue>,
    },
    /// The pool is no longer in the generation asked for: another caller
    /// fenced it (or, where the store cannot tell, it is gone, which the
    /// caller's next statement finds out).
    Fenced,
    /// There is no such pool.
    Missing,
}

/// The statements of creating, fencing and dropping a pool inside one open
/// transaction of a SQL store: what [`create_pool_in`], [`fence_pool_in`]
/// and [`drop_pool_in`] run. An implementation wraps the store and its
/// transaction; nothing it does is committed until the caller commits.
///
/// # Errors
/// Every method: [`Error::Unavailable`] when the store does not answer.
#[async_trait]
pub trait PoolTx: Send {
    /// Locks the tombstone of pool `name` for the rest of the transaction
    /// and reads the name's tombstone over every kind, the sequences' too
    /// (their [`Tombstone::max`]; empty when nothing of that name was
    /// dropped).
    async fn lock_tombstone(&mut self, name: &str) -> Result<Tombstone>;

    /// Raises the tombstone of pool `name`, locked by
    /// [`Self::lock_tombstone`], to `t` (never lowering it).
    async fn raise_tombstone(&mut self, name: &str, t: Tombstone) -> Result<()>;

    /// Writes pool `spec` (stored members: `spec.start` is the first) of
    /// life `incarnation` ([`PoolRow::incarnation`]) in the store's
    /// generation, and its members, slot `s` holding `spec.start + s`.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] when there is a pool of that name.
    async fn insert_pool(&mut self, spec: &PoolSpec, incarnation: u64) -> Result<()>;

    /// The store's current generation.
    async fn generation(&mut self) -> Result<String>;

    /// The pool's row, locked for the rest of the transaction, or `None`.
    async fn lock_pool(&mut self, name: &str) -> Result<Option<PoolRow>>;

    /// The pool's largest member (`None`: it has none).
    async fn top_member(&mut self, name: &str) -> Result<Option<i64>>;

    /// Removes the pool and its members.
    async fn delete_pool(&mut self, name: &str) -> Result<()>;

    /// Records the store's generation on the pool if it is still in
    /// generation `from` (in any, when `None`): of racing fences of one stale
    /// pool, one claims it.
    async fn claim_fence(&mut self, name: &str, from: Option<&str>) -> Result<FenceClaim>;

    /// Adds `by` to every member of the pool.
    async fn move_members(&mut self, name: &str, by: i64) -> Result<()>;
}

/// In `tx`: [`PoolStore::create_pool`]. Raises `spec` above the name's
/// tombstone ([`Tombstone::raise_pool`]), writes the pool and returns its
/// row, with the store's generation.
///
/// # Errors
/// [`Error::InvalidArgument`] when the raised members would pass
/// `i64::MAX`; [`Error::AlreadyExists`]; those of [`PoolTx`].
pub async fn create_pool_in<T: PoolTx + ?Sized>(tx: &mut T, spec: &PoolSpec) -> Result<PoolRow> {
    let dropped = tx.lock_tombstone(&spec.name).await?;
    let raised = dropped.raise_pool(spec)?;
    tx.insert_pool(&raised, dropped.incarnation()).await?;
    let generation = tx.generation().await?;
    Ok(PoolRow {
        name: raised.name,
        start: raised.start,
        size: raised.size,
        generation: Some(generation),
        residue: raised.residue,
        incarnation: dropped.incarnation(),
    })
}

/// In `tx`: moves every member of pool `name` forward by `rounds` rounds and
/// records the store's generation, if the pool is still in generation
/// `from` (any, when `None`; see [`PoolTx::claim_fence`]), or nothing when
/// another caller fenced it. Nothing moves when the largest member would no
/// longer fit.
///
/// # Errors
/// [`Error::NotFound`] when there is no such pool; [`Error::Exhausted`]
/// when a member would pass the largest value (the caller rolls back);
/// those of [`PoolTx`].
pub async fn fence_pool_in<T: PoolTx + ?Sized>(
    tx: &mut T,
    name: &str,
    rounds: i64,
    from: Option<&str>,
) -> Result<()> {
    let (size, residue) = match tx.claim_fence(name, from).await? {
        FenceClaim::Claimed { size, residue } => (size, residue),
        FenceClaim::Fenced => return Ok(()),
        FenceClaim::Missing => return Err(Error::not_found("pool", name)),
    };
    if rounds == 0 {
        // Recording the generation (the claim did) moves nothing: no
        // member row is written or locked.
        return Ok(());
    }
    if let Some(top) = tx.top_member(name).await?
        && fenced_member(top, rounds, size, residue.as_ref()).is_none()
    {
        return Err(fence_exhausts(name, size, residue.as_ref()));
    }
    tx.move_members(name, rounds * size).await
}

/// In `tx`: [`PoolStore::drop_pool`]. Removes the pool and raises its
/// name's tombstone over the values it handed out
/// ([`Tombstone::after_pool_drop`]).
///
/// # Errors
/// [`Error::NotFound`] when there is no such pool; those of [`PoolTx`].
pub async fn drop_pool_in<T: PoolTx + ?Sized>(tx: &mut T, name: &str) -> Result<()> {
    let before = tx.lock_tombstone(name).await?;
    let row = tx
        .lock_pool(name)
        .await?
        .ok_or_else(|| Error::not_found("pool", name))?;
    let highest = tx.top_member(name).await?;
    let generation = tx.generation().await?;
    let t = before.after_pool_drop(&row, highest, &generation);
    tx.raise_tombstone(name, t).await?;
    tx.delete_pool(name).await
}

/// What a swap's statement found out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapSeen {
    /// Whether the member was replaced.
    pub swapped: bool,
    /// The pool's recorded generation and the store's, when the statement
    /// read them; `None` when it did not (the swap stands as it is).
    pub generations: Option<(Option<String>, String)>,
    /// The pool's size, when the statement read it (a fence needs it).
    pub size: Option<i64>,
}

/// A SQL store's swap statement and its pool fence, as
/// [`swap_member_with`] runs them.
#[async_trait]
pub trait PoolSwaps: PoolStore {
    /// In one statement: replaces member `take` of pool `name` by `put`, only
    /// in the pool's generation (or a pool from before generations) and in
    /// life `incarnation` of the name (0: any; a pool from before lives, 0,
    /// in any).
    ///
    /// # Errors
    /// [`Error::NotFound`] when there is no such pool; [`Error::Dropped`]
    /// when the pool is of another life (nothing swapped); [`Error::Corrupt`]
    /// when the pool holds `put` already; [`Error::Unavailable`].
    async fn swap_once(
        &self,
        name: &str,
        incarnation: u64,
        take: i64,
        put: i64,
    ) -> Result<SwapSeen>;

    /// [`fence_pool_in`] in a transaction of its own, committed.
    ///
    /// # Errors
    /// Those of [`fence_pool_in`].
    async fn fence_from(&self, name: &str, rounds: i64, from: Option<&str>) -> Result<()>;
}

/// [`PoolStore::swap_member_in`] over `store` (life `incarnation`, 0: any):
/// the swap, then what [`pool_generation`] says: a pool from before
/// generations records the store's (keeping the swap), a pool of another
/// generation is fenced by [`pool_fence_rounds`] and the swap reports
/// `false`.
///
/// # Errors
/// Those of [`PoolSwaps`] and, for a fence, [`PoolStore::read_pool`].
pub async fn swap_member_with<S: PoolSwaps + ?Sized>(
    store: &S,
    name: &str,
    incarnation: u64,
    take: i64,
    put: i64,
) -> Result<bool> {
    let seen = store.swap_once(name, incarnation, take, put).await?;
    let Some((recorded, current)) = seen.generations else {
        return Ok(seen.swapped);
    };
    match pool_generation(recorded.as_deref(), &current) {
        PoolGeneration::Current => Ok(seen.swapped),
        PoolGeneration::Record => {
            // Moves nothing: records this generation. A pool dropped since
            // the swap has nothing to record; the swap's outcome stands.
            match store.fence_from(name, 0, None).await {
                Ok(()) | Err(Error::NotFound { .. }) => Ok(seen.swapped),
                Err(e) => Err(e),
            }
        }
        PoolGeneration::Fence => {
            let size = match seen.size {
                Some(size) => size,
                None => {
                    store
                        .read_pool(name)
                        .await?
                        .ok_or_else(|| Error::not_found("pool", name))?
                        .size
                }
            };
            store
                .fence_from(name, pool_fence_rounds(size), recorded.as_deref())
                .await?;
            Ok(false)
        }
    }
}
