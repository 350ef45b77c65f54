-- The catalog of workspace data: databases, tables, fields, unique rules and foreign keys.
-- Rows themselves live in one PostgreSQL schema per database (src/data/ddl.ts), never in these tables.

-- CreateTable
CREATE TABLE "databases" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "name" VARCHAR(120) NOT NULL,
    "state" VARCHAR(16) NOT NULL DEFAULT 'active',
    "version" BIGINT NOT NULL DEFAULT 1,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "databases_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "data_tables" (
    "id" CHAR(26) NOT NULL,
    "org_id" CHAR(26) NOT NULL,
    "database_id" CHAR(26) NOT NULL,
    "name" VARCHAR(120) NOT NULL,
    "state" VARCHAR(16) NOT NULL DEFAULT 'active',
    "version" BIGINT NOT NULL DEFAULT 1,
    "schema_version" INTEGER NOT NULL DEFAULT 1,
    "row_count" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "data_tables_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "fields" (
    "id" CHAR(26) NOT NULL,
    "table_id" CHAR(26) NOT NULL,
    "name" VARCHAR(64) NOT NULL,
    "type" VARCHAR(16) NOT NULL,
    "required" BOOLEAN NOT NULL DEFAULT false,
    "options" JSONB NOT NULL DEFAULT '{}',
    "position" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "fields_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "unique_rules" (
    "id" CHAR(26) NOT NULL,
    "table_id" CHAR(26) NOT NULL,
    "field_ids" CHAR(26)[] NOT NULL,
    "where" JSONB,
    "state" VARCHAR(16) NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "unique_rules_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "foreign_keys" (
    "id" CHAR(26) NOT NULL,
    "table_id" CHAR(26) NOT NULL,
    "field_ids" CHAR(26)[] NOT NULL,
    "referenced_table_id" CHAR(26) NOT NULL,
    "referenced_rule_id" CHAR(26) NOT NULL,
    "state" VARCHAR(16) NOT NULL DEFAULT 'active',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "foreign_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "service_secrets" (
    "name" VARCHAR(64) NOT NULL,
    "value" VARCHAR(128) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "service_secrets_pkey" PRIMARY KEY ("name")
);

-- CreateIndex
CREATE INDEX "databases_org_id_created_at_idx" ON "databases"("org_id", "created_at");

-- Names are unique per org (databases) and per database (tables) ignoring case; Prisma cannot express these.
CREATE UNIQUE INDEX "databases_org_id_lower_name_key" ON "databases"("org_id", lower("name"));
CREATE UNIQUE INDEX "data_tables_database_id_lower_name_key" ON "data_tables"("database_id", lower("name"));

-- CreateIndex
CREATE INDEX "data_tables_database_id_created_at_idx" ON "data_tables"("database_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "fields_table_id_position_key" ON "fields"("table_id", "position");

-- Field names are unique per table ignoring case, so that a request may address a cell by name.
CREATE UNIQUE INDEX "fields_table_id_lower_name_key" ON "fields"("table_id", lower("name"));

-- CreateIndex
CREATE INDEX "unique_rules_table_id_idx" ON "unique_rules"("table_id");

-- CreateIndex
CREATE INDEX "foreign_keys_table_id_created_at_idx" ON "foreign_keys"("table_id", "created_at");

-- CreateIndex
CREATE INDEX "foreign_keys_referenced_table_id_idx" ON "foreign_keys"("referenced_table_id");

-- AddForeignKey
ALTER TABLE "databases" ADD CONSTRAINT "databases_org_id_fkey" FOREIGN KEY ("org_id") REFERENCES "orgs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "data_tables" ADD CONSTRAINT "data_tables_database_id_fkey" FOREIGN KEY ("database_id") REFERENCES "databases"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "fields" ADD CONSTRAINT "fields_table_id_fkey" FOREIGN KEY ("table_id") REFERENCES "data_tables"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "unique_rules" ADD CONSTRAINT "unique_rules_table_id_fkey" FOREIGN KEY ("table_id") REFERENCES "data_tables"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "foreign_keys" ADD CONSTRAINT "foreign_keys_table_id_fkey" FOREIGN KEY ("table_id") REFERENCES "data_tables"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "foreign_keys" ADD CONSTRAINT "foreign_keys_referenced_table_id_fkey" FOREIGN KEY ("referenced_table_id") REFERENCES "data_tables"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "foreign_keys" ADD CONSTRAINT "foreign_keys_referenced_rule_id_fkey" FOREIGN KEY ("referenced_rule_id") REFERENCES "unique_rules"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
