-- Issue 27: the change feed of each database (docs/decisions/changes.md).
--
-- `changes` holds one entry per committed change, written in the writer's transaction by triggers: every row write
-- appends cell history (whatever the path: single writes, batches, upserts, imports, restores), and a statement
-- trigger on each history table turns the statement's new history into row changes; a row trigger on
-- `data_tables` records table and schema changes. `change_commits` gives each (database, transaction) one
-- `position`, handed out at COMMIT (a deferred constraint trigger) under a per-database transaction advisory lock,
-- so positions follow commit order: PostgreSQL releases the lock only after the commit is visible, so a reader
-- that sees position p already sees every position below p of that database. Readers page by (position, seq).

CREATE SEQUENCE "change_seq" AS bigint;
CREATE SEQUENCE "change_positions" AS bigint;

CREATE TABLE "changes" (
    "database_id"    CHAR(26) NOT NULL,
    "txid"           XID8 NOT NULL DEFAULT pg_current_xact_id(),
    "seq"            BIGINT NOT NULL DEFAULT nextval('change_seq'),
    "kind"           VARCHAR(32) NOT NULL,
    "table_id"       CHAR(26) NOT NULL,
    "row_id"         CHAR(26),
    "version"        BIGINT,
    "schema_version" INTEGER,
    "mutation_id"    CHAR(26) NOT NULL,
    "actor_id"       CHAR(26) NOT NULL,
    "actor_kind"     VARCHAR(16) NOT NULL,
    "values"         JSONB,
    "previous"       JSONB,

    CONSTRAINT "changes_pkey" PRIMARY KEY ("database_id", "txid", "seq")
);

CREATE TABLE "change_commits" (
    "database_id"  CHAR(26) NOT NULL,
    "txid"         XID8 NOT NULL DEFAULT pg_current_xact_id(),
    "position"     BIGINT,
    "committed_at" TIMESTAMPTZ(3),

    CONSTRAINT "change_commits_pkey" PRIMARY KEY ("database_id", "txid")
);

CREATE UNIQUE INDEX "change_commits_database_id_position_key" ON "change_commits"("database_id", "position");
CREATE INDEX "change_commits_committed_at_idx" ON "change_commits"("committed_at");

-- What retention removed, per database: a cursor below (position, seq) may have missed changes (410).
CREATE TABLE "change_feeds" (
    "database_id"     CHAR(26) NOT NULL,
    "pruned_position" BIGINT NOT NULL,
    "pruned_seq"      BIGINT NOT NULL,

    CONSTRAINT "change_feeds_pkey" PRIMARY KEY ("database_id")
);

-- Runs once per (database, transaction), at COMMIT, after the transaction's other work: the lock makes commits to
-- one database take turns from here to the end of their COMMIT, which is what makes positions commit-ordered.
CREATE FUNCTION "wds_assign_change_position"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(27, hashtext(NEW.database_id));
  UPDATE public.change_commits SET position = nextval('public.change_positions'), committed_at = clock_timestamp()
   WHERE database_id = NEW.database_id AND txid = NEW.txid;
  PERFORM pg_notify('wds_changes', NEW.database_id);
  RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER "change_commits_assign_position"
  AFTER INSERT ON "change_commits" DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION "wds_assign_change_position"();

-- A fresh ULID (Crockford base32 of 48 bits of milliseconds and 80 random bits), for changes that carry no
-- mutation id of their own.
CREATE FUNCTION "wds_new_id"() RETURNS char(26) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  alphabet CONSTANT text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  millis bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
  bytes bytea := wds_random_bytes();
  result text := '';
  i int;
  bits int := 0;
  acc bigint := 0;
BEGIN
  FOR i IN REVERSE 9..0 LOOP
    result := result || substr(alphabet, ((millis >> (i * 5)) & 31)::int + 1, 1);
  END LOOP;
  FOR i IN 0..9 LOOP
    acc := (acc << 8) | get_byte(bytes, i);
    bits := bits + 8;
    WHILE bits >= 5 LOOP
      bits := bits - 5;
      result := result || substr(alphabet, ((acc >> bits) & 31)::int + 1, 1);
    END LOOP;
  END LOOP;
  RETURN result;
END;
$$;

-- pgcrypto may not be installed; 10 random bytes from two UUIDs' random parts is enough for an id.
CREATE FUNCTION "wds_random_bytes"() RETURNS bytea LANGUAGE sql VOLATILE AS $$
  SELECT substring(decode(replace(gen_random_uuid()::text, '-', ''), 'hex') FROM 7 FOR 10)
$$;

-- Who made a change that is not a row write: the transaction's `wds.actor` setting ("kind:id:mutationId", set by
-- the service around schema changes), else the running schema job of the table, else the system.
CREATE FUNCTION "wds_change_actor"(p_table_id char(26), OUT actor_kind text, OUT actor_id char(26), OUT mutation_id char(26))
LANGUAGE plpgsql STABLE AS $$
DECLARE
  setting text := current_setting('wds.actor', true);
  parts text[];
BEGIN
  IF setting IS NOT NULL AND setting <> '' THEN
    parts := string_to_array(setting, ':');
    actor_kind := parts[1];
    actor_id := parts[2];
    mutation_id := parts[3];
    RETURN;
  END IF;
  SELECT j.actor_kind, j.actor_id, j.id INTO actor_kind, actor_id, mutation_id
    FROM public.jobs j WHERE j.serial_key = 'schema:' || p_table_id AND j.state IN ('queued', 'running');
  IF NOT FOUND THEN
    actor_kind := 'system';
    actor_id := '00000000000000000000000000';
    mutation_id := NULL;
  END IF;
END;
$$;

-- Table and schema changes: created, renamed, trashed, restored, and every schema-version bump (fields added,
-- changed, removed or reordered; unique rules, foreign keys and indexes added or removed).
CREATE FUNCTION "wds_record_table_changes"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  kinds text[] := '{}';
  kind text;
  actor record;
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
  SELECT * INTO actor FROM public.wds_change_actor(NEW.id);
  INSERT INTO public.change_commits (database_id) VALUES (NEW.database_id) ON CONFLICT DO NOTHING;
  FOREACH kind IN ARRAY kinds LOOP
    INSERT INTO public.changes (database_id, kind, table_id, schema_version, mutation_id, actor_id, actor_kind, "values")
    VALUES (NEW.database_id, kind, NEW.id, NEW.schema_version, coalesce(actor.mutation_id, public.wds_new_id()),
            actor.actor_id, actor.actor_kind,
            CASE WHEN kind IN ('table.created', 'table.renamed') THEN jsonb_build_object('name', NEW.name) END);
  END LOOP;
  RETURN NULL;
END;
$$;

CREATE TRIGGER "data_tables_record_changes"
  AFTER INSERT OR UPDATE OF "name", "state", "schema_version" ON "data_tables"
  FOR EACH ROW EXECUTE FUNCTION "wds_record_table_changes"();

-- Row changes, from the cell history a statement appended (one history table per workspace table, `<schema>.h_<id>`
-- in schema `d_<database id>`). One change per (row, version): `values` is the row after it (current fields), and
-- `previous` the changed cells' values before an update, or the whole row before a delete, read from the history.
CREATE FUNCTION "wds_record_row_changes"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_database char(26) := upper(substr(TG_TABLE_SCHEMA, 3));
  v_table char(26) := upper(substr(TG_TABLE_NAME, 3));
BEGIN
  IF current_setting('wds.changes', true) = 'off' THEN RETURN NULL; END IF;
  INSERT INTO public.change_commits (database_id) SELECT v_database WHERE EXISTS (SELECT 1 FROM new_cells)
    ON CONFLICT DO NOTHING;
  EXECUTE format($q$
    WITH g AS (
      SELECT row_id, version, operation, mutation_id, actor_id, actor_kind, jsonb_object_agg(field_id, value) AS cells
        FROM new_cells GROUP BY row_id, version, operation, mutation_id, actor_id, actor_kind
    )
    INSERT INTO public.changes (database_id, kind, table_id, row_id, version, mutation_id, actor_id, actor_kind, "values", previous)
    SELECT $1, CASE g.operation WHEN 'create' THEN 'row.created' WHEN 'update' THEN 'row.updated'
                                WHEN 'delete' THEN 'row.deleted' ELSE 'row.restored' END,
           $2, g.row_id, g.version, g.mutation_id, g.actor_id, g.actor_kind,
           CASE g.operation WHEN 'delete' THEN NULL WHEN 'update' THEN (
             SELECT jsonb_object_agg(f.id, coalesce((SELECT h.value FROM %1$s h WHERE h.row_id = g.row_id AND h.field_id = f.id
                                                      AND h.version <= g.version ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM public.fields f WHERE f.table_id = $2) ELSE g.cells END,
           CASE g.operation WHEN 'update' THEN (
             SELECT jsonb_object_agg(k.field_id, coalesce((SELECT h.value FROM %1$s h WHERE h.row_id = g.row_id
                                                  AND h.field_id = k.field_id AND h.version < g.version
                                                ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM jsonb_object_keys(g.cells) AS k(field_id))
           WHEN 'delete' THEN (
             SELECT jsonb_object_agg(f.id, coalesce((SELECT h.value FROM %1$s h WHERE h.row_id = g.row_id AND h.field_id = f.id
                                                      AND h.version < g.version ORDER BY h.version DESC LIMIT 1), 'null'))
               FROM public.fields f WHERE f.table_id = $2) END
      FROM g ORDER BY g.row_id, g.version
  $q$, format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME)) USING v_database, v_table;
  RETURN NULL;
END;
$fn$;

-- Tables that exist already get the history trigger new tables get from src/data/ddl.ts.
DO $$
DECLARE
  t record;
BEGIN
  FOR t IN SELECT schemaname, tablename FROM pg_tables WHERE schemaname LIKE 'd\_%' AND tablename LIKE 'h\_%' LOOP
    EXECUTE format('CREATE TRIGGER record_changes AFTER INSERT ON %I.%I REFERENCING NEW TABLE AS new_cells '
                   'FOR EACH STATEMENT EXECUTE FUNCTION public.wds_record_row_changes()', t.schemaname, t.tablename);
  END LOOP;
END;
$$;
