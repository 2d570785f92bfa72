//! keysmith hands out unique keys for databases and services.
//!
//! The main type is [`sequence::Sequence`]: a handle on a named, durable
//! sequence in a [`store::Store`] (an SQLite file by default, PostgreSQL, or
//! etcd). Values are reserved in the store a block at a time, durably, and
//! handed out from memory; no value is ever handed out twice, across threads,
//! processes, hosts, crashes and restarts, and the values one handle returns
//! increase.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> keysmith::Result<()> {
//! use keysmith::sequence::{self, Sequence};
//! use keysmith::store::{self, SequenceSpec};
//!
//! // "sqlite://keysmith.db" in real use; memory:// keeps the example clean.
//! let store = store::open("memory://").await?;
//! sequence::create(&*store, &SequenceSpec::new("orders")).await?;
//!
//! let orders = Sequence::builder().store(store).name("orders").block(100).build().await?;
//! let first = orders.next().await?;
//! let more = orders.next_n(3).await?;
//! assert_eq!(first, 1);
//! assert_eq!(more, vec![2, 3, 4]);
//!
//! // Hands the unused rest of the block back, since no one reserved since.
//! orders.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A front end that serves any sequence by name, plain or numbered (a
//! period, a format, bit-reversed values: see [`numbers`]), opens it with
//! [`AnySequence::open`], which reads the kind with the row: two store calls
//! either way.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> keysmith::Result<()> {
//! use keysmith::numbers::{self, Numbering};
//! use keysmith::sequence::Sequence;
//! use keysmith::store::{self, SequenceSpec};
//! use keysmith::AnySequence;
//!
//! let store = store::open("memory://").await?;
//! let invoices = Numbering { template: Some("INV-{n:04}".into()), ..Numbering::default() };
//! numbers::create(&*store, &SequenceSpec::new("invoices"), &invoices).await?;
//!
//! let any = AnySequence::open(store, "invoices", Sequence::builder()).await?;
//! assert_eq!(any.next_n(2).await?.texts(), ["INV-0001", "INV-0002"]);
//! # Ok(())
//! # }
//! ```
//!
//! Errors are one enum, [`Error`], whose variants say what the caller can do.
//!
//! # Crates
//!
//! This crate is a facade: [`keysmith_core`] holds the store contract,
//! handles and errors, and one crate per store holds all that talks to it
//! (`keysmith-sqlite`, `keysmith-postgres`, `keysmith-mysql`,
//! `keysmith-etcd`), each behind a cargo feature of the same name here.
//! Every path of the core is re-exported unchanged; what this crate adds is
//! what needs the drivers: [`store::open`] (a store from a URL),
//! [`sequence::adopt`] and [`sequence::import`] (a source database from a
//! URL) and [`shard_set`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use keysmith_core::*;

mod registry;
#[cfg(all(feature = "sqlite", feature = "postgres"))]
pub mod shard_set;

pub mod store {
    //! The Store contract and its backends: everything of
    //! [`keysmith_core::store`], the backends this build holds (one module
    //! per cargo feature: [`sqlite`], [`postgres`], [`mysql`], [`etcd`]) and
    //! [`open`], which picks one from a URL.
    pub use keysmith_core::store::*;
    #[cfg(feature = "etcd")]
    pub use keysmith_etcd as etcd;
    #[cfg(feature = "mysql")]
    pub use keysmith_mysql as mysql;
    #[cfg(feature = "postgres")]
    pub use keysmith_postgres as postgres;
    #[cfg(feature = "sqlite")]
    pub use keysmith_sqlite as sqlite;

    pub use crate::registry::open;
    /// The conformance suite's old path: it moved out of `store` to
    /// [`crate::conformance`], beside the contract rather than inside it.
    #[cfg(feature = "conformance")]
    pub use keysmith_core::conformance;
}

pub mod sequence {
    //! Named durable sequences: everything of [`keysmith_core::sequence`],
    //! and [`adopt`] and [`import`], which open their source database from a
    //! URL with this build's drivers.
    pub use keysmith_core::sequence::*;

    pub use crate::registry::{adopt, import, open_source};
}
