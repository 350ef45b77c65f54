-- Durable jobs (issue 5): a PostgreSQL queue on the catalog. A job row is inserted in the transaction of the
-- request that creates it; workers claim with FOR UPDATE SKIP LOCKED under a lease (src/jobs/sql/queue.ts).

-- CreateEnum
CREATE TYPE "JobState" AS ENUM ('queued', 'running', 'succeeded', 'failed', 'partially_completed', 'cancelled');

-- CreateTable
CREATE TABLE "jobs" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "kind" VARCHAR(64) NOT NULL,
    "database_id" CHAR(26),
    "table_id" CHAR(26),
    "state" "JobState" NOT NULL DEFAULT 'queued',
    "payload" JSONB NOT NULL,
    "journal" JSONB NOT NULL DEFAULT '{}',
    "progress_done" BIGINT NOT NULL DEFAULT 0,
    "progress_total" BIGINT,
    "result" JSONB,
    "error" JSONB,
    "last_error" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "max_attempts" INTEGER NOT NULL DEFAULT 5,
    "run_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "lease_token" CHAR(26),
    "lease_owner" VARCHAR(128),
    "lease_expires_at" TIMESTAMPTZ(3),
    "heartbeat_at" TIMESTAMPTZ(3),
    "cancel_requested" BOOLEAN NOT NULL DEFAULT false,
    "serial_key" VARCHAR(128),
    "actor_id" CHAR(26) NOT NULL,
    "actor_kind" VARCHAR(16) NOT NULL,
    "actor_key" VARCHAR(32),
    "actor_name" VARCHAR(120) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMPTZ(3),
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "jobs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "job_artifacts" (
    "job_id" CHAR(26) NOT NULL,
    "name" VARCHAR(128) NOT NULL,
    "content_type" VARCHAR(64) NOT NULL,
    "content" BYTEA NOT NULL,
    "size_bytes" BIGINT NOT NULL,
    "sha256" CHAR(64) NOT NULL,
    "listed" BOOLEAN NOT NULL DEFAULT true,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "job_artifacts_pkey" PRIMARY KEY ("job_id", "name")
);

-- CreateIndex
CREATE INDEX "jobs_org_id_created_at_id_idx" ON "jobs"("org_id", "created_at" DESC, "id" DESC);

-- The claim query's two scans: due queued jobs, and running jobs whose lease ran out.
CREATE INDEX "jobs_queued_run_at_idx" ON "jobs"("run_at") WHERE "state" = 'queued';
CREATE INDEX "jobs_running_lease_idx" ON "jobs"("lease_expires_at") WHERE "state" = 'running';

-- At most one unfinished job per serial key (one schema change per table at a time): a second gets
-- SCHEMA_MAINTENANCE at request time instead of interleaving (pg-boss singleton_key, Graphile job_key).
CREATE UNIQUE INDEX "jobs_serial_key_active_key" ON "jobs"("serial_key") WHERE "state" IN ('queued', 'running');

-- AddForeignKey
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "job_artifacts" ADD CONSTRAINT "job_artifacts_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Where import jobs stage parsed rows between checkpoints (tables named after the job id, dropped when done).
CREATE SCHEMA IF NOT EXISTS "wds_jobs";
