//! Throwaway etcd: one node or three.
