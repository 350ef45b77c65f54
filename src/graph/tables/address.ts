import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import type { TableAddress } from '../../catalog/table-schema.ts';

/** The path arguments of every table-scoped operation, and the address they name. */
export const tableAddressArgs = builder.args((t) => ({
  orgId: t.id({ required: true, validate: Id }),
  databaseId: t.id({ required: true, validate: Id }),
  tableId: t.id({ required: true, validate: Id }),
}));

export function addressOf(args: {
  orgId: string | number;
  databaseId: string | number;
  tableId: string | number;
}): TableAddress {
  return { orgId: String(args.orgId), databaseId: String(args.databaseId), tableId: String(args.tableId) };
}
