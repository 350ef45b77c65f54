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
import './tables/tables.ts';
import './tables/schema.ts';
import './tables/rows.ts';
import './tables/row-pages.ts';
import './tables/unique-rules.ts';
import './tables/foreign-keys.ts';
import './tables/constraint-jobs.ts';
import './views/operations.ts';
import './backup-schedule.ts';
import './activity-feed.ts';
import './jobs/jobs.ts';
import './jobs/artifacts.ts';
import './imports.ts';
import './schema-changes.ts';

/** The whole graph: every domain file above registers its types, queries and mutations on the builder. */
export const schema: GraphQLSchema = builder.toSchema({ sortSchema: true });

export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
