import type { Route } from './route.ts';
import { activityRoutes } from './routes/activity.ts';
import { backupRoutes } from './routes/backups.ts';
import { changeRoutes } from './routes/changes.ts';
import { databaseRoutes } from './routes/databases.ts';
import { exportRoutes } from './routes/exports.ts';
import { jobRoutes } from './routes/jobs.ts';
import { invitationRoutes } from './routes/invitations.ts';
import { keyRoutes } from './routes/keys.ts';
import { meRoutes } from './routes/me.ts';
import { memberRoutes } from './routes/members.ts';
import { orgRoutes } from './routes/orgs.ts';
import { preferenceRoutes } from './routes/preferences.ts';
import { rowRoutes } from './routes/rows.ts';
import { rowQueryRoutes } from './routes/row-queries.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { tableRoutes } from './routes/tables.ts';
import { trashRoutes } from './routes/trash.ts';
import { viewRoutes } from './routes/views.ts';
import { webhookRoutes } from './routes/webhooks.ts';

/** Every /v1 route. A new domain adds its declarations file under routes/ and one entry here. */
export const routes: readonly Route[] = [
  ...preferenceRoutes,
  ...meRoutes,
  ...orgRoutes,
  ...memberRoutes,
  ...keyRoutes,
  ...invitationRoutes,
  ...sessionRoutes,
  ...databaseRoutes,
  ...tableRoutes,
  ...rowRoutes,
  ...rowQueryRoutes,
  ...viewRoutes,
  ...activityRoutes,
  ...backupRoutes,
  ...jobRoutes,
  ...trashRoutes,
  ...exportRoutes,
  ...changeRoutes,
  ...webhookRoutes,
];
