-- /metrics reports the jobs that failed in the last hour by kind (src/http/metrics.ts) on every scrape: without this
-- partial index that count scanned the whole jobs table, which keeps every finished job until the retention sweep.

-- CreateIndex
CREATE INDEX "jobs_failed_finished_at_idx" ON "jobs"("finished_at") WHERE "state" = 'failed';
