import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { builder } from './builder.ts';
import './scalars.ts';
import './preferences.ts';
import './orgs.ts';
import './members.ts';
import './keys/personal.ts';
import './keys/team.ts';
import './invitations.ts';
import './sessions.ts';
import './email-verification.ts';
import './oauth-grants.ts';
import './databases.ts';
import './database-changes.ts';
import './tables/tables.ts';
import './tables/table-changes.ts';
import './tables/schema.ts';
import './tables/rows.ts';
import './tables/row-batch.ts';
import './tables/row-restore.ts';
import './tables/row-pages.ts';
import './tables/unique-rules.ts';
import './tables/foreign-keys.ts';
import './tables/constraint-jobs.ts';
import './tables/rule-deletion.ts';
import './views/operations.ts';
import './backup-schedule.ts';
import './backups/backups.ts';
import './backups/schedule.ts';
import './activity-feed.ts';
import './jobs/jobs.ts';
import './jobs/artifacts.ts';
import './jobs/updates.ts';
import './changes/changes.ts';
import './imports.ts';
import './exports.ts';
import './schema-changes.ts';
import './trash/trash.ts';
import './edges/org.ts';
import './edges/database.ts';
import './edges/table.ts';
import './edges/view.ts';
import './edges/row.ts';

/** The whole graph: every domain file above registers its types, queries and mutations on the builder. */
export const schema: GraphQLSchema = builder.toSchema({ sortSchema: true });

export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
