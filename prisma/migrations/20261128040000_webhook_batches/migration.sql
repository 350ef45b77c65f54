-- Opt-in batches (docs/decisions/webhooks.md, "Batches"): an endpoint with `batch_max_changes` receives up to that
-- many changes of one feed per message (`{type: "changes", data: {changes: […]}}`); null keeps one change per
-- message, the body the issue specifies.
ALTER TABLE "webhooks" ADD COLUMN "batch_max_changes" INTEGER,
  ADD CONSTRAINT "webhooks_batch_max_changes_check" CHECK ("batch_max_changes" BETWEEN 1 AND 1000);

-- The message in flight is kept as the text it was sent as (`json`, not `jsonb`, which reorders an object's keys):
-- every retry, and the resend after a crash, carries the same body byte for byte, not only the same webhook-id.
ALTER TABLE "webhooks" ALTER COLUMN "message" TYPE JSON USING "message"::json;
