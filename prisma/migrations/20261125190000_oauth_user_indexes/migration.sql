-- A user's grants (GET /v1/me/oauth-grants, src/graph/oauth-grants.ts) and what `cli set-password` revokes are read
-- by user_id, which scanned every user's tokens and codes. (user_id, family_id) also serves the grant page's keyset.

-- CreateIndex
CREATE INDEX "oauth_tokens_user_id_family_id_idx" ON "oauth_tokens"("user_id", "family_id");

-- CreateIndex
CREATE INDEX "oauth_codes_user_id_idx" ON "oauth_codes"("user_id");
