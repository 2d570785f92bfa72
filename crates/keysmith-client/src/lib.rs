//! A Rust client of the keysmith HTTP service.
//!
//! ```no_run
//! # async fn f() -> keysmith_client::Result<()> {
//! use keysmith_client::{Client, Token};
//! let client = Client::builder()
//!     .url("https://ids-1.example:7878")
//!     .url("https://ids-2.example:7878")
//!     .token(Token::from_file("/etc/myapp/keysmith-token".as_ref())?)
//!     .ca_file("/etc/myapp/keysmith-ca.pem")
//!     .build()?;
//! let orders = client.sequence("team-a/orders", None)?;
//! let id = orders.next().await?;
//! orders.close().await?;
//! # Ok(()) }
//! ```
//!
//! - [`Client`]: one method per route; failover across the URLs given and
//!   to the leader a 421 names; typed [`Error`]s; a deadline per call.
//! - [`Sequence`]: values from blocks leased with `POST .../reserve`,
//!   handed out locally, the next block prefetched.
//! - [`blocking`]: the same without an async runtime.
//!
//! No message, `Debug` output or log line holds the token or a lease token.
//! The request and response objects are the HTTP API's; sequence objects
//! are read into the library's own types (`keysmith_core::sequence::SequenceInfo`,
//! `keysmith_core::numbers::Numbering`), which the server serializes.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod blocking;
mod client;
mod error;
mod sequence;
mod token;

pub use client::{
    Client, ClientBuilder, DEFAULT_DEADLINE, Lease, LeaseToken, SequenceView, Ticket, WorkerLease,
    encode_segment,
};
pub use error::{Error, Result};
pub use http::Method;
pub use sequence::{DEFAULT_BLOCK, Sequence};
pub use token::Token;
