//! Named, durable, increasing sequences.
