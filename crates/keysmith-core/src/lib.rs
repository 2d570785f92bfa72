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
//! # async fn main() -> keysmith_core::Result<()> {
//! use keysmith_core::sequence::{self, Sequence};
//! use keysmith_core::store::{self, SequenceSpec};
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
//! # async fn main() -> keysmith_core::Result<()> {
//! use keysmith_core::numbers::{self, Numbering};
//! use keysmith_core::sequence::Sequence;
//! use keysmith_core::store::{self, SequenceSpec};
//! use keysmith_core::AnySequence;
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
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod any_sequence;
mod backoff;
mod clock;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod driver;
mod error;
pub mod fence;
pub mod ids;
mod name;
pub mod names;
mod numbering;
pub mod numbers;
pub mod pool;
pub mod secrets;
pub mod sequence;
pub mod shard_key;
pub mod store;
pub mod top;
pub mod verify;

pub use any_sequence::{AnySequence, Values};
pub use backoff::DEFAULT_RETRY_BUDGET;
pub(crate) use error::closest_names;
pub use error::{Error, FenceAdvice, HINT_CANDIDATES, Result};
pub use name::{MAX_NAME_BYTES, prefix_end, validate_name};
