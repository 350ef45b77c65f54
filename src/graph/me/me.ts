import { CAPABILITIES, CREDENTIAL_TYPES, type MeShape, type MyOrgShape } from '../../contracts/me.ts';
import { notFound } from '../../kernel/errors.ts';
import { OAUTH_SCOPES } from '../../kernel/authority.ts';
import type { Caller } from '../../kernel/caller.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { pageArgs, pageById } from '../server/paged.ts';
import { pageRef, type PageArgs } from '../shared/pages.ts';

/**
 * `me` and `orgs`: what an integrator asks first, with any credential and no extra OAuth scope. Every scope is
 * exercised inside an org, so a token that could not learn which orgs it reaches could use none of them; what
 * either field shows is the caller's own identity and the authority it already holds (docs/decisions/integrators.md).
 */
const MeUser = builder.objectRef<NonNullable<MeShape['user']>>('MeUser').implement({
  description: 'The person behind the credential.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    email: t.exposeString('email'),
    verified: t.exposeBoolean('verified'),
    twoFactorEnabled: t.exposeBoolean('twoFactorEnabled'),
  }),
});

const MeCredential = builder.objectRef<MeShape['credential']>('MeCredential').implement({
  description: 'The credential this request presented.',
  fields: (t) => ({
    type: t.exposeString('type', { description: CREDENTIAL_TYPES.map((type) => `\`${type}\``).join(', ') }),
    id: t.exposeID('id'),
    prefix: t.exposeString('prefix', {
      description: 'How the activity feed names it: a key’s prefix, `session`, `oauth:<client id>`.',
    }),
    scopes: t.exposeStringList('scopes', {
      description: 'OAuth scopes it carries; keys and sessions carry all of them.',
    }),
    access: t.exposeString('access', {
      nullable: true,
      description: 'A key’s ceiling, `read` or `write`; null otherwise.',
    }),
    includeAdmin: t.exposeBoolean('includeAdmin', {
      nullable: true,
      description: 'Whether a key’s ceiling includes admin authority.',
    }),
    orgId: t.exposeID('orgId', {
      nullable: true,
      description: 'The org a key belongs to; null for sessions and OAuth tokens.',
    }),
    clientId: t.exposeID('clientId', { nullable: true, description: 'The OAuth application holding the token.' }),
    expiresAt: t.field({ type: 'Timestamp', nullable: true, resolve: (credential) => credential.expiresAt }),
  }),
});

const Me = builder.objectRef<MeShape>('Me').implement({
  description: 'Who is calling: the user (null for a team key, which has no personal identity) and the credential.',
  fields: (t) => ({
    user: t.field({ type: MeUser, nullable: true, resolve: (me) => me.user }),
    credential: t.field({ type: MeCredential, resolve: (me) => me.credential }),
  }),
});

const MyOrg = builder.objectRef<MyOrgShape>('MyOrg').implement({
  description: 'An org the credential reaches, with the caller’s role and what this credential may do there.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    role: t.exposeString('role', {
      nullable: true,
      description: '`admin`, `member` or `viewer`; null for a team key.',
    }),
    capabilities: t.exposeStringList('capabilities', { description: CAPABILITIES.map((c) => `\`${c}\``).join(', ') }),
  }),
});

const MyOrgPage = pageRef('MyOrgPage', MyOrg, 'A page of the orgs the credential reaches, by org id.');

const iso = (date: Date | null | undefined) => date?.toISOString() ?? null;

async function credentialOf(context: Context, caller: Caller): Promise<MeShape['credential']> {
  const { credential } = caller;
  const scopes =
    caller.scopes === 'all'
      ? [...OAUTH_SCOPES]
      : OAUTH_SCOPES.filter((scope) => caller.scopes !== 'all' && caller.scopes.has(scope));
  const base = {
    id: credential.id,
    prefix: credential.prefix,
    scopes,
    access: null,
    includeAdmin: null,
    orgId: null,
    clientId: null,
  };
  if (credential.type === 'api-key') {
    const key = await context.prisma.apiKey.findUnique({ where: { id: credential.id } });
    if (!key) throw notFound('credential');
    return {
      ...base,
      type: key.scope === 'team' ? 'team-key' : 'personal-key',
      access: key.access,
      includeAdmin: key.includeAdmin,
      orgId: key.orgId,
      expiresAt: iso(key.expiresAt),
    };
  }
  if (credential.type === 'oauth') {
    const token = await context.prisma.oAuthToken.findUnique({ where: { id: credential.id } });
    if (!token) throw notFound('credential');
    return { ...base, type: 'oauth', clientId: token.clientId, expiresAt: iso(token.expiresAt) };
  }
  const session = await context.prisma.session.findUnique({ where: { id: credential.id } });
  if (!session) throw notFound('credential');
  return { ...base, type: 'session', expiresAt: iso(session.expiresAt) };
}

async function me(context: Context, caller: Caller): Promise<MeShape> {
  const [user, credential] = await Promise.all([
    caller.userId === null
      ? null
      : context.prisma.user.findUnique({
          where: { id: caller.userId },
          select: { id: true, name: true, email: true, verified: true, twoFactorEnabled: true },
        }),
    credentialOf(context, caller),
  ]);
  return { user, credential };
}

/** The orgs of the caller's authority as read for this request, in id order. */
function myOrgs(context: Context, caller: Caller, page: PageArgs) {
  return pageById(context, page, {
    scope: `orgs:${caller.credential.type}:${caller.credential.id}`,
    fetch: ({ after, limit }) =>
      context.prisma.org.findMany({
        where: { id: { in: [...caller.orgs.keys()], ...(after === undefined ? {} : { gt: after }) } },
        select: { id: true, name: true },
        orderBy: { id: 'asc' },
        take: limit + 1,
      }),
    toItem: (row): MyOrgShape => {
      const authority = caller.orgs.get(row.id)!;
      return {
        id: row.id,
        name: row.name,
        role: caller.kind === 'team-key' ? null : authority.role,
        capabilities: CAPABILITIES.filter((capability) => authority.capabilities.has(capability)),
      };
    },
  });
}

builder.queryFields((t) => ({
  me: t.withAuth({ authenticated: true }).field({
    type: Me,
    description: 'Who is calling: the user and the credential. Any credential; no OAuth scope needed.',
    resolve: (_root, _args, context) => me(context, context.caller),
  }),
  orgs: t.withAuth({ authenticated: true }).field({
    type: MyOrgPage,
    description:
      'The orgs the credential reaches (a key: its one org; a session or OAuth token: every org of its user), ' +
      'with the role and what the credential may do there. No OAuth scope needed: it is how an application finds its orgIds.',
    args: pageArgs,
    resolve: (_root, args, context) => myOrgs(context, context.caller, args),
  }),
}));
