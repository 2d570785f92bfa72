//! Throwaway PostgreSQL.
