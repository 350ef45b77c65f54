import { lockAdmins as lockAdminRows, lockMember } from '../../catalog/members.ts';
import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { capabilitiesOfKey, ceilingOfRole } from '../../kernel/authority.ts';
import { requireCapability, requireScope } from '../server/guards.ts';
import { requireFreshStrongAuth } from '../server/step-up.ts';
import { builder } from '../server/builder.ts';
import { Id, storedVersion } from '../../kernel/formats.ts';
import type { Context } from '../server/context.ts';
import { Deletion, type DeletionShape } from '../shared/deletion.ts';
import { idempotent } from '../../idempotency/run.ts';
import { pageRef, type PageArgs } from '../shared/pages.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import { DeleteMemberBody, UpdateMemberBody } from '../../contracts/members.ts';

/**
 * Spec 2.5. `email`, `verified` and `twoFactorEnabled` belong to the user; `role` and `version` to the membership;
 * `name` is the one this org's admins gave the member, else the user's own profile name.
 */
export type MemberShape = {
  id: string;
  orgId: string;
  userId: string;
  name: string;
  email: string;
  role: string;
  version: string;
  verified: boolean;
  twoFactorEnabled: boolean;
};

export const Member = builder.objectRef<MemberShape>('Member').implement({
  description: 'A user’s membership of an organisation (spec 2.5).',
  fields: (t) => ({
    id: t.exposeID('id'),
    orgId: t.exposeID('orgId'),
    userId: t.exposeID('userId'),
    name: t.exposeString('name'),
    email: t.exposeString('email'),
    role: t.exposeString('role', { description: '`admin`, `member` or `viewer`' }),
    version: t.exposeString('version'),
    verified: t.exposeBoolean('verified'),
    twoFactorEnabled: t.exposeBoolean('twoFactorEnabled'),
  }),
});

/** The org's members, oldest membership first: the `members` query and the `Org.members` edge. */
export function listMembers(context: Context, orgId: string, page: PageArgs) {
  return pageById(context, page, {
    scope: `members:${orgId}`,
    fetch: ({ after, limit }) =>
      context.prisma.member.findMany({
        where: { orgId, ...(after ? { id: { gt: after } } : {}) },
        orderBy: { id: 'asc' },
        take: limit + 1,
        select: memberSelect,
      }),
    toItem: toMemberShape,
  });
}

export const MemberPage = pageRef('MemberPage', Member, 'A page of members, oldest membership first.');

const UpdateMemberInput = builder
  .inputType('UpdateMemberInput', {
    fields: (t) => ({
      expectedVersion: t.string({ required: true }),
      name: t.string({ required: false }),
      role: t.string({ required: false }),
    }),
  })
  .validate(UpdateMemberBody);

const DeleteMemberInput = builder
  .inputType('DeleteMemberInput', { fields: (t) => ({ expectedVersion: t.string({ required: true }) }) })
  .validate(DeleteMemberBody);

export const memberSelect = {
  id: true,
  orgId: true,
  userId: true,
  name: true,
  role: true,
  version: true,
  user: { select: { name: true, email: true, verified: true, twoFactorEnabled: true } },
} as const;

interface MemberRow {
  id: string;
  orgId: string;
  userId: string;
  name: string | null;
  role: string;
  version: bigint;
  user: { name: string; email: string; verified: boolean; twoFactorEnabled: boolean };
}

export function toMemberShape(row: MemberRow): MemberShape {
  return {
    id: row.id,
    orgId: row.orgId,
    userId: row.userId,
    name: row.name ?? row.user.name,
    email: row.user.email,
    role: row.role,
    version: row.version.toString(),
    verified: row.user.verified,
    twoFactorEnabled: row.user.twoFactorEnabled,
  };
}

/**
 * Locks the org's admin memberships for the rest of the transaction and returns their ids. Two admins demoting
 * each other at once serialise here; under READ COMMITTED the second re-reads the rows after the first commits,
 * so it sees one admin left and is refused with LAST_ADMIN.
 */
async function lockAdmins(tx: TransactionClient, orgId: string): Promise<string[]> {
  const rows = await tx.$queryRaw<{ id: string }[]>(lockAdminRows(orgId));
  return rows.map((row) => row.id);
}

async function currentMember(
  tx: TransactionClient,
  orgId: string,
  memberId: string,
  expectedVersion: string,
): Promise<MemberRow> {
  // Locked so that two updates with the same expectedVersion cannot both pass the check below.
  await tx.$queryRaw(lockMember(orgId, memberId));
  const row = await tx.member.findFirst({ where: { id: memberId, orgId }, select: memberSelect });
  if (!row) throw notFound('member');
  const expected = storedVersion(expectedVersion);
  if (expected === null || expected !== row.version) {
    throw new DomainError('ROW_VERSION_CONFLICT', 'The member was changed by someone else; reload it and retry.', {
      details: { expectedVersion, currentVersion: row.version.toString() },
    });
  }
  return row;
}

function lastAdmin(): DomainError {
  return new DomainError('LAST_ADMIN', 'The organisation must keep at least one admin.');
}

/**
 * What a new name changes. Renaming oneself changes one's profile name (seen in every org that has not named the
 * member) and drops this org's own name for one. An admin renaming someone else names them in this org only: no
 * org's admin may change what a user is called elsewhere (issue 18 §3).
 */
async function renamed(
  tx: TransactionClient,
  row: MemberRow,
  name: string | undefined,
  self: boolean,
): Promise<{ name?: string | null }> {
  if (name === undefined) return {};
  if (!self) return { name };
  await tx.user.update({ where: { id: row.userId }, data: { name } });
  return { name: null };
}

async function updateMember(
  tx: TransactionClient,
  orgId: string,
  memberId: string,
  body: UpdateMemberBody,
  self: boolean,
): Promise<MemberShape> {
  const admins = body.role !== undefined && body.role !== 'admin' ? await lockAdmins(tx, orgId) : [];
  const row = await currentMember(tx, orgId, memberId, body.expectedVersion);
  if (row.role === 'admin' && body.role !== undefined && body.role !== 'admin' && admins.every((id) => id === memberId))
    throw lastAdmin();
  const updated = await tx.member.update({
    where: { id: memberId },
    data: {
      version: { increment: 1 },
      ...(await renamed(tx, row, body.name, self)),
      ...(body.role === undefined ? {} : { role: body.role }),
    },
    select: memberSelect,
  });
  return toMemberShape(updated);
}

async function removeMember(
  tx: TransactionClient,
  orgId: string,
  memberId: string,
  expectedVersion: string,
): Promise<DeletionShape> {
  const admins = await lockAdmins(tx, orgId);
  const row = await currentMember(tx, orgId, memberId, expectedVersion);
  if (row.role === 'admin' && admins.every((id) => id === memberId)) throw lastAdmin();
  await tx.member.delete({ where: { id: memberId } });
  // The keys would reach nothing without the membership; revoking them keeps the key list truthful.
  await tx.apiKey.updateMany({
    where: { orgId, userId: row.userId, scope: 'personal', revokedAt: null },
    data: { revokedAt: new Date() },
  });
  return { deleted: true, mutationId: newId() };
}

/**
 * Admins manage members (`members:manage`); anyone may rename themself (`profile:manage`). Changing a role is
 * sensitive: a browser session must have proved its password recently (STEP_UP_REQUIRED otherwise).
 */
function authorizeUpdate(context: Context, orgId: string, memberId: string, body: UpdateMemberBody): { self: boolean } {
  const self = requireCapability(context, orgId, 'read').memberId === memberId;
  if (self && body.role === undefined) {
    requireScope(context, 'profile:manage');
    return { self };
  }
  const authority = requireCapability(context, orgId, 'admin');
  requireScope(context, 'members:manage');
  if (body.role === undefined) return { self };
  requireFreshStrongAuth(context);
  // A key may not grant a role beyond its own ceiling (a read + admin key cannot make a member or an admin).
  const requested = capabilitiesOfKey(ceilingOfRole(body.role));
  const beyond = requested.filter((capability) => !authority.capabilities.has(capability));
  if (beyond.length > 0) {
    throw new DomainError(
      'DELEGATION_EXCEEDS_AUTHORITY',
      'The role would carry more authority than your credential holds.',
      {
        details: { requested, held: [...authority.capabilities] },
      },
    );
  }
  return { self };
}

builder.queryFields((t) => ({
  members: t.field({
    type: MemberPage,
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      ...pageArgs,
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'members:read' }),
    resolve: (_root, args, context) => listMembers(context, String(args.orgId), args),
  }),
}));

builder.mutationFields((t) => ({
  updateMember: t.field({
    type: Member,
    description: 'Renames a member or changes their role (endpoint 3). The org always keeps an admin (LAST_ADMIN).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      id: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: UpdateMemberInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' } }),
    resolve: (_root, { idempotencyKey, orgId, id, input }, context) => {
      const target = { orgId: String(orgId), memberId: String(id) };
      const { self } = authorizeUpdate(context, target.orgId, target.memberId, input);
      return idempotent(
        context,
        { operation: 'updateMember', key: idempotencyKey, input: { ...target, ...input } },
        (tx) => updateMember(tx, target.orgId, target.memberId, input, self),
      );
    },
  }),
  deleteMember: t.field({
    type: Deletion,
    description: 'Removes a member from the organisation (admins). Their personal keys for it are revoked.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      id: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: DeleteMemberInput, required: true }),
    },
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'admin' }, oauth: 'members:manage' }),
    resolve: (_root, { idempotencyKey, orgId, id, input }, context) => {
      const target = { orgId: String(orgId), memberId: String(id) };
      return idempotent(
        context,
        { operation: 'deleteMember', key: idempotencyKey, input: { ...target, ...input } },
        (tx) => removeMember(tx, target.orgId, target.memberId, input.expectedVersion),
      );
    },
  }),
}));
