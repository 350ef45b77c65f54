-- The change feed's triggers write their database's feed with static statements, whose plans PostgreSQL caches,
-- instead of `EXECUTE format(…)` statements parsed, analysed and planned on every call (docs/decisions/changes.md,
-- "What a create costs in PostgreSQL": those three steps took ~0.25 ms of PostgreSQL CPU per single-row create, of
-- the 0.5-1 ms the feed added). The feed's tables are named per database (`d_<id>.changes`), so a static statement names them
-- unqualified and runs under a search_path of the trigger's own schema, set for those statements and put back after.
-- PL/pgSQL compiles a trigger function per trigger, so each table's trigger keeps plans of its own schema's feed; a
-- cached plan is checked against the search_path it was made under and made again when that differs (a restore
-- that renames the schema), and against its tables (a restore that moves the feed into the schema). `pg_temp` is
-- last, so that a session's temporary table cannot stand in for the feed. On Citus the statements stay as they were
-- (dynamic, schema-qualified): plans cached over distributed tables are not what the cluster's tests exercise.

CREATE OR REPLACE FUNCTION "wds_record_row_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  -- On Citus the trigger fires on the shard, `h_<table>_<shard id>`: the table id is the 26 characters after `h_`.
  v_table char(26) := upper(substr(TG_TABLE_NAME, 3, 26));
  v_changes jsonb;
  v_general boolean;
  v_path text;
BEGIN
  IF current_setting('wds.changes', true) = 'off' THEN RETURN NULL; END IF;
  -- NULL when the statement appended nothing; true when it holds an update or a delete.
  SELECT bool_or(operation IN ('update', 'delete')) INTO v_general FROM new_cells;
  IF v_general IS NULL THEN RETURN NULL; END IF;
  IF NOT v_general THEN
    -- Creates and restores: `values` is the cells the statement wrote, `previous` is NULL. Static SQL, so its plan
    -- is cached per table; the general statement below is planned on every call.
    SELECT jsonb_agg(jsonb_build_array(
             CASE g.operation WHEN 'create' THEN 'row.created' ELSE 'row.restored' END,
             g.row_id, g.version, g.mutation_id, g.actor_id, g.actor_kind, g.cells, NULL) ORDER BY g.row_id, g.version)
      INTO v_changes
      FROM (SELECT row_id, version, operation, mutation_id, actor_id, actor_kind, jsonb_object_agg(field_id, value) AS cells
              FROM new_cells GROUP BY row_id, version, operation, mutation_id, actor_id, actor_kind) g;
  ELSE
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
  END IF;
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
    EXECUTE format('INSERT INTO %I.change_commits DEFAULT VALUES ON CONFLICT DO NOTHING', TG_TABLE_SCHEMA);
    EXECUTE format($q$
      INSERT INTO %I.changes (kind, table_id, row_id, version, mutation_id, actor_id, actor_kind, "values", previous)
      SELECT c->>0, $1, c->>1, (c->>2)::bigint, c->>3, c->>4, c->>5, nullif(c->6, 'null'), nullif(c->7, 'null')
        FROM jsonb_array_elements($2) WITH ORDINALITY AS x(c, i) ORDER BY x.i
    $q$, TG_TABLE_SCHEMA) USING v_table, v_changes;
    RETURN NULL;
  END IF;
  v_path := pg_catalog.current_setting('search_path');
  PERFORM pg_catalog.set_config('search_path', format('%I, pg_catalog, pg_temp', TG_TABLE_SCHEMA), true);
  INSERT INTO change_commits DEFAULT VALUES ON CONFLICT DO NOTHING;
  -- In the built order (row, version), so `seq` follows it; a JSON null of `values` or `previous` is SQL NULL.
  INSERT INTO changes (kind, table_id, row_id, version, mutation_id, actor_id, actor_kind, "values", previous)
  SELECT c->>0, v_table, c->>1, (c->>2)::bigint, c->>3, c->>4, c->>5, nullif(c->6, 'null'), nullif(c->7, 'null')
    FROM jsonb_array_elements(v_changes) WITH ORDINALITY AS x(c, i) ORDER BY x.i;
  PERFORM pg_catalog.set_config('search_path', v_path, true);
  RETURN NULL;
END;
$fn$;
-- CREATE OR REPLACE resets a function's settings (see *_change_feed_no_jit).
ALTER FUNCTION "wds_record_row_changes"() SET jit = off;

-- At COMMIT (*_change_arm_row for the protocol), with the arm row read and disarmed by static statements.
CREATE OR REPLACE FUNCTION "wds_changes_committed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_database char(26) := upper(substr(TG_TABLE_SCHEMA, 3));
  v_path text;
  claimed boolean;
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN RETURN NULL; END IF;
  PERFORM pg_catalog.pg_advisory_xact_lock_shared(27, hashtext(v_database));
  v_path := pg_catalog.current_setting('search_path');
  PERFORM pg_catalog.set_config('search_path', format('%I, pg_catalog, pg_temp', TG_TABLE_SCHEMA), true);
  SELECT true INTO claimed FROM change_arm WHERE armed FOR UPDATE SKIP LOCKED;
  IF claimed THEN
    UPDATE change_arm SET armed = false;
    PERFORM pg_catalog.pg_notify('wds_changes', v_database);
  END IF;
  PERFORM pg_catalog.set_config('search_path', v_path, true);
  RETURN NULL;
END;
$fn$;
ALTER FUNCTION "wds_changes_committed"() SET jit = off;
