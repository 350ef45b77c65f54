-- Issue 27 / 29: each database's change feed lives in that database's own schema (`d_<id>.changes`,
-- `change_commits`, `change_feed`), written by triggers in the writer's transaction, so that on Citus, where each
-- `d_<id>` is a distributed schema on a worker, a row write never has to reach a coordinator table. Positions are
-- per database and handed out lazily by readers (the sequencer in src/catalog/changes.ts), so a writer no longer
-- serialises with the other writers of its database at COMMIT; a writer sends NOTIFY only when a reader armed the
-- feed (docs/decisions/changes.md). This migration creates the feed of every existing database, moves its retained
-- changes (positions and sequence numbers unchanged, so every cursor handed out stays valid) and drops the shared
-- tables.

-- The feed of one database: `changes` (one entry per change, in the writer's transaction), `change_commits` (one
-- per writing transaction: its position, null until a reader sequences it) and `change_feed` (one row: the last
-- position handed out, the retention watermark and whether a reader waits for a NOTIFY). Called by
-- src/data/ddl.ts for a new database (and a restore's staging schema), and below for the existing ones.
CREATE FUNCTION "wds_create_change_feed"(p_database char(26)) RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  s text := format('%I', 'd_' || lower(p_database));
BEGIN
  EXECUTE format('CREATE SEQUENCE %s.change_seq AS bigint', s);
  EXECUTE format($q$CREATE TABLE %1$s.change_commits (
    txid xid8 PRIMARY KEY DEFAULT pg_current_xact_id(),
    position bigint UNIQUE,
    committed_at timestamptz(3))$q$, s);
  -- The sequencer's look-up: the commits no reader has positioned yet (a handful, between two reads).
  EXECUTE format('CREATE INDEX change_commits_unpositioned ON %s.change_commits (txid) WHERE position IS NULL', s);
  EXECUTE format('CREATE INDEX change_commits_committed_at ON %s.change_commits (committed_at)', s);
  EXECUTE format($q$CREATE TABLE %1$s.changes (
    txid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    seq bigint NOT NULL DEFAULT nextval('%1$s.change_seq'),
    recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind varchar(32) NOT NULL,
    table_id char(26) NOT NULL,
    row_id char(26),
    version bigint,
    schema_version integer,
    mutation_id char(26) NOT NULL,
    actor_id char(26) NOT NULL,
    actor_kind varchar(16) NOT NULL,
    "values" jsonb,
    previous jsonb,
    PRIMARY KEY (txid, seq))$q$, s);
  EXECUTE format($q$CREATE TABLE %1$s.change_feed (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    head_position bigint NOT NULL DEFAULT 0,
    head_seq bigint NOT NULL DEFAULT 0,
    head_committed_at timestamptz(3),
    pruned_position bigint NOT NULL DEFAULT 0,
    pruned_seq bigint NOT NULL DEFAULT 0,
    armed boolean NOT NULL DEFAULT true)$q$, s);
  EXECUTE format('INSERT INTO %s.change_feed DEFAULT VALUES', s);
  EXECUTE format('CREATE CONSTRAINT TRIGGER committed AFTER INSERT ON %s.change_commits DEFERRABLE INITIALLY DEFERRED '
                 'FOR EACH ROW EXECUTE FUNCTION public.wds_changes_committed()', s);
END;
$fn$;

-- At COMMIT of a transaction that recorded changes in a database (once per transaction and database): NOTIFY if a
-- reader armed the feed, and disarm it. The shared lock, held from here to the end of the COMMIT, pairs with the
-- exclusive one a reader takes to arm (src/catalog/changes.ts `armChangeFeed`): a commit that checked before the arm
-- is visible before the arm commits, so the reader's read after arming sees it; a commit that checks after sees the
-- arm. Writers share the lock, so they never wait for each other here.
CREATE FUNCTION "wds_changes_committed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_database char(26) := upper(substr(TG_TABLE_SCHEMA, 3));
  disarmed int;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(27, hashtext(v_database));
  EXECUTE format('UPDATE %I.change_feed SET armed = false WHERE armed', TG_TABLE_SCHEMA);
  GET DIAGNOSTICS disarmed = ROW_COUNT;
  IF disarmed > 0 THEN PERFORM pg_notify('wds_changes', v_database); END IF;
  RETURN NULL;
END;
$fn$;

-- Table and schema changes: the catalog row changes on the coordinator, and its change is written into the
-- database's own feed in the same statement's transaction (on Citus: a distributed insert into that schema).
CREATE OR REPLACE FUNCTION "wds_record_table_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  kinds text[] := '{}';
  actor record;
  s text := format('%I', 'd_' || lower(NEW.database_id));
BEGIN
  IF current_setting('wds.changes', true) = 'off' THEN RETURN NULL; END IF;
  IF TG_OP = 'INSERT' THEN
    kinds := ARRAY['table.created'];
  ELSE
    IF OLD.state = 'active' AND NEW.state = 'trashed' THEN kinds := kinds || 'table.trashed'::text; END IF;
    IF OLD.state = 'trashed' AND NEW.state = 'active' THEN kinds := kinds || 'table.restored'::text; END IF;
    IF NEW.name IS DISTINCT FROM OLD.name THEN kinds := kinds || 'table.renamed'::text; END IF;
    IF NEW.schema_version IS DISTINCT FROM OLD.schema_version THEN kinds := kinds || 'schema.changed'::text; END IF;
  END IF;
  IF cardinality(kinds) = 0 THEN RETURN NULL; END IF;
  -- A database whose schema is gone (being purged) has no feed to record into.
  IF to_regclass(s || '.change_commits') IS NULL THEN RETURN NULL; END IF;
  SELECT * INTO actor FROM public.wds_change_actor(NEW.id);
  EXECUTE format('INSERT INTO %s.change_commits DEFAULT VALUES ON CONFLICT DO NOTHING', s);
  EXECUTE format($q$INSERT INTO %s.changes (kind, table_id, schema_version, mutation_id, actor_id, actor_kind, "values")
    SELECT k.kind, $1, $2, coalesce($3, public.wds_new_id()), $4, $5,
           CASE WHEN k.kind IN ('table.created', 'table.renamed') THEN jsonb_build_object('name', $6::text) END
      FROM unnest($7::text[]) WITH ORDINALITY AS k(kind, i) ORDER BY k.i$q$, s)
    USING NEW.id, NEW.schema_version, actor.mutation_id, actor.actor_id, actor.actor_kind, NEW.name, kinds;
  RETURN NULL;
END;
$fn$;

-- Row changes, from the cell history a statement appended (`d_<db>.h_<table>`), into the same schema's feed. One
-- change per (row, version): `values` is the row after it (every current field: the rows table's columns, so the
-- trigger reads nothing outside its schema), `previous` the changed cells before an update, or the whole row
-- before a delete, from the history.
CREATE OR REPLACE FUNCTION "wds_record_row_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_table char(26) := upper(substr(TG_TABLE_NAME, 3));
BEGIN
  IF current_setting('wds.changes', true) = 'off' THEN RETURN NULL; END IF;
  IF NOT EXISTS (SELECT 1 FROM new_cells) THEN RETURN NULL; END IF;
  EXECUTE format('INSERT INTO %I.change_commits DEFAULT VALUES ON CONFLICT DO NOTHING', TG_TABLE_SCHEMA);
  EXECUTE format($q$
    WITH g AS (
      SELECT row_id, version, operation, mutation_id, actor_id, actor_kind, jsonb_object_agg(field_id, value) AS cells
        FROM new_cells GROUP BY row_id, version, operation, mutation_id, actor_id, actor_kind
    ), f AS (
      SELECT upper(substr(a.attname, 3))::char(26) AS id FROM pg_attribute a
       WHERE a.attrelid = %3$L::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname LIKE 'f\_%%'
    )
    INSERT INTO %1$I.changes (kind, table_id, row_id, version, mutation_id, actor_id, actor_kind, "values", previous)
    SELECT CASE g.operation WHEN 'create' THEN 'row.created' WHEN 'update' THEN 'row.updated'
                            WHEN 'delete' THEN 'row.deleted' ELSE 'row.restored' END,
           $1, g.row_id, g.version, g.mutation_id, g.actor_id, g.actor_kind,
           CASE g.operation WHEN 'delete' THEN NULL WHEN 'update' THEN (
             SELECT jsonb_object_agg(f.id, coalesce((SELECT h.value FROM %2$s h WHERE h.row_id = g.row_id AND h.field_id = f.id
                                                      AND h.version <= g.version ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM f) ELSE g.cells END,
           CASE g.operation WHEN 'update' THEN (
             SELECT jsonb_object_agg(k.field_id, coalesce((SELECT h.value FROM %2$s h WHERE h.row_id = g.row_id
                                                  AND h.field_id = k.field_id AND h.version < g.version
                                                ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM jsonb_object_keys(g.cells) AS k(field_id))
           WHEN 'delete' THEN (
             SELECT jsonb_object_agg(f.id, coalesce((SELECT h.value FROM %2$s h WHERE h.row_id = g.row_id AND h.field_id = f.id
                                                      AND h.version < g.version ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM f) END
      FROM g ORDER BY g.row_id, g.version
  $q$, TG_TABLE_SCHEMA, format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME),
       format('%I.%I', TG_TABLE_SCHEMA, 't_' || substr(TG_TABLE_NAME, 3))) USING v_table;
  RETURN NULL;
END;
$fn$;
-- CREATE OR REPLACE resets a function's settings: the row trigger's statement must stay out of JIT (see
-- *_change_feed_no_jit: compiling it cost 1.2-1.8 s per 1,000-row batch).
ALTER FUNCTION "wds_record_row_changes"() SET jit = off;
ALTER FUNCTION "wds_record_table_changes"() SET jit = off;
ALTER FUNCTION "wds_changes_committed"() SET jit = off;

-- Every existing database gets its feed, with what the shared tables retained for it.
DO $$
DECLARE
  d record;
  s text;
BEGIN
  FOR d IN SELECT id FROM public.databases WHERE to_regnamespace(format('%I', 'd_' || lower(id))) IS NOT NULL LOOP
    s := format('%I', 'd_' || lower(d.id));
    PERFORM public.wds_create_change_feed(d.id);
    EXECUTE format('INSERT INTO %s.change_commits (txid, position, committed_at)
                    SELECT txid, position, committed_at FROM public.change_commits WHERE database_id = $1', s) USING d.id;
    EXECUTE format('INSERT INTO %s.changes (txid, seq, recorded_at, kind, table_id, row_id, version, schema_version,
                      mutation_id, actor_id, actor_kind, "values", previous)
                    SELECT c.txid, c.seq, coalesce(cc.committed_at, now()), c.kind, c.table_id, c.row_id, c.version,
                           c.schema_version, c.mutation_id, c.actor_id, c.actor_kind, c."values", c.previous
                      FROM public.changes c LEFT JOIN public.change_commits cc ON cc.database_id = c.database_id AND cc.txid = c.txid
                     WHERE c.database_id = $1', s) USING d.id;
    EXECUTE format('SELECT setval(%L, greatest((SELECT max(seq) FROM %s.changes), (SELECT last_value FROM public.change_seq), 1))',
                   s || '.change_seq', s);
    EXECUTE format($q$UPDATE %1$s.change_feed f SET
        head_position = coalesce(h.position, f.pruned_position), head_seq = coalesce(h.seq, 0),
        head_committed_at = h.committed_at
      FROM (SELECT NULL::int AS nothing) x
      LEFT JOIN LATERAL (
        SELECT cc.position, cc.committed_at, (SELECT max(c.seq) FROM %1$s.changes c WHERE c.txid = cc.txid) AS seq
          FROM %1$s.change_commits cc WHERE cc.position IS NOT NULL ORDER BY cc.position DESC LIMIT 1) h ON true$q$, s);
    EXECUTE format('UPDATE %s.change_feed SET pruned_position = p.pruned_position, pruned_seq = p.pruned_seq
                      FROM public.change_feeds p WHERE p.database_id = $1', s) USING d.id;
    EXECUTE format('UPDATE %s.change_feed SET head_position = greatest(head_position, pruned_position),
                      head_seq = CASE WHEN head_position < pruned_position THEN pruned_seq ELSE head_seq END', s);
    -- The moved commits' COMMIT triggers run now (they disarm the feed); then it starts armed, as a new one does.
    SET CONSTRAINTS ALL IMMEDIATE;
    SET CONSTRAINTS ALL DEFERRED;
    EXECUTE format('UPDATE %s.change_feed SET armed = true', s);
  END LOOP;
END;
$$;

DROP TRIGGER "change_commits_assign_position" ON "change_commits";
DROP TABLE "changes";
DROP TABLE "change_commits";
DROP TABLE "change_feeds";
DROP FUNCTION "wds_assign_change_position"();
DROP SEQUENCE "change_seq";
DROP SEQUENCE "change_positions";
