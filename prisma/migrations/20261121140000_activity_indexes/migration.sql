-- The activity feed's filters as keyset index ranges (issue 7): by category, by database, by table, and the
-- distinct actors of an org (filter options walk this index instead of scanning the feed).

-- CreateIndex
CREATE INDEX "activity_events_org_id_category_occurred_at_id_idx" ON "activity_events"("org_id", "category", "occurred_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "activity_events_database_id_occurred_at_id_idx" ON "activity_events"("database_id", "occurred_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "activity_events_table_id_occurred_at_id_idx" ON "activity_events"("table_id", "occurred_at" DESC, "id" DESC);

-- CreateIndex
CREATE INDEX "activity_events_org_id_actor_id_occurred_at_idx" ON "activity_events"("org_id", "actor_id", "occurred_at" DESC);
