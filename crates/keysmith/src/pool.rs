//! The value pool: low-contention allocation without a hot row.
