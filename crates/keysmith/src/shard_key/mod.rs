//! Shard keys: compound record keys that say which shard holds the record.
