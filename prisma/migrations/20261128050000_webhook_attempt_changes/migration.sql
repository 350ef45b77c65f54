-- How many changes each attempted message carried (docs/decisions/webhooks.md, "Batches"): 1 for a single change,
-- up to the endpoint's `batch_max_changes` for a batch, 0 for a test message.
ALTER TABLE "webhook_attempts" ADD COLUMN "changes" INTEGER NOT NULL DEFAULT 1;
UPDATE "webhook_attempts" SET "changes" = 0 WHERE "type" = 'webhook.test';
