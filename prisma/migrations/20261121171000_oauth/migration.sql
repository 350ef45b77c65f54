-- OAuth 2.0 authorization code + PKCE (issue 6): registered clients, one-time codes, and access/refresh tokens.
-- Only sha256 of every secret (client secret, code, token) is stored.

-- CreateTable
CREATE TABLE "oauth_clients" (
    "id" CHAR(26) NOT NULL,
    "name" VARCHAR(120) NOT NULL,
    "redirect_uris" TEXT[] NOT NULL,
    "secret_hash" CHAR(64),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "oauth_clients_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "oauth_codes" (
    "id" CHAR(26) NOT NULL,
    "code_hash" CHAR(64) NOT NULL,
    "client_id" CHAR(26) NOT NULL,
    "user_id" CHAR(26) NOT NULL,
    "redirect_uri" TEXT NOT NULL,
    "scopes" TEXT[] NOT NULL,
    "code_challenge" VARCHAR(128) NOT NULL,
    "family_id" CHAR(26) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),

    CONSTRAINT "oauth_codes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "oauth_tokens" (
    "id" CHAR(26) NOT NULL,
    "kind" VARCHAR(16) NOT NULL,
    "token_hash" CHAR(64) NOT NULL,
    "family_id" CHAR(26) NOT NULL,
    "client_id" CHAR(26) NOT NULL,
    "user_id" CHAR(26) NOT NULL,
    "scopes" TEXT[] NOT NULL,
    "audience" VARCHAR(255) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "rotated_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "oauth_tokens_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "oauth_tokens_kind_check" CHECK ("kind" IN ('access', 'refresh'))
);

-- CreateIndex
CREATE UNIQUE INDEX "oauth_codes_code_hash_key" ON "oauth_codes"("code_hash");

-- CreateIndex
CREATE UNIQUE INDEX "oauth_tokens_token_hash_key" ON "oauth_tokens"("token_hash");

-- CreateIndex
CREATE INDEX "oauth_tokens_family_id_idx" ON "oauth_tokens"("family_id");

-- AddForeignKey
ALTER TABLE "oauth_codes" ADD CONSTRAINT "oauth_codes_client_id_fkey" FOREIGN KEY ("client_id") REFERENCES "oauth_clients"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_codes" ADD CONSTRAINT "oauth_codes_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_tokens" ADD CONSTRAINT "oauth_tokens_client_id_fkey" FOREIGN KEY ("client_id") REFERENCES "oauth_clients"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_tokens" ADD CONSTRAINT "oauth_tokens_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE;
