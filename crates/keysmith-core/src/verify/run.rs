//! One run's moving parts: the scratch sequence and pool, the [`Worker`]
//! each process opens, the [`Value`] lines it reports, and the look at the
//! store after the run.

use super::*;

/// The scratch sequence and pool of one run: both have the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Scratch {
    /// `keysmith-verify-<16 hex digits>`, the name of the sequence and of
    /// the pool.
    pub name: String,
    /// The pool's first number.
    pub pool_start: i64,
    /// The pool's size.
    pub pool_size: i64,
}

/// Creates a scratch sequence (block [`SCRATCH_BLOCK`]) and a scratch pool
/// ([`SCRATCH_POOL_SIZE`] numbers from [`SCRATCH_POOL_START`]) under a fresh
/// random name.
///
/// # Errors
/// What the store fails with; then nothing is left behind (a sequence
/// created before the pool failed is removed again, as far as the store
/// lets it).
pub async fn create_scratch(store: &dyn Store) -> Result<Scratch> {
    let name = format!("keysmith-verify-{:016x}", rand::random::<u64>());
    let spec = SequenceSpec {
        block: SCRATCH_BLOCK,
        ..SequenceSpec::new(name.clone())
    };
    sequence::create(store, &spec).await?;
    if let Err(e) = pool::create(
        store,
        &PoolSpec {
            name: name.clone(),
            start: SCRATCH_POOL_START,
            size: SCRATCH_POOL_SIZE,
            residue: None,
            start_below_dropped: false,
        },
    )
    .await
    {
        let _ = sequence::remove(store, &name).await;
        return Err(e);
    }
    Ok(Scratch {
        name,
        pool_start: SCRATCH_POOL_START,
        pool_size: SCRATCH_POOL_SIZE,
    })
}

/// Drops the scratch sequence and pool. Tries both, also when the first
/// fails.
///
/// # Errors
/// The first failure (of the sequence, then of the pool).
pub async fn remove_scratch(store: &dyn Store, scratch: &Scratch) -> Result<()> {
    let s = sequence::remove(store, &scratch.name).await;
    let p = pool::remove(store, &scratch.name).await;
    s.and(p)
}

/// One value a worker reports: where it came from and the value. Its text
/// form, one a line, is `s VALUE` for the sequence and `p VALUE` for the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Value {
    /// A value of the scratch sequence.
    Sequence(i64),
    /// A number of the scratch pool.
    Pool(i64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Sequence(v) => write!(f, "s {v}"),
            Value::Pool(v) => write!(f, "p {v}"),
        }
    }
}

impl std::str::FromStr for Value {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::invalid(format!("{s:?} is not a reported value (`s N` or `p N`)"));
        let (tag, n) = s.split_once(' ').ok_or_else(bad)?;
        let n: i64 = n.parse().map_err(|_| bad())?;
        match tag {
            "s" => Ok(Value::Sequence(n)),
            "p" => Ok(Value::Pool(n)),
            _ => Err(bad()),
        }
    }
}

/// What one worker process does: takes a sequence value and a pool number
/// in turn, and hands each to the caller as soon as it is durable.
#[derive(Debug)]
pub struct Worker {
    sequence: Sequence,
    pool: ValuePool,
}

impl Worker {
    /// Opens handles on the scratch sequence and pool called `name`, with
    /// the default strategy, block and sample.
    ///
    /// # Errors
    /// What opening the handles fails with ([`Error::NotFound`] when the
    /// scratch objects are gone).
    pub async fn open(store: Arc<dyn Store>, name: &str) -> Result<Worker> {
        let sequence = Sequence::builder()
            .store(store.clone())
            .name(name)
            .build()
            .await?;
        let pool = ValuePool::builder().store(store).name(name).build().await?;
        Ok(Worker { sequence, pool })
    }

    /// Takes [`SEQUENCE_VALUES_PER_STEP`] sequence values (with
    /// [`Sequence::next`]) and one pool number (with
    /// [`ValuePool::take_each`]), giving each to `report` as soon as it is
    /// returned, so a process that reports what it is given and then dies
    /// loses at most the value in flight.
    ///
    /// # Errors
    /// The first error of the sequence, the pool or `report`.
    pub async fn step<E: From<Error>>(
        &self,
        mut report: impl FnMut(Value) -> Result<(), E>,
    ) -> Result<(), E> {
        for _ in 0..SEQUENCE_VALUES_PER_STEP {
            report(Value::Sequence(self.sequence.next().await?))?;
        }
        self.pool.take_each(1, |v| report(Value::Pool(v))).await
    }

    /// Closes the sequence handle, handing its unused tail back.
    ///
    /// # Errors
    /// As [`Sequence::close`].
    pub async fn close(&self) -> Result<()> {
        self.sequence.close().await.map(|_| ())
    }
}

/// Reads the store after a run and records in `ledger` what it finds: a new
/// handle on the scratch sequence must get a value above every sequence
/// value reported ([`Ledger::check_sequence_resumes`]); the scratch pool's
/// members must be a valid pool with every reported number below its
/// residue's member, and at most as many holes as kills
/// ([`Ledger::check_pool`]).
///
/// Call it after every worker has ended and every reported value is in the
/// ledger. A store error is recorded as a violation ([`Violation::Error`]):
/// the run cannot pass without these checks.
pub async fn check_after_run(store: Arc<dyn Store>, scratch: &Scratch, ledger: &mut Ledger) {
    let resumed = async {
        let seq = Sequence::builder()
            .store(store.clone())
            .name(&scratch.name)
            .block(1)
            .build()
            .await?;
        let next = seq.next().await?;
        seq.close().await?;
        Ok::<_, Error>(next)
    };
    match resumed.await {
        Ok(next) => ledger.check_sequence_resumes(next),
        Err(e) => ledger.error(format!("cannot take a value after the run: {e}")),
    }
    match pool::members(&*store, &scratch.name).await {
        Ok(members) => ledger.check_pool(scratch.pool_start, scratch.pool_size, &members),
        Err(e) => ledger.error(format!("cannot read the pool after the run: {e}")),
    }
}
