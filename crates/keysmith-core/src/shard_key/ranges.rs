//! Identity ranges: one block of ids per shard.

use std::ops::RangeInclusive;
use std::sync::Arc;

use serde::Serialize;

use async_trait::async_trait;

use super::{Id, ShardKey};
use crate::sequence::Sequence;
use crate::store::{MAX_VALUE, SequenceRow, SequenceSpec, Store};
use crate::{Error, Result};

/// The keysmith store in each shard's own database: what
/// [`ShardRanges::open_shard_sequence`] takes a shard's store from. The
/// `keysmith` crate's `shard_set::ShardSet` implements it (it needs the
/// SQLite and PostgreSQL drivers).
#[async_trait]
pub trait ShardStores: Send + Sync {
    /// The store in shard `shard`'s database, after checking that the
    /// database records `shard` as its id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `shard` is not in the set or its
    /// database records another id or none (naming both);
    /// [`Error::Unavailable`] when it cannot be reached.
    async fn open_store(&self, shard: u16) -> Result<Arc<dyn Store>>;
}

/// Distinct identity ranges per shard: shard `s` owns the ids
/// `base + s * size ..= base + (s + 1) * size - 1`, for `shards` shards.
///
/// Ids of different shards never collide, so data sets merge without
/// conflicts, and the shard of an id is `(id - base) / size`. Each shard
/// draws its ids from its own sequence in the store, created with
/// [`create_sequence`](Self::create_sequence): that sequence hands out the
/// shard's global ids directly and fails with [`Error::Exhausted`] at the end
/// of the range, never spilling into the next shard.
///
/// Construction checks that every range fits below
/// [`MAX_VALUE`], so no later arithmetic can overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ShardRanges {
    base: i64,
    size: i64,
    shards: u32,
}

/// The most shards a layout may have: every 16-bit shard id.
const MAX_SHARDS: u32 = 1 << 16;

impl ShardRanges {
    /// Ranges of `size` ids for shards `0..shards`, starting at `base`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `base` is negative, `size` is below 1,
    /// `shards` is not in `1..=65536`, or the last range would end above
    /// [`MAX_VALUE`] (the message gives the largest size that fits).
    pub fn new(base: i64, size: i64, shards: u32) -> Result<ShardRanges> {
        if base < 0 {
            return Err(Error::invalid(format!(
                "the base of shard ranges must be 0 or more, got {base}"
            )));
        }
        if size < 1 {
            return Err(Error::invalid(format!(
                "the size of a shard range must be 1 or more, got {size}"
            )));
        }
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(Error::invalid(format!(
                "the number of shards must be between 1 and {MAX_SHARDS} (shard ids are 16 bits), got {shards}"
            )));
        }
        let last = i64::from(shards)
            .checked_mul(size)
            .and_then(|n| n.checked_add(base))
            .and_then(|n| n.checked_sub(1));
        match last {
            Some(last) if last <= MAX_VALUE => Ok(ShardRanges { base, size, shards }),
            _ => Err(Error::invalid(format!(
                "{shards} shard ranges of {size} ids from {base} do not fit below {MAX_VALUE}; use a size of at most {}",
                (MAX_VALUE - base + 1) / i64::from(shards)
            ))),
        }
    }

    /// The first id of shard 0.
    pub fn base(&self) -> i64 {
        self.base
    }

    /// The number of ids per shard.
    pub fn size(&self) -> i64 {
        self.size
    }

    /// The number of shards (shard ids `0..shards`).
    pub fn shards(&self) -> u32 {
        self.shards
    }

    fn check_shard(&self, shard: u16) -> Result<i64> {
        if u32::from(shard) < self.shards {
            Ok(i64::from(shard))
        } else {
            Err(Error::invalid(format!(
                "shard {shard} is outside these ranges: there are {} shards, 0 to {}",
                self.shards,
                self.shards - 1
            )))
        }
    }

    /// The ids shard `shard` owns.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `shard` is not below [`shards`](Self::shards).
    pub fn range(&self, shard: u16) -> Result<RangeInclusive<i64>> {
        let s = self.check_shard(shard)?;
        // Fits: checked in new() for the last shard.
        let start = self.base + s * self.size;
        Ok(start..=start + self.size - 1)
    }

    /// The global id of the `local`-th id (0-based) of `shard`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `shard` is out of range or `local` is
    /// not in `0..size`.
    pub fn global_id(&self, shard: u16, local: i64) -> Result<i64> {
        let range = self.range(shard)?;
        if !(0..self.size).contains(&local) {
            return Err(Error::invalid(format!(
                "local id {local} is outside shard {shard}'s range of {} ids (0 to {})",
                self.size,
                self.size - 1
            )));
        }
        Ok(range.start() + local)
    }

    /// The shard and the local (0-based) position of a global id: the
    /// inverse of [`global_id`](Self::global_id).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the id is in no shard's range.
    pub fn locate(&self, id: i64) -> Result<(u16, i64)> {
        let end = self.base + i64::from(self.shards) * self.size; // fits, see new()
        if !(self.base..end).contains(&id) {
            return Err(Error::invalid(format!(
                "id {id} is in no shard's range: these ranges cover {} to {}",
                self.base,
                end - 1
            )));
        }
        let offset = id - self.base;
        let shard = u16::try_from(offset / self.size)
            .map_err(|_| Error::invalid(format!("id {id} maps past shard 65535")))?;
        Ok((shard, offset % self.size))
    }

    /// The shard that owns `id`.
    ///
    /// # Errors
    /// As [`locate`](Self::locate).
    pub fn shard_of(&self, id: i64) -> Result<u16> {
        self.locate(id).map(|(shard, _)| shard)
    }

    /// The compound key of a global id: its shard from the ranges, the id
    /// as an `i64` record id.
    ///
    /// # Errors
    /// As [`locate`](Self::locate) and [`ShardKey::new`].
    pub fn shard_key(&self, origin: char, id: i64) -> Result<ShardKey> {
        ShardKey::new(origin, self.shard_of(id)?, Id::I64(id))
    }

    /// The name of shard `shard`'s sequence: `PREFIX.shard-N`.
    pub fn sequence_name(prefix: &str, shard: u16) -> String {
        format!("{prefix}.shard-{shard}")
    }

    /// The spec of shard `shard`'s sequence: named by
    /// [`sequence_name`](Self::sequence_name), start and max the shard's
    /// range, default block `block`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a shard out of range or a bad block;
    /// [`Error::InvalidName`] for a bad prefix.
    pub fn sequence_spec(&self, prefix: &str, shard: u16, block: i64) -> Result<SequenceSpec> {
        let range = self.range(shard)?;
        let spec = SequenceSpec {
            name: Self::sequence_name(prefix, shard),
            start: *range.start(),
            max: *range.end(),
            block,
            ..SequenceSpec::new("")
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Creates shard `shard`'s sequence in `store`, or accepts the one there
    /// if it covers exactly the same range (so running this twice is
    /// harmless). Returns the row the store holds.
    ///
    /// # Errors
    /// As [`sequence_spec`](Self::sequence_spec);
    /// [`Error::InvalidArgument`] if a sequence of that name exists with
    /// another range (the message gives both); what the store fails with.
    pub async fn create_sequence(
        &self,
        store: &dyn Store,
        prefix: &str,
        shard: u16,
        block: i64,
    ) -> Result<SequenceRow> {
        let spec = self.sequence_spec(prefix, shard, block)?;
        let row = crate::sequence::create_or_get(store, &spec).await?;
        // A start above the range's: created again after a drop, it
        // continued above the values the dropped one handed out, in range.
        if row.max == spec.max && (spec.start..=spec.max).contains(&row.start) {
            Ok(row)
        } else {
            Err(Error::invalid(format!(
                "sequence {:?} exists with the range {} to {}, not shard {shard}'s {} to {}; drop it or use another prefix",
                spec.name, row.start, row.max, spec.start, spec.max
            )))
        }
    }

    /// A [`Sequence`] handle that hands out shard `shard`'s global ids,
    /// `block` at a time. The sequence is created first if it is missing
    /// (see [`create_sequence`](Self::create_sequence)). Its values stay in
    /// the shard's range: past the end, `next()` fails with
    /// [`Error::Exhausted`].
    ///
    /// # Errors
    /// As [`create_sequence`](Self::create_sequence) and
    /// [`SequenceBuilder::build`](crate::sequence::SequenceBuilder::build).
    pub async fn open_sequence(
        &self,
        store: Arc<dyn Store>,
        prefix: &str,
        shard: u16,
        block: i64,
    ) -> Result<Sequence> {
        let row = self
            .create_sequence(store.as_ref(), prefix, shard, block)
            .await?;
        Sequence::builder()
            .store(store)
            .name(row.name)
            .block(block)
            .build()
            .await
    }

    /// [`open_sequence`](Self::open_sequence) in shard `shard`'s own
    /// database, taken from a shard set: the sequence lives beside the
    /// shard's data, and the database must record `shard` as its id (see
    /// [`ShardStores::open_store`]; the `keysmith` crate's `ShardSet` is
    /// one), so
    /// a configuration that swaps two databases cannot hand out one shard's
    /// ids in the other's database.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `shard` is outside these ranges, not in
    /// the set, or its database records another id or none (naming both);
    /// as [`open_sequence`](Self::open_sequence).
    pub async fn open_shard_sequence(
        &self,
        set: &dyn ShardStores,
        prefix: &str,
        shard: u16,
        block: i64,
    ) -> Result<Sequence> {
        self.check_shard(shard)?;
        let store = set.open_store(shard).await?;
        self.open_sequence(store, prefix, shard, block).await
    }

    /// Checks that `id`, read from shard `shard`, lies in that shard's
    /// range: an id of another shard's range in this database means data
    /// was written through a misconfigured connection.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the id, the shard it was read from
    /// and the shard that owns it (or saying no shard does).
    pub fn check_owner(&self, shard: u16, id: i64) -> Result<()> {
        let owner = self.shard_of(id)?;
        if owner == shard {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "id {id} was read from shard {shard}, but it lies in shard {owner}'s range; the data or the configuration of shards {shard} and {owner} is mixed up"
            )))
        }
    }

    /// [`create_sequence`](Self::create_sequence) for every shard, in order.
    ///
    /// # Errors
    /// The first error; sequences created before it stay.
    pub async fn create_sequences(
        &self,
        store: &dyn Store,
        prefix: &str,
        block: i64,
    ) -> Result<Vec<SequenceRow>> {
        let mut rows = Vec::with_capacity(self.shards as usize);
        for shard in 0..self.shards {
            // shards <= 65536, so every shard id fits in u16.
            let shard = u16::try_from(shard).map_err(|_| Error::invalid("shard id past 65535"))?;
            rows.push(self.create_sequence(store, prefix, shard, block).await?);
        }
        Ok(rows)
    }
}
