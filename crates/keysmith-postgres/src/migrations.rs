//! The schema's migrations: the SQL that takes a store from each version to the next.

/// Migrations, in order: migration `i` takes the schema from version `i` to
/// `i + 1`. `{s}` stands for the quoted schema name, `{schema_name}` for the
/// name itself (a-z, 0-9 and _ only: `connect::validate_schema`).
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: sequences and pools.
    //
    // A pool has one member per slot: slot s starts as start + s, and a swap
    // replaces `take` by `take + size` in the same slot, so sampling picks
    // slots (uniform whatever the values) and swapping finds `take` by value.
    //
    // Names use the "C" collation so that ORDER BY name is byte order, the
    // order Rust's String and every other backend use. `last_start` is written
    // only by reserve_atomic: it carries the first value of the range that
    // statement reserved into its RETURNING clause.
    r#"
    CREATE TABLE {s}.sequences (
        name        text COLLATE "C" PRIMARY KEY,
        next        bigint NOT NULL,
        start_value bigint NOT NULL,
        max_value   bigint NOT NULL,
        block       bigint NOT NULL,
        version     bigint NOT NULL,
        last_start  bigint,
        CONSTRAINT sequences_bounds CHECK (
            start_value >= 0 AND start_value <= max_value
            AND max_value <= 9223372036854775806
            AND next >= 0 AND next - 1 <= max_value),
        CONSTRAINT sequences_block CHECK (block BETWEEN 1 AND 1099511627776),
        CONSTRAINT sequences_version CHECK (version >= 1)
    );
    CREATE TABLE {s}.pools (
        name        text COLLATE "C" PRIMARY KEY,
        start_value bigint NOT NULL,
        size        bigint NOT NULL CHECK (size >= 0)
    );
    CREATE TABLE {s}.pool_members (
        pool  text COLLATE "C" NOT NULL REFERENCES {s}.pools (name) ON DELETE CASCADE,
        slot  bigint NOT NULL,
        value bigint NOT NULL,
        PRIMARY KEY (pool, slot),
        UNIQUE (pool, value)
    );
    "#,
    // 2: allocation as SQL functions, so that any SQL client allocates the
    // way keysmith does, from the same rows. `reserve` is the one place the
    // atomic reservation is written: the library's atomic strategy calls it
    // too. A missing sequence raises P0002 (no_data_found), an exhausted one
    // 2200H (sequence_generator_limit_exceeded), a bad count 22023
    // (invalid_parameter_value); never a silent default.
    r#"
    CREATE FUNCTION {s}.reserve(seq text, n bigint,
                               OUT first_value bigint, OUT next_free bigint, OUT row_version bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        cur_next bigint;
        cur_max bigint;
    BEGIN
        IF n IS NULL OR n < 1 OR n > 1099511627776 THEN
            RAISE EXCEPTION 'keysmith: count must be between 1 and 1099511627776, got %', n
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        LOOP
            UPDATE {s}.sequences
            SET last_start = next,
                next = CASE WHEN max_value - next + 1 <= n THEN max_value + 1 ELSE next + n END,
                version = version + 1
            WHERE name = seq AND next <= max_value
            RETURNING last_start, next, version INTO first_value, next_free, row_version;
            IF FOUND THEN
                RETURN;
            END IF;
            SELECT s.next, s.max_value INTO cur_next, cur_max
            FROM {s}.sequences s WHERE s.name = seq FOR SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'keysmith: sequence % does not exist', quote_literal(seq)
                    USING ERRCODE = 'no_data_found',
                          HINT = 'create it first (keysmith create NAME); it is never created silently';
            END IF;
            IF cur_next > cur_max THEN
                RAISE EXCEPTION 'keysmith: sequence % is exhausted: every value up to its maximum % is taken, and values never wrap', quote_literal(seq), cur_max
                    USING ERRCODE = 'sequence_generator_limit_exceeded';
            END IF;
            -- Values were handed back between the update and the read: again.
        END LOOP;
    END
    $fn$;

    CREATE FUNCTION {s}.next_keys(seq text, n bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql AS $fn$
    DECLARE
        r record;
    BEGIN
        SELECT * INTO r FROM {s}.reserve(seq, n);
        IF r.next_free - r.first_value < n THEN
            -- Raising rolls the short reservation back: nothing is lost.
            RAISE EXCEPTION 'keysmith: sequence % has only % values left, % asked for', quote_literal(seq), r.next_free - r.first_value, n
                USING ERRCODE = 'sequence_generator_limit_exceeded';
        END IF;
        RETURN QUERY SELECT generate_series(r.first_value, r.next_free - 1);
    END
    $fn$;

    CREATE FUNCTION {s}.next_key(seq text) RETURNS bigint
    LANGUAGE sql AS $fn$ SELECT first_value FROM {s}.reserve(seq, 1) $fn$;
    "#,
    // 3: what clean closes and alterations reported of each sequence, and
    // its rate marks (see SequenceCounts); the rate marks of each pool. Gone
    // with their sequence or pool.
    r#"
    CREATE TABLE {s}.sequence_counts (
        name          text COLLATE "C" PRIMARY KEY
                      REFERENCES {s}.sequences (name) ON DELETE CASCADE,
        handed_back   bigint NOT NULL,
        handed_out    bigint NOT NULL,
        abandoned     bigint NOT NULL,
        skipped       bigint NOT NULL,
        mark_at       bigint,
        mark_reserved bigint,
        prev_at       bigint,
        prev_reserved bigint
    );
    CREATE TABLE {s}.pool_marks (
        name       text COLLATE "C" PRIMARY KEY
                   REFERENCES {s}.pools (name) ON DELETE CASCADE,
        mark_at    bigint,
        mark_value bigint,
        prev_at    bigint,
        prev_value bigint
    );
    "#,
    // 4: worker-id leases of time-ordered ids (workers.rs). `until_ms` is
    // the floor: every id issued under the worker id lies below it; it
    // outlives the lease. Expiry is by the server's clock_timestamp().
    r#"
    CREATE TABLE {s}.workers (
        grp        text COLLATE "C" NOT NULL,
        worker     bigint NOT NULL CHECK (worker >= 0),
        fence      bigint NOT NULL CHECK (fence >= 1),
        holder     text NOT NULL,
        until_ms   bigint NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (grp, worker)
    );
    "#,
    // 5: numbered sequences: settings, counters per period, open tickets.
    super::numbers::TICKETS_MIGRATION,
    // 6: generations (store/sequences.rs, `SequenceRow::fence`). Every write
    // of `next` records the generation it was written in: the cluster's
    // system identifier and the timeline of the WAL being written, which
    // promotion and point-in-time recovery change. `fence` is the SQL form
    // of `SequenceRow::fence`: a row last written in another generation moves
    // forward by its failover margin, once (a second caller re-evaluates the
    // WHERE on the fenced row and finds the generation current). Every
    // write path calls it first, inside one function: one round trip.
    r#"
    ALTER TABLE {s}.sequences
        ADD COLUMN generation text,
        ADD COLUMN failover_skip bigint NOT NULL DEFAULT 1000000
            CONSTRAINT sequences_failover_skip CHECK (failover_skip BETWEEN 0 AND 1099511627776),
        ADD COLUMN failover_skip_set boolean NOT NULL DEFAULT false,
        ADD COLUMN failover_skipped bigint NOT NULL DEFAULT 0;
    ALTER TABLE {s}.pools ADD COLUMN generation text;
    ALTER TABLE {s}.workers ADD COLUMN generation text;

    -- The system identifier is read from the control file once per session
    -- (it is the server's, and a session stays on one server); the timeline
    -- of the WAL being written, which promotion changes under a session,
    -- every time.
    CREATE FUNCTION {s}.store_generation() RETURNS text
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
        sys text := current_setting('keysmith.system_identifier', true);
    BEGIN
        IF sys IS NULL OR sys = '' THEN
            SELECT system_identifier::text INTO sys FROM pg_control_system();
            PERFORM set_config('keysmith.system_identifier', sys, false);
        END IF;
        RETURN sys || '/' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8);
    END
    $fn$;

    CREATE FUNCTION {s}.fence(seq text, g text) RETURNS bigint
    LANGUAGE plpgsql AS $fn$
    DECLARE
        skipped bigint;
    BEGIN
        UPDATE {s}.sequences
        SET last_start = next,
            next = next + LEAST(failover_skip, max_value + 1 - next),
            failover_skipped = failover_skipped + LEAST(failover_skip, max_value + 1 - next),
            generation = g,
            version = version + 1
        WHERE name = seq AND generation IS NOT NULL AND generation <> g
        RETURNING next - last_start INTO skipped;
        RETURN COALESCE(skipped, 0);
    END
    $fn$;

    DROP FUNCTION {s}.reserve(text, bigint);
    CREATE FUNCTION {s}.reserve(seq text, n bigint,
                               OUT first_value bigint, OUT next_free bigint, OUT row_version bigint,
                               OUT fenced bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        cur_next bigint;
        cur_max bigint;
        g text;
    BEGIN
        IF n IS NULL OR n < 1 OR n > 1099511627776 THEN
            RAISE EXCEPTION 'keysmith: count must be between 1 and 1099511627776, got %', n
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        g := {s}.store_generation();
        fenced := {s}.fence(seq, g);
        LOOP
            UPDATE {s}.sequences
            SET last_start = next,
                next = CASE WHEN max_value - next + 1 <= n THEN max_value + 1 ELSE next + n END,
                version = version + 1,
                generation = g
            WHERE name = seq AND next <= max_value
            RETURNING last_start, next, version INTO first_value, next_free, row_version;
            IF FOUND THEN
                RETURN;
            END IF;
            SELECT s.next, s.max_value INTO cur_next, cur_max
            FROM {s}.sequences s WHERE s.name = seq FOR SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'keysmith: sequence % does not exist', quote_literal(seq)
                    USING ERRCODE = 'no_data_found',
                          HINT = 'create it first (keysmith create NAME); it is never created silently';
            END IF;
            IF cur_next > cur_max THEN
                RAISE EXCEPTION 'keysmith: sequence % is exhausted: every value up to its maximum % is taken, and values never wrap', quote_literal(seq), cur_max
                    USING ERRCODE = 'sequence_generator_limit_exceeded';
            END IF;
            -- Values were handed back between the update and the read: again.
        END LOOP;
    END
    $fn$;

    -- The conditional write of put_if_version and alter_if_version (NULL
    -- keeps a column): fenced first, then written only if the version is
    -- still `expected`; either way the row as it now is. Each statement of
    -- the function reads a fresh snapshot, so the row after a lost race is
    -- the one that won it.
    CREATE FUNCTION {s}.write_if_version(seq text, expected bigint, new_next bigint,
                                        new_max bigint, new_block bigint,
                                        new_skip bigint, new_skip_set boolean,
                                        OUT done boolean, OUT r_name text, OUT r_next bigint,
                                        OUT r_start bigint, OUT r_max bigint, OUT r_block bigint,
                                        OUT r_version bigint, OUT r_generation text,
                                        OUT r_skip bigint, OUT r_skip_set boolean,
                                        OUT r_skipped bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        g text := {s}.store_generation();
    BEGIN
        PERFORM {s}.fence(seq, g);
        UPDATE {s}.sequences q
        SET next = new_next,
            max_value = COALESCE(new_max, q.max_value),
            block = COALESCE(new_block, q.block),
            failover_skip = COALESCE(new_skip, q.failover_skip),
            failover_skip_set = COALESCE(new_skip_set, q.failover_skip_set),
            version = q.version + 1,
            generation = g
        WHERE q.name = seq AND q.version = expected
        RETURNING true, q.name, q.next, q.start_value, q.max_value, q.block, q.version,
                  q.generation, q.failover_skip, q.failover_skip_set, q.failover_skipped
        INTO done, r_name, r_next, r_start, r_max, r_block, r_version,
             r_generation, r_skip, r_skip_set, r_skipped;
        IF FOUND THEN
            RETURN;
        END IF;
        done := false;
        SELECT q.name, q.next, q.start_value, q.max_value, q.block, q.version,
               q.generation, q.failover_skip, q.failover_skip_set, q.failover_skipped
        INTO r_name, r_next, r_start, r_max, r_block, r_version,
             r_generation, r_skip, r_skip_set, r_skipped
        FROM {s}.sequences q WHERE q.name = seq;
    END
    $fn$;

    -- The locked strategy's first step: the row fenced, then locked until
    -- the caller's transaction ends; `fenced` first, then the row.
    CREATE FUNCTION {s}.lock_row(seq text,
                                OUT fenced bigint, OUT r_name text, OUT r_next bigint,
                                OUT r_start bigint, OUT r_max bigint, OUT r_block bigint,
                                OUT r_version bigint, OUT r_generation text,
                                OUT r_skip bigint, OUT r_skip_set boolean,
                                OUT r_skipped bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        g text := {s}.store_generation();
    BEGIN
        fenced := {s}.fence(seq, g);
        SELECT q.name, q.next, q.start_value, q.max_value, q.block, q.version,
               g, q.failover_skip, q.failover_skip_set, q.failover_skipped
        INTO r_name, r_next, r_start, r_max, r_block, r_version,
             r_generation, r_skip, r_skip_set, r_skipped
        FROM {s}.sequences q WHERE q.name = seq FOR UPDATE;
    END
    $fn$;
    "#,
    // 7: a pool's residue class (store/pools.rs): the pool keeps its members
    // as slots of the class (member m is the value m * increment + offset)
    // and every process reads the class from here. Both NULL: none, as
    // every older pool reads.
    r#"
    ALTER TABLE {s}.pools
        ADD COLUMN class_increment bigint,
        ADD COLUMN class_offset bigint,
        ADD CONSTRAINT pools_class CHECK (
            (class_increment IS NULL) = (class_offset IS NULL)
            AND (class_increment IS NULL
                 OR (class_increment >= 2 AND class_offset >= 0
                     AND class_offset < class_increment)));
    "#,
    // 8: tombstones of dropped sequences and pools (store/tombstones.rs):
    // bounds above every value a dropped object of a name handed out, so
    // that creating the name again continues above them. A drop raises its
    // name's row (GREATEST) in the transaction that deletes; a create locks
    // the row first (an upsert) and raises its start above it. Sequences
    // and pools dropped before this migration left none.
    r#"
    CREATE TABLE {s}.tombstones (
        kind          text COLLATE "C" NOT NULL,
        name          text COLLATE "C" NOT NULL,
        high_water    bigint NOT NULL,
        reversed_next bigint NOT NULL,
        PRIMARY KEY (kind, name)
    );
    "#,
    // 9: was `next_key` from a block per session; migration 10 makes it
    // (with the check below), so a store at version 9 gets it again.
    "SELECT 1;",
    // 10: `next_key` and `next_keys` refuse a sequence with a numbering
    // (numbered, bit-reversed, residue-class, opaque, encoded, leader-
    // ordered): its `sequences` row does not count its values (they come
    // from `number_counters`, a residue class's slots, a permutation or the
    // leader), so handing out `next` would repeat values keysmith hands
    // out. The check runs when a session reserves a block, not per value.
    // And, as migration 9 made it first: `next_key` from a block per session (the user guide's "Allocating from SQL"). The
    // session's cursor is a custom setting, `keysmith.b_<schema>_<hex of the
    // name>` = `pid,next,end,xid`: the values next..end-1 of a block that
    // `reserve` took for this backend (`pid`), and while the transaction that
    // reserved it may still roll back, that transaction's id (else 0).
    //
    // - A setting made with set_config(.., false) is undone when its
    //   transaction or savepoint rolls back, as is the UPDATE of `reserve`
    //   in it: a reservation rolled back takes the cursor with it, and values
    //   taken in a transaction that rolled back go back to the session (as
    //   they went back to the sequence before).
    // - PREPARE TRANSACTION keeps session settings, whatever COMMIT PREPARED
    //   or ROLLBACK PREPARED then do: so a block is used outside the
    //   transaction that reserved it only once pg_xact_status says that
    //   transaction committed; aborted, unknown or still prepared, the rest
    //   of the block is dropped (a gap, never a repeat).
    // - A setting of another backend (a default from the server, a role or a
    //   pooler) is never a block of this one: `pid` must be this backend's.
    // - Strict sequences (block 1) reserve every value inside the caller's
    //   transaction as before: only that keeps values in time order across
    //   every caller, as strict promises.
    // The block is `block` values, as a library handle's (no adaptive
    // growth: a session's calls are not seen by anyone to measure a rate).
    // `reserve` fences the row first, so a failover moves the row on before
    // any session of the new primary takes a block.
    r#"
    CREATE OR REPLACE FUNCTION {s}.plain_only(seq text) RETURNS void
    LANGUAGE plpgsql AS $fn$
    BEGIN
        IF EXISTS (SELECT 1 FROM {s}.numbering n WHERE n.name = seq) THEN
            RAISE EXCEPTION 'keysmith: sequence % is not a plain sequence (numbered, bit-reversed, residue-class, opaque, encoded or leader-ordered): its row counts something else than its values', quote_literal(seq)
                USING ERRCODE = 'wrong_object_type',
                      HINT = 'take its values through keysmith (the library, the CLI or HTTP); next_key serves plain sequences only';
        END IF;
    END
    $fn$;

    CREATE OR REPLACE FUNCTION {s}.next_keys(seq text, n bigint) RETURNS SETOF bigint
    LANGUAGE plpgsql AS $fn$
    DECLARE
        r record;
    BEGIN
        PERFORM {s}.plain_only(seq);
        SELECT * INTO r FROM {s}.reserve(seq, n);
        IF r.next_free - r.first_value < n THEN
            -- Raising rolls the short reservation back: nothing is lost.
            RAISE EXCEPTION 'keysmith: sequence % has only % values left, % asked for', quote_literal(seq), r.next_free - r.first_value, n
                USING ERRCODE = 'sequence_generator_limit_exceeded';
        END IF;
        RETURN QUERY SELECT generate_series(r.first_value, r.next_free - 1);
    END
    $fn$;

    CREATE OR REPLACE FUNCTION {s}.next_key(seq text) RETURNS bigint
    LANGUAGE plpgsql AS $fn$
    DECLARE
        k text := 'keysmith.b_{schema_name}_' || encode(convert_to(seq, 'UTF8'), 'hex');
        cur text[] := string_to_array(current_setting(k, true), ',');
        me int := pg_backend_pid();
        v bigint;
        b bigint;
        lim bigint;
        x text;
    BEGIN
        IF cardinality(cur) = 4 AND cur[1] = me::text THEN
            v := cur[2]::bigint;
            lim := cur[3]::bigint;
            x := cur[4];
            IF v < lim AND x <> '0'
               AND x <> COALESCE(pg_current_xact_id_if_assigned()::text, '') THEN
                -- Reserved by an earlier transaction of this session: once
                -- known to have committed, x is 0 from then on. Only a
                -- prepared one (two-phase) can have ended otherwise and
                -- left the setting: then the block is dropped.
                IF pg_xact_status(x::xid8) = 'committed' THEN
                    x := '0';
                ELSE
                    v := lim;
                END IF;
            END IF;
            IF v < lim THEN
                -- An assignment, not PERFORM: a simple expression, no query.
                k := set_config(k, me || ',' || (v + 1) || ',' || lim || ',' || x, false);
                RETURN v;
            END IF;
        END IF;
        -- The reservation below must be durable when this transaction
        -- commits, whatever the caller's synchronous_commit: later calls
        -- hand out the block from the session setting in transactions that
        -- may write nothing (and so flush nothing).
        PERFORM set_config('synchronous_commit', 'on', true);
        PERFORM {s}.plain_only(seq);
        SELECT q.block INTO b FROM {s}.sequences q WHERE q.name = seq;
        IF NOT FOUND OR b <= 1 THEN
            -- Strict, or missing (reserve raises naming it).
            SELECT r.first_value INTO v FROM {s}.reserve(seq, 1) r;
            RETURN v;
        END IF;
        SELECT r.first_value, r.next_free INTO v, lim FROM {s}.reserve(seq, b) r;
        k := set_config(k, me || ',' || (v + 1) || ',' || lim || ',' || pg_current_xact_id(), false);
        RETURN v;
    END
    $fn$;
    "#,
    // 11: lives of a name (store/tombstones.rs, "Lives of a name"). Every
    // sequence and pool records its incarnation (the life of the name it
    // belongs to: one above every row version an earlier life of the name
    // reached, `Tombstone::incarnation`), and a tombstone the largest row
    // version its dropped lives reached. A sequence's version starts at its
    // incarnation, so a conditional write planned in one life never matches
    // a later one. 0: a row or tombstone from before (unknown). `IF NOT
    // EXISTS`: a schema whose version was set back by hand keeps its columns.
    //
    // The functions whose rows a caller reads return the row's incarnation
    // too, as their last OUT column so that every earlier column keeps its
    // place (a keysmith of version 10 still running reads them by position,
    // SQL callers and `next_key`/`next_keys` by name). Changing OUT columns
    // takes DROP and CREATE; the bodies are migration 6's, with the column
    // added. `next_key` and `next_keys` call `reserve` by name and need no
    // change.
    r#"
    ALTER TABLE {s}.sequences ADD COLUMN IF NOT EXISTS incarnation bigint NOT NULL DEFAULT 0;
    ALTER TABLE {s}.pools ADD COLUMN IF NOT EXISTS incarnation bigint NOT NULL DEFAULT 0;
    ALTER TABLE {s}.tombstones ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0;

    DROP FUNCTION {s}.reserve(text, bigint);
    CREATE FUNCTION {s}.reserve(seq text, n bigint,
                               OUT first_value bigint, OUT next_free bigint, OUT row_version bigint,
                               OUT fenced bigint, OUT row_incarnation bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        cur_next bigint;
        cur_max bigint;
        g text;
    BEGIN
        IF n IS NULL OR n < 1 OR n > 1099511627776 THEN
            RAISE EXCEPTION 'keysmith: count must be between 1 and 1099511627776, got %', n
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        g := {s}.store_generation();
        fenced := {s}.fence(seq, g);
        LOOP
            UPDATE {s}.sequences
            SET last_start = next,
                next = CASE WHEN max_value - next + 1 <= n THEN max_value + 1 ELSE next + n END,
                version = version + 1,
                generation = g
            WHERE name = seq AND next <= max_value
            RETURNING last_start, next, version, incarnation
            INTO first_value, next_free, row_version, row_incarnation;
            IF FOUND THEN
                RETURN;
            END IF;
            SELECT s.next, s.max_value INTO cur_next, cur_max
            FROM {s}.sequences s WHERE s.name = seq FOR SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'keysmith: sequence % does not exist', quote_literal(seq)
                    USING ERRCODE = 'no_data_found',
                          HINT = 'create it first (keysmith create NAME); it is never created silently';
            END IF;
            IF cur_next > cur_max THEN
                RAISE EXCEPTION 'keysmith: sequence % is exhausted: every value up to its maximum % is taken, and values never wrap', quote_literal(seq), cur_max
                    USING ERRCODE = 'sequence_generator_limit_exceeded';
            END IF;
            -- Values were handed back between the update and the read: again.
        END LOOP;
    END
    $fn$;

    DROP FUNCTION {s}.write_if_version(text, bigint, bigint, bigint, bigint, bigint, boolean);
    CREATE FUNCTION {s}.write_if_version(seq text, expected bigint, new_next bigint,
                                        new_max bigint, new_block bigint,
                                        new_skip bigint, new_skip_set boolean,
                                        OUT done boolean, OUT r_name text, OUT r_next bigint,
                                        OUT r_start bigint, OUT r_max bigint, OUT r_block bigint,
                                        OUT r_version bigint, OUT r_generation text,
                                        OUT r_skip bigint, OUT r_skip_set boolean,
                                        OUT r_skipped bigint, OUT r_incarnation bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        g text := {s}.store_generation();
    BEGIN
        PERFORM {s}.fence(seq, g);
        UPDATE {s}.sequences q
        SET next = new_next,
            max_value = COALESCE(new_max, q.max_value),
            block = COALESCE(new_block, q.block),
            failover_skip = COALESCE(new_skip, q.failover_skip),
            failover_skip_set = COALESCE(new_skip_set, q.failover_skip_set),
            version = q.version + 1,
            generation = g
        WHERE q.name = seq AND q.version = expected
        RETURNING true, q.name, q.next, q.start_value, q.max_value, q.block, q.version,
                  q.generation, q.failover_skip, q.failover_skip_set, q.failover_skipped,
                  q.incarnation
        INTO done, r_name, r_next, r_start, r_max, r_block, r_version,
             r_generation, r_skip, r_skip_set, r_skipped, r_incarnation;
        IF FOUND THEN
            RETURN;
        END IF;
        done := false;
        SELECT q.name, q.next, q.start_value, q.max_value, q.block, q.version,
               q.generation, q.failover_skip, q.failover_skip_set, q.failover_skipped,
               q.incarnation
        INTO r_name, r_next, r_start, r_max, r_block, r_version,
             r_generation, r_skip, r_skip_set, r_skipped, r_incarnation
        FROM {s}.sequences q WHERE q.name = seq;
    END
    $fn$;

    DROP FUNCTION {s}.lock_row(text);
    CREATE FUNCTION {s}.lock_row(seq text,
                                OUT fenced bigint, OUT r_name text, OUT r_next bigint,
                                OUT r_start bigint, OUT r_max bigint, OUT r_block bigint,
                                OUT r_version bigint, OUT r_generation text,
                                OUT r_skip bigint, OUT r_skip_set boolean,
                                OUT r_skipped bigint, OUT r_incarnation bigint)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        g text := {s}.store_generation();
    BEGIN
        fenced := {s}.fence(seq, g);
        SELECT q.name, q.next, q.start_value, q.max_value, q.block, q.version,
               g, q.failover_skip, q.failover_skip_set, q.failover_skipped, q.incarnation
        INTO r_name, r_next, r_start, r_max, r_block, r_version,
             r_generation, r_skip, r_skip_set, r_skipped, r_incarnation
        FROM {s}.sequences q WHERE q.name = seq FOR UPDATE;
    END
    $fn$;

    -- `reserve` in life `inc` of the name only (0: any): a row of another
    -- life raises KS410, which undoes the reservation the same statement
    -- made (a handle of a dropped life writes nothing into the next).
    CREATE OR REPLACE FUNCTION {s}.reserve_in(seq text, n bigint, inc bigint,
                                  OUT first_value bigint, OUT next_free bigint,
                                  OUT row_version bigint, OUT fenced bigint,
                                  OUT row_incarnation bigint)
    LANGUAGE plpgsql AS $fn$
    BEGIN
        SELECT r.first_value, r.next_free, r.row_version, r.fenced, r.row_incarnation
        INTO first_value, next_free, row_version, fenced, row_incarnation
        FROM {s}.reserve(seq, n) r;
        IF inc <> 0 AND row_incarnation <> 0 AND row_incarnation <> inc THEN
            RAISE EXCEPTION 'keysmith: sequence % was dropped and created again', quote_literal(seq)
                USING ERRCODE = 'KS410';
        END IF;
    END
    $fn$;
    "#,
    // 12: the fence raises a row's version by 2^32 (`FENCE_VERSION_STEP`,
    // `SequenceRow::fence`), not by one: the fenced version is then above
    // every version the writes this copy lost can have reached, so a put
    // planned on a lost write (a hand-back after a failover) conflicts. The
    // body is the first `fence`'s otherwise.
    r#"
    CREATE OR REPLACE FUNCTION {s}.fence(seq text, g text) RETURNS bigint
    LANGUAGE plpgsql AS $fn$
    DECLARE
        skipped bigint;
    BEGIN
        UPDATE {s}.sequences
        SET last_start = next,
            next = next + LEAST(failover_skip, max_value + 1 - next),
            failover_skipped = failover_skipped + LEAST(failover_skip, max_value + 1 - next),
            generation = g,
            version = version + 4294967296
        WHERE name = seq AND generation IS NOT NULL AND generation <> g
        RETURNING next - last_start INTO skipped;
        RETURN COALESCE(skipped, 0);
    END
    $fn$;
    "#,
];
