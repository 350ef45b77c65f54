-- Issue 18: the claim orders orgs by their running jobs and their latest job start, and enqueue counts an org's
-- queued jobs against its cap. These partial indexes keep each of those an index probe per org.

-- CreateIndex
CREATE INDEX "jobs_org_active_idx" ON "jobs"("org_id", "state") WHERE "state" IN ('queued', 'running');

-- CreateIndex
CREATE INDEX "jobs_org_started_at_idx" ON "jobs"("org_id", "started_at" DESC) WHERE "started_at" IS NOT NULL;
