//! The same client for code without an async runtime: each call runs on a
//! small runtime the client owns.

use std::sync::Arc;

use serde_json::Value;

use crate::{ClientBuilder, Result};

/// The runtime a blocking client owns; shut down in the background when
/// the last client or handle goes (also from inside another runtime, where
/// dropping a runtime the ordinary way would panic).
struct Runtime(Option<tokio::runtime::Runtime>);

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Runtime {
    fn handle(&self) -> tokio::runtime::Handle {
        self.0
            .as_ref()
            .expect("the runtime lives until the last handle is dropped")
            .handle()
            .clone()
    }

    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.0
            .as_ref()
            .expect("the runtime lives until the last handle is dropped")
            .block_on(f)
    }
}

/// A blocking [`crate::Client`]. Must not be called from inside an async
/// runtime (use the async client there).
#[derive(Clone)]
pub struct Client {
    rt: Arc<Runtime>,
    inner: crate::Client,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Client {
    /// A blocking client from `builder`, with a runtime of its own (one
    /// worker thread: blocks are prefetched while the caller works).
    ///
    /// # Errors
    /// As [`ClientBuilder::build`], and [`crate::Error::Setup`] when no
    /// runtime can be started.
    pub fn new(builder: ClientBuilder) -> Result<Client> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("keysmith-client")
            .enable_all()
            .build()
            .map_err(|e| crate::Error::Setup(format!("cannot start the client's runtime: {e}")))?;
        let inner = {
            let _in = rt.enter();
            builder.build()?
        };
        Ok(Client {
            rt: Arc::new(Runtime(Some(rt))),
            inner,
        })
    }

    /// The async client inside.
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// [`crate::Client::sequence`], blocking.
    ///
    /// # Errors
    /// As [`crate::Client::sequence`].
    pub fn sequence(&self, name: &str, block: Option<i64>) -> Result<Sequence> {
        let inner = self.inner.sequence(name, block)?;
        // Its prefetches run on this client's runtime.
        inner.spawn_on(self.rt.handle());
        Ok(Sequence {
            rt: self.rt.clone(),
            inner,
        })
    }

    /// [`crate::Client::next_values`], blocking.
    ///
    /// # Errors
    /// As [`crate::Client::next_values`].
    pub fn next_values(&self, name: &str, count: i64) -> Result<Vec<Value>> {
        self.rt.block_on(self.inner.next_values(name, count))
    }

    /// [`crate::Client::take_ticket`], blocking.
    ///
    /// # Errors
    /// As [`crate::Client::take_ticket`].
    pub fn take_ticket(&self, name: &str, ttl_secs: Option<u64>) -> Result<crate::Ticket> {
        self.rt.block_on(self.inner.take_ticket(name, ttl_secs))
    }

    /// [`crate::Client::commit_ticket`], blocking.
    ///
    /// # Errors
    /// As [`crate::Client::commit_ticket`].
    pub fn commit_ticket(&self, name: &str, ticket: &str) -> Result<Value> {
        self.rt.block_on(self.inner.commit_ticket(name, ticket))
    }

    /// [`crate::Client::next_ids`], blocking.
    ///
    /// # Errors
    /// As [`crate::Client::next_ids`].
    pub fn next_ids(&self, count: i64, uuidv7: bool) -> Result<Vec<Value>> {
        self.rt.block_on(self.inner.next_ids(count, uuidv7))
    }

    /// Runs any async call of the client to completion, e.g.
    /// `c.run(|c| c.show_sequence("orders"))`.
    pub fn run<'a, F, T>(&'a self, f: impl FnOnce(&'a crate::Client) -> F) -> T
    where
        F: std::future::Future<Output = T>,
    {
        self.rt.block_on(f(&self.inner))
    }
}

/// A blocking [`crate::Sequence`]; it keeps the client's runtime alive.
#[derive(Clone, Debug)]
pub struct Sequence {
    rt: Arc<Runtime>,
    inner: crate::Sequence,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtime")
    }
}

impl Sequence {
    /// [`crate::Sequence::next`], blocking.
    ///
    /// # Errors
    /// As [`crate::Sequence::next`].
    pub fn next(&self) -> Result<i64> {
        // Within a block: no runtime entered, no lock (a reached prefetch
        // mark spawns the next lease on the client's runtime).
        if let Some(v) = self.inner.try_next() {
            return Ok(v);
        }
        self.rt.block_on(self.inner.next())
    }

    /// [`crate::Sequence::next_n`], blocking.
    ///
    /// # Errors
    /// As [`crate::Sequence::next_n`].
    pub fn next_n(&self, n: i64) -> Result<Vec<i64>> {
        self.rt.block_on(self.inner.next_n(n))
    }

    /// [`crate::Sequence::close`], blocking.
    ///
    /// # Errors
    /// As [`crate::Sequence::close`].
    pub fn close(&self) -> Result<()> {
        self.rt.block_on(self.inner.close())
    }
}
