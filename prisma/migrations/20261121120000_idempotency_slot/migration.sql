-- `slot` is the first 64 bits of sha256(actor_key || '\n' || key), as a signed bigint: the advisory lock id of the
-- key and a lookup column. Both depend only on IDs and a digest, so the lock and the lookup can travel as
-- parameter-free SQL in the same round trip as BEGIN (src/graph/idempotency.ts).
ALTER TABLE "idempotency_records" ADD COLUMN "slot" BIGINT;
UPDATE "idempotency_records"
   SET "slot" = ('x' || substr(encode(sha256(convert_to("actor_key" || E'\n' || "key", 'UTF8')), 'hex'), 1, 16))::bit(64)::bigint;
ALTER TABLE "idempotency_records" ALTER COLUMN "slot" SET NOT NULL;
CREATE INDEX "idempotency_records_slot_idx" ON "idempotency_records"("slot");
