-- Issue 18 §3: the name an org's admin gives a member stays in that org (spec 2.5's Member is per org).
-- NULL: the member shows the user's own profile name.

-- AlterTable
ALTER TABLE "members" ADD COLUMN "name" VARCHAR(120);
