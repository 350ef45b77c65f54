import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { builder } from '../server/builder.ts';
import { Id, storedVersion } from '../../kernel/formats.ts';
import { UpdateOrgBody } from '../../contracts/orgs.ts';
import { idempotent } from '../../idempotency/run.ts';

/** An organisation (workspace). Mutations return this plain shape so an idempotent replay is byte-identical. */
export interface OrgShape {
  [key: string]: string;
  id: string;
  name: string;
  version: string;
  createdAt: string;
  updatedAt: string;
}

export const Org = builder.objectRef<OrgShape>('Org').implement({
  description: 'An organisation: it owns databases, members and keys.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    version: t.exposeString('version'),
    createdAt: t.field({ type: 'Timestamp', resolve: (org) => org.createdAt }),
    updatedAt: t.field({ type: 'Timestamp', resolve: (org) => org.updatedAt }),
  }),
});

const UpdateOrgInput = builder
  .inputType('UpdateOrgInput', {
    fields: (t) => ({
      expectedVersion: t.string({ required: true }),
      name: t.string({ required: true }),
    }),
  })
  .validate(UpdateOrgBody);

interface OrgRow {
  id: string;
  name: string;
  version: bigint;
  createdAt: Date;
  updatedAt: Date;
}

export function toOrgShape(row: OrgRow): OrgShape {
  return {
    id: row.id,
    name: row.name,
    version: row.version.toString(),
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

async function renameOrg(tx: TransactionClient, orgId: string, body: UpdateOrgBody): Promise<OrgShape> {
  const expected = storedVersion(body.expectedVersion);
  const updated =
    expected === null
      ? []
      : await tx.org.updateManyAndReturn({
          where: { id: orgId, version: expected },
          data: { name: body.name, version: { increment: 1 } },
        });
  if (updated[0]) return toOrgShape(updated[0]);
  const current = await tx.org.findUnique({ where: { id: orgId }, select: { version: true } });
  if (!current) throw notFound('organisation');
  throw new DomainError('ROW_VERSION_CONFLICT', 'The organisation was changed by someone else; reload it and retry.', {
    details: { expectedVersion: body.expectedVersion, currentVersion: current.version.toString() },
  });
}

builder.queryFields((t) => ({
  org: t.field({
    type: Org,
    args: { orgId: t.arg.id({ required: true, validate: Id }) },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'org:read' }),
    resolve: async (_root, { orgId }, context) => {
      const row = await context.prisma.org.findUnique({ where: { id: String(orgId) } });
      if (!row) throw notFound('organisation');
      return toOrgShape(row);
    },
  }),
}));

builder.mutationFields((t) => ({
  updateOrg: t.field({
    type: Org,
    description: 'Renames the organisation. Admins only; `expectedVersion` guards against lost updates.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: UpdateOrgInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'admin' }, oauth: 'org:manage' }),
    resolve: (_root, { idempotencyKey, orgId, input }, context) => {
      const target = String(orgId);
      return idempotent(
        context,
        { operation: 'updateOrg', key: idempotencyKey, input: { orgId: target, ...input } },
        (tx) => renameOrg(tx, target, input),
      );
    },
  }),
}));
