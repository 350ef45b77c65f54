-- Sort indexes (issue 14): declared by add_index or built for a shared view's orderBy.

-- AlterTable
ALTER TABLE "data_tables" ADD COLUMN "index_version" INTEGER NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "table_indexes" (
    "id" CHAR(26) NOT NULL,
    "table_id" CHAR(26) NOT NULL,
    "keys" JSONB NOT NULL,
    "signature" VARCHAR(300) NOT NULL,
    "origin" VARCHAR(16) NOT NULL,
    "state" VARCHAR(16) NOT NULL DEFAULT 'building',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "table_indexes_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "table_indexes_table_id_signature_key" ON "table_indexes"("table_id", "signature");

-- AddForeignKey
ALTER TABLE "table_indexes" ADD CONSTRAINT "table_indexes_table_id_fkey" FOREIGN KEY ("table_id") REFERENCES "data_tables"("id") ON DELETE CASCADE ON UPDATE CASCADE;
