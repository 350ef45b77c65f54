-- Artifacts (a 4 MiB import upload, error reports) are stored out of line without compression: pglz took ~105 ms of
-- a preview request for a 4 MiB CSV (27 ms uncompressed, `npm run bench`), for space they hold only until they expire.
ALTER TABLE "job_artifacts" ALTER COLUMN "content" SET STORAGE EXTERNAL;
