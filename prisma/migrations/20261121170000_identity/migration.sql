-- Identity and access (issue 6): invitations, and the login state of users (lockout, TOTP).

-- AlterTable
ALTER TABLE "users" ADD COLUMN "failed_logins" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN "locked_until" TIMESTAMPTZ(3),
ADD COLUMN "totp_secret" VARCHAR(64);

-- CreateTable
CREATE TABLE "invitations" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "email" TEXT NOT NULL,
    "role" "Role" NOT NULL,
    "token_hash" CHAR(64) NOT NULL,
    "invited_by_user_id" CHAR(26) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "accepted_at" TIMESTAMPTZ(3),
    "accepted_by_user_id" CHAR(26),
    "cancelled_at" TIMESTAMPTZ(3),

    CONSTRAINT "invitations_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "invitations_token_hash_key" ON "invitations"("token_hash");

-- CreateIndex
CREATE INDEX "invitations_org_id_created_at_idx" ON "invitations"("org_id", "created_at");

-- One open invitation per address and org (not in schema.prisma: Prisma cannot express a partial index).
CREATE UNIQUE INDEX "invitations_open_email_key" ON "invitations"("org_id", "email") WHERE "accepted_at" IS NULL AND "cancelled_at" IS NULL;

-- AddForeignKey
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "invitations" ADD CONSTRAINT "invitations_invited_by_user_id_fkey" FOREIGN KEY ("invited_by_user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
