-- Backups and restores (issue 16): the catalog of backups taken, each database's schedule and retention policy,
-- and one row per scheduled instant that makes "one run per due time" hold across any number of workers.

-- CreateTable
CREATE TABLE "backups" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "database_id" CHAR(26) NOT NULL,
    "format_version" INTEGER NOT NULL,
    "destination" VARCHAR(16) NOT NULL,
    "location" VARCHAR(512) NOT NULL,
    "size_bytes" BIGINT NOT NULL,
    "sha256" CHAR(64) NOT NULL,
    "tables" INTEGER NOT NULL,
    "rows" BIGINT NOT NULL,
    "scheduled_for" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3),
    "pruned_at" TIMESTAMPTZ(3),

    CONSTRAINT "backups_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "backups_database_id_created_at_idx" ON "backups"("database_id", "created_at" DESC);

-- AddForeignKey
ALTER TABLE "backups" ADD CONSTRAINT "backups_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- CreateTable
CREATE TABLE "backup_settings" (
    "database_id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "cron" VARCHAR(256),
    "timezone" VARCHAR(100),
    "next_run_at" TIMESTAMPTZ(3),
    "keep_last" INTEGER,
    "keep_days" INTEGER,
    "last_success_at" TIMESTAMPTZ(3),
    "failed_job_id" CHAR(26),
    "overdue_since" TIMESTAMPTZ(3),
    "actor_id" CHAR(26) NOT NULL,
    "actor_kind" VARCHAR(16) NOT NULL,
    "actor_key" VARCHAR(32),
    "actor_name" VARCHAR(120) NOT NULL,
    "version" BIGINT NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "backup_settings_pkey" PRIMARY KEY ("database_id")
);

-- CreateIndex
CREATE INDEX "backup_settings_next_run_at_idx" ON "backup_settings"("next_run_at");

-- AddForeignKey
ALTER TABLE "backup_settings" ADD CONSTRAINT "backup_settings_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- CreateTable
CREATE TABLE "backup_runs" (
    "database_id" CHAR(26) NOT NULL,
    "scheduled_for" TIMESTAMPTZ(3) NOT NULL,
    "job_id" CHAR(26) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "backup_runs_pkey" PRIMARY KEY ("database_id", "scheduled_for")
);
