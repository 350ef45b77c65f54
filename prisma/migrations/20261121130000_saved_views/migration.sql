-- Saved views (spec 2.2). Rows are never stored here: a view is a definition applied when rows are read.

-- CreateTable
CREATE TABLE "saved_views" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "table_id" CHAR(26) NOT NULL,
    "name" VARCHAR(120) NOT NULL,
    "visibility" VARCHAR(16) NOT NULL,
    "owner_user_id" CHAR(26),
    "owner_name" VARCHAR(120) NOT NULL,
    "version" BIGINT NOT NULL DEFAULT 1,
    "schema_version" INTEGER NOT NULL,
    "definition" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "saved_views_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "saved_views_visibility_check" CHECK ("visibility" IN ('personal', 'shared')),
    CONSTRAINT "saved_views_personal_owner_check" CHECK ("visibility" = 'shared' OR "owner_user_id" IS NOT NULL)
);

-- CreateIndex
CREATE INDEX "saved_views_table_id_visibility_owner_user_id_idx" ON "saved_views"("table_id", "visibility", "owner_user_id");

-- AddForeignKey
ALTER TABLE "saved_views" ADD CONSTRAINT "saved_views_table_id_fkey" FOREIGN KEY ("table_id") REFERENCES "data_tables"("id") ON DELETE CASCADE ON UPDATE CASCADE;
