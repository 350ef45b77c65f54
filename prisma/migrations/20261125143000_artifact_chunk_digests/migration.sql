-- Issue 15 follow-up: downloads stream an artifact chunk by chunk, so each chunk carries the sha256 its writer
-- computed; the download checks a chunk before sending any of its bytes. Chunks stored before this migration get
-- the digest of what they hold now.

-- AlterTable
ALTER TABLE "job_artifact_chunks" ADD COLUMN "sha256" CHAR(64);
UPDATE "job_artifact_chunks" SET "sha256" = encode(sha256("data"), 'hex');
ALTER TABLE "job_artifact_chunks" ALTER COLUMN "sha256" SET NOT NULL;
