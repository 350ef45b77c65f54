-- RFC 6238 §5.2: a TOTP code is accepted once. The last accepted time step is remembered per user.

-- AlterTable
ALTER TABLE "users" ADD COLUMN "totp_last_step" INTEGER;
