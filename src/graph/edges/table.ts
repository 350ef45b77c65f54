import { requireCaller, requireOrg } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { heavyRead } from '../server/query-limits.ts';
import type { Context } from '../server/context.ts';
import { Database, toDatabaseShape, type DatabaseShape } from '../databases/databases.ts';
import { Id } from '../../kernel/formats.ts';
import { notFound } from '../../kernel/errors.ts';
import { requestLoader } from '../server/loaders.ts';
import type { TableVersion } from '../../catalog/table-schema.ts';
import { readRowPage, RowOrderInput, RowPage } from '../rows/row-pages.ts';
import { aggregateTable, AggregatePage, AggregateRowsInput } from '../rows/row-aggregate.ts';
import { SearchText } from '../../contracts/rows-search.ts';
import {
  ForeignKey,
  schemaOfTable,
  TableSchemaObject,
  toTableSchemaShape,
  UniqueRule,
} from '../tables/schema-endpoint.ts';
import { Table, type TableShape } from '../tables/tables.ts';
import { pageOfViews, SavedViewPage } from '../views/operations.ts';
import { edgePageArgs, pageArgsOf } from './page-args.ts';

/**
 * Edges out of a table. Each checks what its root query checks (org role ∩ OAuth scope) against the table's own
 * org, and reads the table's definition at the version the parent was read at, batched across a page of tables.
 */
function versionOf(table: TableShape): TableVersion {
  return {
    id: table.id,
    orgId: table.orgId,
    databaseId: table.databaseId,
    schemaVersion: table.schemaVersion,
    indexVersion: table.indexVersion,
  };
}

function databaseOf(context: Context, table: TableShape): Promise<DatabaseShape> {
  const loader = requestLoader<string, DatabaseShape>(
    context,
    'databasesById',
    async (ids) => {
      const rows = await context.prisma.database.findMany({ where: { id: { in: [...ids] }, state: 'active' } });
      const byId = new Map(rows.map((row) => [row.id, toDatabaseShape(row)]));
      return ids.map((id) => byId.get(id) ?? notFound('database'));
    },
    (id) => id,
  );
  return loader.load(table.databaseId);
}

const readsTable = (table: TableShape, scope: 'databases:read' | 'schema:read' | 'rows:read') => ({
  org: { orgId: table.orgId, capability: 'read' as const },
  oauth: scope,
});

builder.objectFields(Table, (t) => ({
  database: t.field({
    type: Database,
    nullable: true,
    description: 'The database the table belongs to.',
    authScopes: (table) => readsTable(table, 'databases:read'),
    resolve: (table, _args, context) => databaseOf(context, table),
  }),
  schema: t.field({
    type: TableSchemaObject,
    nullable: true,
    description: 'Fields, unique rules and foreign keys (as the `tableSchema` query).',
    authScopes: (table) => readsTable(table, 'schema:read'),
    resolve: async (table, _args, context) => toTableSchemaShape(await schemaOfTable(context, versionOf(table))),
  }),
  uniqueRules: t.field({
    type: [UniqueRule],
    nullable: true,
    authScopes: (table) => readsTable(table, 'schema:read'),
    resolve: async (table, _args, context) =>
      toTableSchemaShape(await schemaOfTable(context, versionOf(table))).uniqueRules,
  }),
  foreignKeys: t.field({
    type: [ForeignKey],
    nullable: true,
    description: 'Foreign keys from this table (as the `foreignKeys` query).',
    authScopes: (table) => readsTable(table, 'schema:read'),
    resolve: async (table, _args, context) =>
      toTableSchemaShape(await schemaOfTable(context, versionOf(table))).foreignKeys,
  }),
  views: t.field({
    type: SavedViewPage,
    nullable: true,
    description: 'The caller’s personal views and the shared views, oldest first (as the `views` query).',
    args: edgePageArgs,
    authScopes: (table) => readsTable(table, 'rows:read'),
    resolve: async (table, args, context) => {
      const scope = {
        caller: requireCaller(context),
        authority: requireOrg(context, table.orgId),
        schema: await schemaOfTable(context, versionOf(table)),
      };
      return pageOfViews(context, scope, pageArgsOf(args));
    },
  }),
  rows: t.field({
    type: RowPage,
    nullable: true,
    description:
      'Rows matching `where` in `orderBy` order, optionally through a saved view: the `rows` query’s filters, ' +
      'budgets, view rules and cursors. Each table’s page is one statement on its own table.',
    args: {
      ...edgePageArgs,
      viewId: t.arg.id({ validate: Id.optional() }),
      where: t.arg({ type: 'JSON' }),
      orderBy: t.arg({ type: [RowOrderInput] }),
      search: t.arg.string({ validate: SearchText.optional() }),
    },
    extensions: heavyRead(['search']),
    authScopes: (table) => readsTable(table, 'rows:read'),
    resolve: async (table, args, context) =>
      readRowPage(context, await schemaOfTable(context, versionOf(table)), {
        ...pageArgsOf(args),
        viewId: args.viewId,
        where: args.where,
        orderBy: args.orderBy,
        search: args.search,
      }),
  }),
  aggregate: t.field({
    type: AggregatePage,
    nullable: true,
    description: 'Aggregates of the table’s rows, optionally grouped: the `aggregateRows` query’s rules (issue 28).',
    args: { input: t.arg({ type: AggregateRowsInput, required: true }) },
    extensions: heavyRead(),
    authScopes: (table) => readsTable(table, 'rows:read'),
    resolve: async (table, args, context) =>
      aggregateTable(context, await schemaOfTable(context, versionOf(table)), args.input),
  }),
}));
