import { DomainError } from '../../kernel/errors.ts';
import { builder } from '../server/builder.ts';
import { HistoryPage, readHistoryPage } from '../rows/row-pages.ts';
import { tableOfRowRead } from '../rows/row-origin.ts';
import { Row } from '../rows/rows.ts';
import { edgePageArgs, pageArgsOf } from './page-args.ts';

/**
 * A row's cell history, for rows read through `rows`, `row` or `Table.rows` (they know their table). A mutation's
 * answer does not: its history is the `rowHistory` query.
 */
builder.objectFields(Row, (t) => ({
  history: t.field({
    type: HistoryPage,
    nullable: true,
    description: 'The row’s cell history, newest version first (as the `rowHistory` query).',
    args: edgePageArgs,
    authScopes: (row) => {
      const table = tableOfRowRead(row);
      return table
        ? { org: { orgId: table.orgId, capability: 'read' }, oauth: 'history:read' }
        : { authenticated: true };
    },
    resolve: (row, args, context) => {
      const table = tableOfRowRead(row);
      if (!table)
        throw new DomainError(
          'BAD_REQUEST',
          'History follows from rows that were read; for a row a mutation answered, use `rowHistory`.',
        );
      return readHistoryPage(context, table, row.id, pageArgsOf(args));
    },
  }),
}));
