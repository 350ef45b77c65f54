import { lockInvitationByTokenHash, lockInvitationState } from '../../catalog/invitations.ts';
import { createHash, randomBytes } from 'node:crypto';
import type { TransactionClient } from '../../db/prisma.ts';
import { DomainError, notFound } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { ceilingOfRole, type Role } from '../../kernel/authority.ts';
import { requireCaller, requireOrg, requirePersonalIdentity, requireScope } from '../server/guards.ts';
import { requireFreshStrongAuth } from '../server/step-up.ts';
import { hashPassword } from '../../identity/passwords.ts';
import { builder } from '../server/builder.ts';
import { Id } from '../../kernel/formats.ts';
import type { Context } from '../server/context.ts';
import { Deletion } from '../shared/deletion.ts';
import { deliver, deliveryConfigured } from '../../identity/delivery.ts';
import { idempotent } from '../../idempotency/run.ts';
import { checkDelegation } from '../keys/shape.ts';
import { Member, memberSelect, toMemberShape, type MemberShape } from '../members/members.ts';
import { idempotentWithSecret } from '../server/one-time-secret.ts';
import { pageRef } from '../shared/pages.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import { isUniqueViolation } from '../../db/pg-errors.ts';
import { AcceptInvitationBody, CreateInvitationBody, type INVITATION_STATES } from '../../contracts/invitations.ts';

/** Spec 2.16 leaves the invitation record open; this is ours. `state` is derived from the timestamps. */
export type InvitationShape = {
  id: string;
  orgId: string;
  email: string;
  role: string;
  state: string;
  invitedByUserId: string;
  createdAt: string;
  expiresAt: string;
  acceptedAt: string | null;
};

const Invitation = builder.objectRef<InvitationShape>('Invitation').implement({
  description: 'An invitation to join an organisation with a role. Its token is shown once, when it is created.',
  fields: (t) => ({
    id: t.exposeID('id'),
    orgId: t.exposeID('orgId'),
    email: t.exposeString('email'),
    role: t.exposeString('role'),
    state: t.exposeString('state', { description: '`pending`, `accepted`, `cancelled` or `expired`' }),
    invitedByUserId: t.exposeID('invitedByUserId'),
    createdAt: t.field({ type: 'Timestamp', resolve: (invitation) => invitation.createdAt }),
    expiresAt: t.field({ type: 'Timestamp', resolve: (invitation) => invitation.expiresAt }),
    acceptedAt: t.field({ type: 'Timestamp', nullable: true, resolve: (invitation) => invitation.acceptedAt }),
  }),
});

const InvitationPage = pageRef('InvitationPage', Invitation, 'A page of invitations, newest first.');

const CreatedInvitation = builder
  .objectRef<{ invitation: InvitationShape; token: string | null }>('CreatedInvitation')
  .implement({
    description:
      'A new invitation and its one-time token (null when an Idempotency-Key replays the creation, or when the delivery hook carried it).',
    fields: (t) => ({
      invitation: t.field({ type: Invitation, resolve: (created) => created.invitation }),
      token: t.string({ nullable: true, resolve: (created) => created.token }),
    }),
  });

const CreateInvitationInput = builder
  .inputType('CreateInvitationInput', {
    fields: (t) => ({ email: t.string({ required: true }), role: t.string({ required: true }) }),
  })
  .validate(CreateInvitationBody);

const AcceptInvitationInput = builder
  .inputType('AcceptInvitationInput', {
    fields: (t) => ({
      token: t.string({ required: true }),
      name: t.string({ required: false }),
      password: t.string({ required: false }),
    }),
  })
  .validate(AcceptInvitationBody);

interface InvitationRow {
  id: string;
  orgId: string;
  email: string;
  role: Role;
  invitedByUserId: string;
  createdAt: Date;
  expiresAt: Date;
  acceptedAt: Date | null;
  cancelledAt: Date | null;
}

function stateOf(row: InvitationRow, now = Date.now()): (typeof INVITATION_STATES)[number] {
  if (row.acceptedAt) return 'accepted';
  if (row.cancelledAt) return 'cancelled';
  return row.expiresAt.getTime() <= now ? 'expired' : 'pending';
}

function toInvitationShape(row: InvitationRow): InvitationShape {
  return {
    id: row.id,
    orgId: row.orgId,
    email: row.email,
    role: row.role,
    state: stateOf(row),
    invitedByUserId: row.invitedByUserId,
    createdAt: row.createdAt.toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    acceptedAt: row.acceptedAt?.toISOString() ?? null,
  };
}

const tokenHash = (token: string) => createHash('sha256').update(token).digest('hex');

function alreadyMember(email: string): DomainError {
  return new DomainError('UNIQUE_CONFLICT', `${email} is already a member of this organisation.`, {
    details: { resource: 'member', fields: ['email'] },
  });
}

async function createInvitation(context: Context, tx: TransactionClient, orgId: string, body: CreateInvitationBody) {
  const member = await tx.member.findFirst({ where: { orgId, user: { email: body.email } }, select: { id: true } });
  if (member) throw alreadyMember(body.email);
  // An expired invitation no longer blocks a new one for the same address.
  await tx.invitation.updateMany({
    where: { orgId, email: body.email, acceptedAt: null, cancelledAt: null, expiresAt: { lte: new Date() } },
    data: { cancelledAt: new Date() },
  });
  const token = `wdsi_${randomBytes(32).toString('base64url')}`;
  let row: InvitationRow;
  try {
    await tx.$executeRaw`SAVEPOINT create_invitation`;
    row = await tx.invitation.create({
      data: {
        id: newId(),
        orgId,
        email: body.email,
        role: body.role,
        tokenHash: tokenHash(token),
        invitedByUserId: requirePersonalIdentity(context).userId,
        expiresAt: new Date(Date.now() + context.config.INVITATION_TTL_HOURS * 3_600_000),
      },
    });
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT create_invitation`;
    throw new DomainError('UNIQUE_CONFLICT', `${body.email} already has a pending invitation; cancel it first.`, {
      details: { resource: 'invitation', fields: ['email'] },
    });
  }
  const invitation = toInvitationShape(row);
  if (deliveryConfigured(context.config)) await deliverInvitation(context, tx, invitation, token);
  return { value: invitation, secret: token };
}

/** Runs inside the creating transaction: a failed delivery (502) rolls the invitation back. */
async function deliverInvitation(
  context: Context,
  tx: TransactionClient,
  invitation: InvitationShape,
  token: string,
): Promise<void> {
  const org = await tx.org.findUniqueOrThrow({ where: { id: invitation.orgId }, select: { name: true } });
  await deliver(context.config, {
    kind: 'invitation',
    email: invitation.email,
    token,
    expiresAt: invitation.expiresAt,
    invitationId: invitation.id,
    orgId: invitation.orgId,
    orgName: org.name,
    role: invitation.role,
    invitedByUserId: invitation.invitedByUserId,
  });
}

async function openInvitation(tx: TransactionClient, token: string): Promise<InvitationRow> {
  const [locked] = await tx.$queryRaw<{ id: string }[]>(lockInvitationByTokenHash(tokenHash(token)));
  const row = locked ? await tx.invitation.findUnique({ where: { id: locked.id } }) : null;
  // Unknown, cancelled and expired tokens look alike: the token holder learns nothing about the org.
  if (!row || row.cancelledAt || stateOf(row) === 'expired') throw notFound('invitation');
  if (row.acceptedAt) throw new DomainError('INVITATION_ACCEPTED', 'This invitation has already been accepted.');
  return row;
}

async function joiningUser(
  context: Context,
  tx: TransactionClient,
  invitation: InvitationRow,
  signUp: { name?: string | undefined; passwordHash?: string | undefined },
): Promise<string> {
  if (context.caller) {
    const { userId } = requirePersonalIdentity(context);
    const user = await tx.user.findUniqueOrThrow({ where: { id: userId }, select: { email: true } });
    if (user.email.toLowerCase() !== invitation.email) {
      throw new DomainError('FORBIDDEN', 'This invitation was sent to another e-mail address.');
    }
    return userId;
  }
  if (!signUp.name || !signUp.passwordHash) {
    throw new DomainError(
      'VALIDATION_FAILED',
      'Without a credential, accepting creates your account: give name and password.',
      {
        details: {
          problems: [
            { path: ['name'], message: 'required without a credential' },
            { path: ['password'], message: 'required without a credential' },
          ],
        },
      },
    );
  }
  if (await tx.user.findUnique({ where: { email: invitation.email }, select: { id: true } })) {
    throw new DomainError('UNIQUE_CONFLICT', 'An account with this e-mail address exists: log in, then accept.', {
      details: { resource: 'user', fields: ['email'] },
    });
  }
  // Unverified: the token went back to the inviter, so accepting proves nothing about the mailbox (issue 19).
  const { id } = await tx.user.create({
    data: {
      id: newId(),
      email: invitation.email,
      name: signUp.name,
      passwordHash: signUp.passwordHash,
      verified: false,
    },
    select: { id: true },
  });
  return id;
}

async function acceptInvitation(
  context: Context,
  tx: TransactionClient,
  token: string,
  signUp: { name?: string | undefined; passwordHash?: string | undefined },
): Promise<MemberShape> {
  const invitation = await openInvitation(tx, token);
  const userId = await joiningUser(context, tx, invitation, signUp);
  if (
    await tx.member.findUnique({ where: { orgId_userId: { orgId: invitation.orgId, userId } }, select: { id: true } })
  )
    throw alreadyMember(invitation.email);
  await tx.invitation.update({
    where: { id: invitation.id },
    data: { acceptedAt: new Date(), acceptedByUserId: userId },
  });
  const member = await tx.member.create({
    data: { id: newId(), orgId: invitation.orgId, userId, role: invitation.role },
    select: memberSelect,
  });
  return toMemberShape(member);
}

const manage = (orgId: unknown) => ({
  org: { orgId: String(orgId), capability: 'admin' as const },
  oauth: 'members:manage' as const,
});

builder.queryFields((t) => ({
  invitations: t.field({
    type: InvitationPage,
    description: 'The organisation’s invitations, newest first (admins).',
    args: {
      orgId: t.arg.id({ required: true, validate: Id }),
      ...pageArgs,
    },
    authScopes: (_root, { orgId }) => manage(orgId),
    resolve: (_root, args, context) => {
      const orgId = String(args.orgId);
      return pageById(context, args, {
        scope: `invitations:${orgId}`,
        fetch: ({ after: before, limit }) =>
          context.prisma.invitation.findMany({
            where: { orgId, ...(before ? { id: { lt: before } } : {}) },
            orderBy: { id: 'desc' },
            take: limit + 1,
          }),
        toItem: toInvitationShape,
      });
    },
  }),
}));

builder.mutationFields((t) => ({
  createInvitation: t.field({
    type: CreatedInvitation,
    description:
      'Invites an address with a role (admins). With a delivery hook the token goes to the invitee through it; without one it is in this answer only.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: CreateInvitationInput, required: true }),
    },
    authScopes: (_root, { orgId }) => manage(orgId),
    resolve: async (_root, { idempotencyKey, orgId, input: body }, context) => {
      const target = String(orgId);
      // Inviting grants a role to whoever holds the token: capped like a key (an OAuth token cannot invite, a
      // read key cannot invite a member), and from a browser session it needs a recent password check.
      const caller = requirePersonalIdentity(context);
      checkDelegation(caller, requireOrg(context, target), ceilingOfRole(body.role));
      requireFreshStrongAuth(context);
      const { value, secret } = await idempotentWithSecret(
        context,
        { operation: 'createInvitation', key: idempotencyKey, input: { orgId: target, ...body } },
        (tx) => createInvitation(context, tx, target, body),
      );
      // With a delivery hook the token went to the mailbox only: the inviter never holds it.
      return { invitation: value, token: deliveryConfigured(context.config) ? null : secret };
    },
  }),
  acceptInvitation: t.field({
    type: Member,
    description:
      'Joins the invitation’s organisation with its role: as the caller, or (without a credential) as a new user.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      input: t.arg({ type: AcceptInvitationInput, required: true }),
    },
    resolve: async (_root, { idempotencyKey, input: body }, context) => {
      if (context.caller) {
        requirePersonalIdentity(context);
        requireScope(context, 'profile:manage');
      }
      const signUp = {
        name: body.name,
        passwordHash: !context.caller && body.password ? await hashPassword(body.password) : undefined,
      };
      const call = {
        operation: 'acceptInvitation',
        key: idempotencyKey,
        input: { token: tokenHash(body.token), name: body.name ?? null },
        actorKey: `invitation:${tokenHash(body.token).slice(0, 48)}`,
      };
      return idempotent(context, call, (tx) => acceptInvitation(context, tx, body.token, signUp));
    },
  }),
  cancelInvitation: t.field({
    type: Deletion,
    description: 'Cancels a pending invitation (endpoint 8). An accepted invitation cannot be cancelled (409).',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      id: t.arg.id({ required: true, validate: Id }),
    },
    authScopes: (_root, { orgId }) => manage(orgId),
    resolve: (_root, { idempotencyKey, orgId, id }, context) => {
      const target = { orgId: String(orgId), id: String(id) };
      requireCaller(context);
      return idempotent(context, { operation: 'cancelInvitation', key: idempotencyKey, input: target }, async (tx) => {
        const [row] = await tx.$queryRaw<{ accepted: boolean; cancelled: boolean }[]>(
          lockInvitationState(target.orgId, target.id),
        );
        if (!row || row.cancelled) throw notFound('invitation');
        if (row.accepted) throw new DomainError('INVITATION_ACCEPTED', 'An accepted invitation cannot be cancelled.');
        await tx.invitation.update({ where: { id: target.id }, data: { cancelledAt: new Date() } });
        return { deleted: true, mutationId: newId() };
      });
    },
  }),
}));
