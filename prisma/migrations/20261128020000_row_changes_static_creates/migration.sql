-- Row changes of creates and restores (most writes) are built by a static statement, whose plan PostgreSQL caches per
-- table, instead of the general dynamic statement that is planned on every call (docs/decisions/changes.md: the
-- feed's write cost). Updates and deletes, which read the history for `values` and `previous`, keep that statement.
CREATE OR REPLACE FUNCTION "wds_record_row_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  -- On Citus the trigger fires on the shard, `h_<table>_<shard id>`: the table id is the 26 characters after `h_`.
  v_table char(26) := upper(substr(TG_TABLE_NAME, 3, 26));
  v_changes jsonb;
BEGIN
  IF current_setting('wds.changes', true) = 'off' THEN RETURN NULL; END IF;
  IF NOT EXISTS (SELECT 1 FROM new_cells) THEN RETURN NULL; END IF;
  IF NOT EXISTS (SELECT 1 FROM new_cells WHERE operation IN ('update', 'delete')) THEN
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
