-- Issue 15: exports produce artifacts far larger than one bytea value should hold in a worker's memory (a
-- 1,000,000-row CSV is ~100 MB). Such an artifact is stored as ordered chunks written while the export streams;
-- `chunks` says how many (0: the content is in `job_artifacts.content`, as before).

-- AlterTable
ALTER TABLE "job_artifacts" ADD COLUMN "chunks" INTEGER NOT NULL DEFAULT 0;

-- The XLSX media type (application/vnd.openxmlformats-officedocument.spreadsheetml.sheet) is 65 characters.
ALTER TABLE "job_artifacts" ALTER COLUMN "content_type" SET DATA TYPE VARCHAR(128);

-- CreateTable
CREATE TABLE "job_artifact_chunks" (
    "job_id" CHAR(26) NOT NULL,
    "name" VARCHAR(128) NOT NULL,
    "seq" INTEGER NOT NULL,
    "data" BYTEA NOT NULL,

    CONSTRAINT "job_artifact_chunks_pkey" PRIMARY KEY ("job_id","name","seq")
);

-- Chunks are written once and read whole: compressing 4 MiB values (pglz) cost more than it saves for CSV.
ALTER TABLE "job_artifact_chunks" ALTER COLUMN "data" SET STORAGE EXTERNAL;

-- AddForeignKey
ALTER TABLE "job_artifact_chunks" ADD CONSTRAINT "job_artifact_chunks_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
