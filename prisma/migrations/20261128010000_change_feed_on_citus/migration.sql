-- Issue 29: row changes are recorded on Citus too. The row trigger on a history table (created on every cluster now,
-- src/data/ddl.ts) fires on the worker, on the history table's shard, and writes the feed of the same distributed
-- schema on that worker. What differs there: the feed's tables must be distributed tables of the schema (created by
-- top-level statements, below); the trigger's table is the shard (`h_<table>_<shard id>`), so the table id is cut to
-- its 26 characters; and a table change recorded from the coordinator's catalog trigger takes the transaction id of
-- the worker, not a default evaluated on the coordinator (docs/decisions/citus.md).

CREATE OR REPLACE FUNCTION "wds_record_table_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  kinds text[] := '{}';
  actor record;
  s text := format('%I', 'd_' || lower(NEW.database_id));
  v_txid xid8;
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
  -- The transaction id of the node that holds the feed: on Citus the schema's worker, where the transaction's row
  -- changes take theirs (a default evaluated here, on the coordinator, would be the coordinator's, which can equal an
  -- unrelated transaction's on the worker and join its changes to that one's commit). A SELECT runs on that worker.
  EXECUTE format('SELECT pg_current_xact_id() FROM %s.change_feed', s) INTO v_txid;
  EXECUTE format('INSERT INTO %s.change_commits (txid) VALUES ($1) ON CONFLICT DO NOTHING', s) USING v_txid;
  EXECUTE format($q$INSERT INTO %s.changes (txid, kind, table_id, schema_version, mutation_id, actor_id, actor_kind, "values")
    SELECT $8, k.kind, $1, $2, coalesce($3, public.wds_new_id()), $4, $5,
           CASE WHEN k.kind IN ('table.created', 'table.renamed') THEN jsonb_build_object('name', $6::text) END
      FROM unnest($7::text[]) WITH ORDINALITY AS k(kind, i) ORDER BY k.i$q$, s)
    USING NEW.id, NEW.schema_version, actor.mutation_id, actor.actor_id, actor.actor_kind, NEW.name, kinds, v_txid;
  RETURN NULL;
END;
$fn$;

-- Row changes, from the cell history a statement appended (`d_<db>.h_<table>`), into the same schema's feed. One
-- change per (row, version): `values` is the row after it (every current field: the rows table's columns, so the
-- trigger reads nothing outside its schema), `previous` the changed cells before an update, or the whole row
-- before a delete, from the history. Built by one statement and inserted by a second: on Citus an INSERT … SELECT
-- into the distributed `changes` runs its SELECT where the statement's transition table (`new_cells`) is not
-- visible ("could not find named tuplestore").
CREATE OR REPLACE FUNCTION "wds_record_row_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  -- On Citus the trigger fires on the shard, `h_<table>_<shard id>`: the table id is the 26 characters after `h_`.
  v_table char(26) := upper(substr(TG_TABLE_NAME, 3, 26));
  v_changes jsonb;
BEGIN
  IF current_setting('wds.changes', true) = 'off' THEN RETURN NULL; END IF;
  IF NOT EXISTS (SELECT 1 FROM new_cells) THEN RETURN NULL; END IF;
  EXECUTE format($q$
    WITH g AS (
      SELECT row_id, version, operation, mutation_id, actor_id, actor_kind, jsonb_object_agg(field_id, value) AS cells
        FROM new_cells GROUP BY row_id, version, operation, mutation_id, actor_id, actor_kind
    ), f AS (
      SELECT upper(substr(a.attname, 3))::char(26) AS id FROM pg_attribute a
       WHERE a.attrelid = %2$L::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attname LIKE 'f\_%%'
    )
    SELECT jsonb_agg(jsonb_build_array(
           CASE g.operation WHEN 'create' THEN 'row.created' WHEN 'update' THEN 'row.updated'
                            WHEN 'delete' THEN 'row.deleted' ELSE 'row.restored' END,
           g.row_id, g.version, g.mutation_id, g.actor_id, g.actor_kind,
           CASE g.operation WHEN 'delete' THEN NULL WHEN 'update' THEN (
             SELECT jsonb_object_agg(f.id, coalesce((SELECT h.value FROM %1$s h WHERE h.row_id = g.row_id AND h.field_id = f.id
                                                      AND h.version <= g.version ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM f) ELSE g.cells END,
           CASE g.operation WHEN 'update' THEN (
             SELECT jsonb_object_agg(k.field_id, coalesce((SELECT h.value FROM %1$s h WHERE h.row_id = g.row_id
                                                  AND h.field_id = k.field_id AND h.version < g.version
                                                ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM jsonb_object_keys(g.cells) AS k(field_id))
           WHEN 'delete' THEN (
             SELECT jsonb_object_agg(f.id, coalesce((SELECT h.value FROM %1$s h WHERE h.row_id = g.row_id AND h.field_id = f.id
                                                      AND h.version < g.version ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM f) END) ORDER BY g.row_id, g.version)
      FROM g
  $q$, format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME),
       format('%I.%I', TG_TABLE_SCHEMA, 't_' || substr(TG_TABLE_NAME, 3, 26))) INTO v_changes;
  EXECUTE format('INSERT INTO %I.change_commits DEFAULT VALUES ON CONFLICT DO NOTHING', TG_TABLE_SCHEMA);
  -- In the built order (row, version), so `seq` follows it; a JSON null of `values` or `previous` is SQL NULL.
  EXECUTE format($q$
    INSERT INTO %I.changes (kind, table_id, row_id, version, mutation_id, actor_id, actor_kind, "values", previous)
    SELECT c->>0, $1, c->>1, (c->>2)::bigint, c->>3, c->>4, c->>5, nullif(c->6, 'null'), nullif(c->7, 'null')
      FROM jsonb_array_elements($2) WITH ORDINALITY AS x(c, i) ORDER BY x.i
  $q$, TG_TABLE_SCHEMA) USING v_table, v_changes;
  RETURN NULL;
END;
$fn$;
-- CREATE OR REPLACE resets a function's settings (see *_change_feed_no_jit).
ALTER FUNCTION "wds_record_row_changes"() SET jit = off;
ALTER FUNCTION "wds_record_table_changes"() SET jit = off;

-- Tables created on Citus before now have no row trigger (it was left out there): they get it. Citus creates a
-- trigger on a distributed table only with `citus.enable_unsafe_triggers` (an inert setting without Citus).
DO $$
DECLARE
  t record;
BEGIN
  PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
  FOR t IN SELECT format('%I.%I', 'd_' || lower(database_id), 'h_' || lower(id)) AS history FROM public.data_tables LOOP
    IF to_regclass(t.history) IS NOT NULL AND NOT EXISTS (
         SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(t.history) AND tgname = 'record_changes') THEN
      EXECUTE format('CREATE TRIGGER record_changes AFTER INSERT ON %s REFERENCING NEW TABLE AS new_cells '
                     'FOR EACH STATEMENT EXECUTE FUNCTION public.wds_record_row_changes()', t.history);
    END IF;
  END LOOP;
END;
$$;

-- A new database's feed is created by top-level statements now (src/data/ddl.ts `createDatabaseSchema`): Citus
-- distributes only a table created by a top-level statement, and the feeds this function created were left as
-- local tables of the coordinator, out of reach of the row trigger on the worker.
DROP FUNCTION "wds_create_change_feed"(char);

-- On Citus, each existing feed becomes a table of its distributed schema, placed with the schema's tables on their
-- worker. A database that has no table yet has nothing to place it beside; its feed stays on the coordinator, which
-- serves its table changes but not the row changes of a table created later (docs/decisions/citus.md).
DO $$
DECLARE
  d record;
  s text;
  t text;
  anchor text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN RETURN; END IF;
  PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
  FOR d IN SELECT id FROM public.databases WHERE to_regclass(format('%I.change_feed', 'd_' || lower(id))) IS NOT NULL LOOP
    s := format('%I', 'd_' || lower(d.id));
    EXECUTE 'SELECT min(p.logicalrelid::text) FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
              WHERE c.relnamespace = $1::regnamespace AND c.relname !~ ''^change'''
      INTO anchor USING s;
    CONTINUE WHEN anchor IS NULL;
    FOREACH t IN ARRAY ARRAY['change_feed', 'change_arm', 'change_commits', 'changes'] LOOP
      EXECUTE 'SELECT create_distributed_table($1, NULL, colocate_with => $2)
                WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1::regclass)'
        USING s || '.' || t, anchor;
    END LOOP;
  END LOOP;
END;
$$;

-- On Citus the COMMIT trigger fires on the worker, where nobody listens (the service listens on the coordinator, and
-- its readers poll there instead of arming, src/catalog/change-arming.ts), and where a NOTIFY would fail the
-- commit: a worker's part of a two-phase commit cannot PREPARE a transaction that sent one. So it does nothing
-- there. Elsewhere as before (*_change_arm_row).
CREATE OR REPLACE FUNCTION "wds_changes_committed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_database char(26) := upper(substr(TG_TABLE_SCHEMA, 3));
  claimed boolean;
BEGIN
  IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN RETURN NULL; END IF;
  PERFORM pg_advisory_xact_lock_shared(27, hashtext(v_database));
  EXECUTE format('SELECT true FROM %I.change_arm WHERE armed FOR UPDATE SKIP LOCKED', TG_TABLE_SCHEMA) INTO claimed;
  IF claimed THEN
    EXECUTE format('UPDATE %I.change_arm SET armed = false', TG_TABLE_SCHEMA);
    PERFORM pg_notify('wds_changes', v_database);
  END IF;
  RETURN NULL;
END;
$fn$;
ALTER FUNCTION "wds_changes_committed"() SET jit = off;
