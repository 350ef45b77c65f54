-- Issue 27: webhooks. An endpoint (a row of `webhooks`) follows the change feed of its org's databases and keeps
-- its own delivery state: the feed position it has delivered up to in each database, the one message in flight
-- (kept until it is answered 2xx, so every retry and every resume after a crash sends the same webhook-id and body),
-- the failed attempts of that message and when the next one is due. Workers serialise one endpoint's deliveries
-- with a session advisory lock (docs/decisions/webhooks.md), not with a row lock held across the HTTP call.

CREATE TABLE "webhooks" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "url" VARCHAR(2048) NOT NULL,
    "description" VARCHAR(500) NOT NULL DEFAULT '',
    "events" TEXT[] NOT NULL,
    "database_id" CHAR(26),
    "table_ids" CHAR(26)[] NOT NULL DEFAULT '{}',
    "state" VARCHAR(16) NOT NULL DEFAULT 'active',
    "version" BIGINT NOT NULL DEFAULT 1,
    -- AES-256-GCM sealed signing secrets (src/catalog/webhook-secrets.ts); never selected by the API's reads.
    "secret_sealed" TEXT NOT NULL,
    "previous_secret_sealed" TEXT,
    "previous_secret_expires_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "disabled_at" TIMESTAMPTZ(3),
    "disabled_reason" VARCHAR(500),
    -- Delivery state: the message in flight (null when idle) and its failed attempts so far. `generation` moves when
    -- the positions are moved by anything but a delivery (replay, a changed scope): a deliverer that read the old
    -- ones then writes nothing.
    "message" JSONB,
    "generation" INTEGER NOT NULL DEFAULT 0,
    "failed_attempts" INTEGER NOT NULL DEFAULT 0,
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhooks_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "webhooks_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE CASCADE,
    CONSTRAINT "webhooks_state_check" CHECK ("state" IN ('active', 'disabled'))
);

CREATE INDEX "webhooks_org_id_id_idx" ON "webhooks" ("org_id", "id");
-- The deliverer's scan: active endpoints whose next attempt is due.
CREATE INDEX "webhooks_due_idx" ON "webhooks" ("next_attempt_at") WHERE "state" = 'active';

-- Where an endpoint stands in each database's feed: the (position, seq) of the last change it delivered. A
-- database with no row is followed from its first retained change (it was created after the endpoint).
CREATE TABLE "webhook_positions" (
    "webhook_id" CHAR(26) NOT NULL,
    "database_id" CHAR(26) NOT NULL,
    "position" BIGINT NOT NULL,
    "seq" BIGINT NOT NULL,

    CONSTRAINT "webhook_positions_pkey" PRIMARY KEY ("webhook_id", "database_id"),
    CONSTRAINT "webhook_positions_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE
);

-- Messages outside the feed (a `webhook.test`), delivered before the endpoint's next change, once each.
CREATE TABLE "webhook_messages" (
    "id" CHAR(26) NOT NULL,
    "webhook_id" CHAR(26) NOT NULL,
    "type" VARCHAR(64) NOT NULL,
    "data" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_messages_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "webhook_messages_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE
);

CREATE INDEX "webhook_messages_webhook_id_id_idx" ON "webhook_messages" ("webhook_id", "id");

-- Every attempt, answered or not: what `GET …/webhooks/{id}/deliveries` lists. At most 4 KiB of a response body.
CREATE TABLE "webhook_attempts" (
    "id" CHAR(26) NOT NULL,
    "webhook_id" CHAR(26) NOT NULL,
    "message_id" VARCHAR(64) NOT NULL,
    "type" VARCHAR(64) NOT NULL,
    "cursor" TEXT,
    "attempt" INTEGER NOT NULL,
    "status_code" INTEGER,
    "duration_ms" INTEGER NOT NULL,
    "error" VARCHAR(500),
    "response_body" TEXT,
    "succeeded" BOOLEAN NOT NULL,
    "next_attempt_at" TIMESTAMPTZ(3),
    "attempted_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_attempts_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "webhook_attempts_webhook_id_fkey" FOREIGN KEY ("webhook_id") REFERENCES "webhooks"("id") ON DELETE CASCADE
);

CREATE INDEX "webhook_attempts_webhook_id_id_idx" ON "webhook_attempts" ("webhook_id", "id");
CREATE INDEX "webhook_attempts_attempted_at_idx" ON "webhook_attempts" ("attempted_at");
