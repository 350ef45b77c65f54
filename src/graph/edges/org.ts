import { builder } from '../server/builder.ts';
import { DatabasePage, listDatabases } from '../databases/databases.ts';
import { JobKindFilter, JobStateFilter } from '../../contracts/jobs.ts';
import { JobPage, listJobs } from '../jobs/jobs.ts';
import { listMembers, MemberPage } from '../members/members.ts';
import { Org } from '../orgs/orgs.ts';
import { edgePageArgs, pageArgsOf } from './page-args.ts';

/**
 * Edges out of an org. Each needs what its root query needs (the org role and the OAuth scope), checked against
 * the org it hangs from; nullable, so a refusal nulls the edge and leaves the rest of the answer.
 */
builder.objectFields(Org, (t) => ({
  databases: t.field({
    type: DatabasePage,
    nullable: true,
    description: 'The org’s databases, oldest first (as the `databases` query).',
    args: edgePageArgs,
    authScopes: (org) => ({ org: { orgId: org.id, capability: 'read' }, oauth: 'databases:read' }),
    resolve: (org, args, context) => listDatabases(context, org.id, pageArgsOf(args)),
  }),
  members: t.field({
    type: MemberPage,
    nullable: true,
    description: 'The org’s members, oldest membership first (as the `members` query).',
    args: edgePageArgs,
    authScopes: (org) => ({ org: { orgId: org.id, capability: 'read' }, oauth: 'members:read' }),
    resolve: (org, args, context) => listMembers(context, org.id, pageArgsOf(args)),
  }),
  jobs: t.field({
    type: JobPage,
    nullable: true,
    description: 'The org’s jobs, newest first, optionally of one state or kind (as the `jobs` query).',
    args: {
      ...edgePageArgs,
      state: t.arg.string({ validate: JobStateFilter.optional() }),
      kind: t.arg.string({ validate: JobKindFilter.optional() }),
    },
    authScopes: (org) => ({ org: { orgId: org.id, capability: 'read' }, oauth: 'jobs:read' }),
    resolve: (org, args, context) =>
      listJobs(context, org.id, { ...pageArgsOf(args), state: args.state ?? null, kind: args.kind ?? null }),
  }),
}));
