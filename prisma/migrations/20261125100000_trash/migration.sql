-- Issue 13: a trashed database or table keeps its catalog rows and data (so a restore is exact and instant) with
-- who trashed it, when, until when it is kept, and the job that purges it then.
ALTER TABLE "databases"
    ADD COLUMN "deleted_at" TIMESTAMPTZ(3),
    ADD COLUMN "deleted_by_id" CHAR(26),
    ADD COLUMN "deleted_by_name" VARCHAR(120),
    ADD COLUMN "purge_after" TIMESTAMPTZ(3),
    ADD COLUMN "purge_job_id" CHAR(26);

ALTER TABLE "data_tables"
    ADD COLUMN "deleted_at" TIMESTAMPTZ(3),
    ADD COLUMN "deleted_by_id" CHAR(26),
    ADD COLUMN "deleted_by_name" VARCHAR(120),
    ADD COLUMN "purge_after" TIMESTAMPTZ(3),
    ADD COLUMN "purge_job_id" CHAR(26),
    ADD COLUMN "trashed_with_database" BOOLEAN NOT NULL DEFAULT false;

-- A trashed name is free for a new database or table; restoring the old one while the name is taken is refused.
DROP INDEX "databases_org_id_lower_name_key";
CREATE UNIQUE INDEX "databases_org_id_lower_name_key" ON "databases"("org_id", lower("name")) WHERE "state" = 'active';
DROP INDEX "data_tables_database_id_lower_name_key";
CREATE UNIQUE INDEX "data_tables_database_id_lower_name_key" ON "data_tables"("database_id", lower("name")) WHERE "state" = 'active';

-- The trash list of an org, newest deletion first.
CREATE INDEX "databases_trash_idx" ON "databases"("org_id", "deleted_at" DESC, "id" DESC) WHERE "state" = 'trashed';
CREATE INDEX "data_tables_trash_idx" ON "data_tables"("org_id", "deleted_at" DESC, "id" DESC) WHERE "state" = 'trashed';
