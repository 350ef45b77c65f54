import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { notFound } from '../../kernel/errors.ts';
import { requestLoader } from '../server/loaders.ts';
import { Table, toTableShape, withFields, type TableShape } from '../tables/tables.ts';
import { SavedView, type SavedViewShape } from '../views/views.ts';

/**
 * The table of a saved view, with what the `table` query checks (org role and `tables:read`) against the view's
 * org. The tables of a page of views are one read.
 */
function tableOf(context: Context, view: SavedViewShape): Promise<TableShape> {
  const loader = requestLoader<string, TableShape>(
    context,
    'tablesById',
    async (ids) => {
      const rows = await context.prisma.dataTable.findMany({
        where: { id: { in: [...ids] }, state: 'active' },
        include: withFields,
      });
      const byId = new Map(rows.map((row) => [row.id, toTableShape(row)]));
      return ids.map((id) => byId.get(id) ?? notFound('table'));
    },
    (id) => id,
  );
  return loader.load(view.tableId);
}

builder.objectFields(SavedView, (t) => ({
  table: t.field({
    type: Table,
    nullable: true,
    description: 'The table the view reads (as the `table` query).',
    authScopes: (view) => ({ org: { orgId: view.orgId, capability: 'read' }, oauth: 'tables:read' }),
    resolve: (view, _args, context) => tableOf(context, view),
  }),
}));
