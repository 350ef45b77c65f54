-- Issue 27: the NOTIFY arm of a database's change feed moves out of `change_feed` into a row of its own
-- (`d_<id>.change_arm`), and a committing writer that finds that row locked skips it (`FOR UPDATE SKIP LOCKED`)
-- instead of queueing on it. Before, every writer committing while the feed was armed read `armed = true` and its
-- disarming UPDATE waited for the row lock of the first one, held through that one's COMMIT (WAL flush and NOTIFY):
-- each arm queued the commits in flight behind one (bench row (1) 0.38, docs/decisions/changes.md). The arm needs a
-- row of its own so that the sequencer's `FOR UPDATE` on `change_feed` is never taken for a disarm in progress.

CREATE OR REPLACE FUNCTION "wds_create_change_feed"(p_database char(26)) RETURNS void LANGUAGE plpgsql AS $fn$
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
    pruned_seq bigint NOT NULL DEFAULT 0)$q$, s);
  EXECUTE format('INSERT INTO %s.change_feed DEFAULT VALUES', s);
  -- Whether a reader waits for a NOTIFY. Starts armed: the webhook deliverer learns of a new database from its first
  -- commit.
  EXECUTE format($q$CREATE TABLE %1$s.change_arm (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    armed boolean NOT NULL DEFAULT true)$q$, s);
  EXECUTE format('INSERT INTO %s.change_arm DEFAULT VALUES', s);
  EXECUTE format('CREATE CONSTRAINT TRIGGER committed AFTER INSERT ON %s.change_commits DEFERRABLE INITIALLY DEFERRED '
                 'FOR EACH ROW EXECUTE FUNCTION public.wds_changes_committed()', s);
END;
$fn$;

-- At COMMIT of a transaction that recorded changes in a database (once per transaction and database): if a reader
-- armed the feed, the first committing writer to lock the arm row disarms it and sends NOTIFY; a writer that finds
-- the row locked skips it (that writer's NOTIFY, sent when it commits, wakes the readers). The shared lock, held
-- from here to the end of the COMMIT, pairs with the exclusive one a reader takes to arm (src/catalog/changes.ts
-- `armChangeFeed`): a commit that checked before the arm, or skipped it, is visible before the next arm commits, so
-- the reader's read after arming sees it; a commit that checks after sees the arm. Only a disarming writer can hold
-- the row's lock here: an arm writes it under the exclusive lock, which no writer holds its shared one beside.
CREATE OR REPLACE FUNCTION "wds_changes_committed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_database char(26) := upper(substr(TG_TABLE_SCHEMA, 3));
  claimed boolean;
BEGIN
  PERFORM pg_advisory_xact_lock_shared(27, hashtext(v_database));
  EXECUTE format('SELECT true FROM %I.change_arm WHERE armed FOR UPDATE SKIP LOCKED', TG_TABLE_SCHEMA) INTO claimed;
  IF claimed THEN
    EXECUTE format('UPDATE %I.change_arm SET armed = false', TG_TABLE_SCHEMA);
    PERFORM pg_notify('wds_changes', v_database);
  END IF;
  RETURN NULL;
END;
$fn$;
-- CREATE OR REPLACE resets a function's settings (see *_change_feed_no_jit).
ALTER FUNCTION "wds_changes_committed"() SET jit = off;

-- Every existing feed gets its arm row, armed as its feed was.
DO $$
DECLARE
  d record;
  s text;
BEGIN
  FOR d IN SELECT id FROM public.databases WHERE to_regclass(format('%I.change_feed', 'd_' || lower(id))) IS NOT NULL LOOP
    s := format('%I', 'd_' || lower(d.id));
    EXECUTE format($q$CREATE TABLE %1$s.change_arm (
      singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
      armed boolean NOT NULL DEFAULT true)$q$, s);
    EXECUTE format('INSERT INTO %1$s.change_arm (armed) SELECT armed FROM %1$s.change_feed', s);
    EXECUTE format('ALTER TABLE %s.change_feed DROP COLUMN armed', s);
  END LOOP;
END;
$$;
