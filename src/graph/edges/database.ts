import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { Database } from '../databases/databases.ts';
import { notFound } from '../../kernel/errors.ts';
import { requestLoader } from '../server/loaders.ts';
import { Org, toOrgShape, type OrgShape } from '../orgs/orgs.ts';
import { pageOfTables, TablePage } from '../tables/tables.ts';
import { edgePageArgs, pageArgsOf } from './page-args.ts';

/** The orgs of a page of databases, in one statement. */
function orgOf(context: Context, orgId: string): Promise<OrgShape> {
  const loader = requestLoader<string, OrgShape>(
    context,
    'orgsById',
    async (ids) => {
      const rows = await context.prisma.org.findMany({ where: { id: { in: [...ids] } } });
      const byId = new Map(rows.map((row) => [row.id, toOrgShape(row)]));
      return ids.map((id) => byId.get(id) ?? notFound('organisation'));
    },
    (id) => id,
  );
  return loader.load(orgId);
}

/** Edges out of a database; the parent was read under the caller's authority, so its org is the one to check. */
builder.objectFields(Database, (t) => ({
  org: t.field({
    type: Org,
    nullable: true,
    description: 'The organisation that owns the database (as the `org` query).',
    authScopes: (database) => ({ org: { orgId: database.orgId, capability: 'read' }, oauth: 'org:read' }),
    resolve: (database, _args, context) => orgOf(context, database.orgId),
  }),
  tables: t.field({
    type: TablePage,
    nullable: true,
    description:
      'The database’s tables, oldest first (as the `tables` query); pages of many databases are read together.',
    args: edgePageArgs,
    authScopes: (database) => ({ org: { orgId: database.orgId, capability: 'read' }, oauth: 'tables:read' }),
    resolve: (database, args, context) => pageOfTables(context, database.orgId, database.id, pageArgsOf(args)),
  }),
}));
