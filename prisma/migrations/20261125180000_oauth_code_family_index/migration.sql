-- A grant's consent time is read through its code's family_id (src/graph/auth/step-up.ts), which scanned the table.

-- CreateIndex
CREATE INDEX "oauth_codes_family_id_idx" ON "oauth_codes"("family_id");
