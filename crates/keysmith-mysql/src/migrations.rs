//! The schema's migrations: the statements that take a store from each
//! version to the next.

/// Migrations, in order: migration `i` takes the schema from version `i` to
/// `i + 1`; each is a list of statements, every one safe to run twice
/// (`CREATE TABLE IF NOT EXISTS`; an `ALTER TABLE ... ADD COLUMN` whose
/// column is there already fails with `ER_DUP_FIELDNAME`, which
/// `migrate_locked` takes as done: one such statement is one atomic DDL).
///
/// Names are `VARBINARY(512)` (a name is at most 512 bytes): compared and
/// ordered byte by byte, with no collation or trailing-space rules. `CHECK`
/// constraints are enforced by MySQL 8.0.16+ and MariaDB 10.2+; their
/// names are unique per database, so they carry the table's.
pub(super) const MIGRATIONS: &[&[&str]] = &[
    &[
        // Sequences. `last_start` was written by an earlier one-statement
        // reservation (the first value of the range its UPDATE reserved);
        // nothing writes it now, and the column stays for stores made then.
        "CREATE TABLE IF NOT EXISTS keysmith_sequences (
        name        VARBINARY(512) NOT NULL PRIMARY KEY,
        next_value  BIGINT NOT NULL,
        start_value BIGINT NOT NULL,
        max_value   BIGINT NOT NULL,
        block       BIGINT NOT NULL,
        version     BIGINT NOT NULL,
        last_start  BIGINT NULL,
        CONSTRAINT keysmith_sequences_bounds CHECK (
            start_value >= 0 AND start_value <= max_value
            AND max_value <= 9223372036854775806
            AND next_value >= 0 AND next_value - 1 <= max_value),
        CONSTRAINT keysmith_sequences_block CHECK (block BETWEEN 1 AND 1099511627776),
        CONSTRAINT keysmith_sequences_version CHECK (version >= 1)
    ) ENGINE=InnoDB",
        // What clean closes and alterations reported (see SequenceCounts).
        "CREATE TABLE IF NOT EXISTS keysmith_sequence_counts (
        name          VARBINARY(512) NOT NULL PRIMARY KEY,
        handed_back   BIGINT NOT NULL,
        handed_out    BIGINT NOT NULL,
        abandoned     BIGINT NOT NULL,
        skipped       BIGINT NOT NULL,
        mark_at       BIGINT NULL,
        mark_reserved BIGINT NULL,
        prev_at       BIGINT NULL,
        prev_reserved BIGINT NULL,
        CONSTRAINT keysmith_sequence_counts_seq FOREIGN KEY (name)
            REFERENCES keysmith_sequences (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        // Pools: one member per slot; slot s starts as start + s, and a swap
        // replaces `take` by `take + size` in the same slot.
        "CREATE TABLE IF NOT EXISTS keysmith_pools (
        name        VARBINARY(512) NOT NULL PRIMARY KEY,
        start_value BIGINT NOT NULL,
        size        BIGINT NOT NULL,
        CONSTRAINT keysmith_pools_size CHECK (size >= 0)
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_pool_members (
        pool  VARBINARY(512) NOT NULL,
        slot  BIGINT NOT NULL,
        value BIGINT NOT NULL,
        PRIMARY KEY (pool, slot),
        UNIQUE KEY keysmith_pool_members_value (pool, value),
        CONSTRAINT keysmith_pool_members_pool FOREIGN KEY (pool)
            REFERENCES keysmith_pools (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_pool_marks (
        name       VARBINARY(512) NOT NULL PRIMARY KEY,
        mark_at    BIGINT NULL,
        mark_value BIGINT NULL,
        prev_at    BIGINT NULL,
        prev_value BIGINT NULL,
        CONSTRAINT keysmith_pool_marks_pool FOREIGN KEY (name)
            REFERENCES keysmith_pools (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        // Worker-id leases (workers.rs). `until_ms` is the floor and outlives
        // the lease; `expires_at` is in ms by the server's clock.
        "CREATE TABLE IF NOT EXISTS keysmith_workers (
        grp        VARBINARY(512) NOT NULL,
        worker     BIGINT NOT NULL,
        fence      BIGINT NOT NULL,
        holder     VARCHAR(1024) NOT NULL,
        until_ms   BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (grp, worker),
        CONSTRAINT keysmith_workers_worker CHECK (worker >= 0),
        CONSTRAINT keysmith_workers_fence CHECK (fence >= 1)
    ) ENGINE=InnoDB",
        // Numbered sequences (numbers.rs): settings, counters per period, open
        // tickets (token NULL once released; expires_at in ms, server clock).
        "CREATE TABLE IF NOT EXISTS keysmith_numbering (
        name           VARBINARY(512) NOT NULL PRIMARY KEY,
        settings       TEXT NOT NULL,
        current_period BIGINT NOT NULL,
        CONSTRAINT keysmith_numbering_seq FOREIGN KEY (name)
            REFERENCES keysmith_sequences (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_number_counters (
        name       VARBINARY(512) NOT NULL,
        period     BIGINT NOT NULL,
        next_value BIGINT NOT NULL,
        PRIMARY KEY (name, period),
        CONSTRAINT keysmith_number_counters_seq FOREIGN KEY (name)
            REFERENCES keysmith_numbering (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS keysmith_tickets (
        name       VARBINARY(512) NOT NULL,
        period     BIGINT NOT NULL,
        value      BIGINT NOT NULL,
        token      VARBINARY(512) NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (name, period, value),
        CONSTRAINT keysmith_tickets_seq FOREIGN KEY (name)
            REFERENCES keysmith_numbering (name) ON DELETE CASCADE
    ) ENGINE=InnoDB",
    ],
    // 2: generations (store/sequences.rs, `SequenceRow::fence`): the server a
    // row was last written on (MySQL `@@server_uuid`, MariaDB `@@server_id` and
    // `@@gtid_domain_id`), each sequence's failover margin and what was skipped
    // at generation changes; pools and worker ids record theirs too.
    &[
        "ALTER TABLE keysmith_sequences
         ADD COLUMN generation VARCHAR(255) NULL,
         ADD COLUMN failover_skip BIGINT NOT NULL DEFAULT 1000000,
         ADD COLUMN failover_skip_set BOOLEAN NOT NULL DEFAULT FALSE,
         ADD COLUMN failover_skipped BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE keysmith_pools ADD COLUMN generation VARCHAR(255) NULL",
        "ALTER TABLE keysmith_workers ADD COLUMN generation VARCHAR(255) NULL",
    ],
    // 3: a pool's residue class (store/pools.rs): the pool keeps its members
    // as slots of the class (member m is the value m * increment + offset)
    // and every process reads the class from here. Both NULL: none, as every
    // older pool reads. One statement: both columns or neither.
    &["ALTER TABLE keysmith_pools
         ADD COLUMN class_increment BIGINT NULL,
         ADD COLUMN class_offset BIGINT NULL,
         ADD CONSTRAINT keysmith_pools_class CHECK (
             (class_increment IS NULL) = (class_offset IS NULL)
             AND (class_increment IS NULL
                  OR (class_increment >= 2 AND class_offset >= 0
                      AND class_offset < class_increment)))"],
    // 4: tombstones of dropped sequences and pools (store/tombstones.rs):
    // bounds above every value a dropped object of a name handed out, so
    // that creating the name again continues above them. Creates and drops
    // of a name lock its row first (an upsert, then a locking read); a drop
    // raises it (GREATEST) in the transaction that deletes. Objects dropped
    // before this migration left none.
    &["CREATE TABLE IF NOT EXISTS keysmith_tombstones (
        kind          VARBINARY(16) NOT NULL,
        name          VARBINARY(512) NOT NULL,
        high_water    BIGINT NOT NULL,
        reversed_next BIGINT NOT NULL,
        PRIMARY KEY (kind, name)
    ) ENGINE=InnoDB"],
    // 5: lives of a name (store/tombstones.rs, "Lives of a name"): each row
    // records its life, `incarnation` (a sequence's first version, above
    // every version an earlier life of its name reached), and a tombstone
    // the largest version a dropped life reached. 0 for rows and tombstones
    // from before: their lives are unknown, and the next create of a name
    // dropped before starts at incarnation 1. One statement per table: a
    // column that a statement cut short already added is taken as done on
    // the next open (`ER_DUP_FIELDNAME`, see `migrate_locked`).
    &[
        "ALTER TABLE keysmith_sequences ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE keysmith_pools ADD COLUMN incarnation BIGINT NOT NULL DEFAULT 0",
        "ALTER TABLE keysmith_tombstones ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
    ],
];
