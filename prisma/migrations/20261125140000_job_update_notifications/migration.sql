-- Issue 17: live job progress. Every change of a job's state or progress notifies `wds_job_updated` with the job's
-- id, whichever statement made it (claim, checkpoint, finish, retry, cancel, requeue, sweeps), so the streams of
-- every API process learn of it through their one LISTEN connection. NOTIFY is delivered at commit, so a listener
-- never reads a change that is not yet visible; PostgreSQL folds identical notifications of one transaction.

CREATE FUNCTION "notify_job_updated"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('wds_job_updated', NEW.id);
  RETURN NULL;
END;
$$;

CREATE TRIGGER "jobs_notify_updated"
  AFTER UPDATE OF "state", "progress_done", "progress_total" ON "jobs"
  FOR EACH ROW
  WHEN (OLD."state" IS DISTINCT FROM NEW."state"
     OR OLD."progress_done" IS DISTINCT FROM NEW."progress_done"
     OR OLD."progress_total" IS DISTINCT FROM NEW."progress_total")
  EXECUTE FUNCTION "notify_job_updated"();
