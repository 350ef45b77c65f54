import {
  getNamedType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isObjectType,
  type GraphQLArgument,
  type GraphQLInputType,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { OAUTH_SCOPES, type OAuthScope } from '../src/kernel/authority.ts';
import { sha256Hex } from '../src/identity/secrets.ts';
import { ISSUE_5_SCOPES, SCOPE_OF_FIELD as IDENTITY_SCOPES, type FieldScope } from './helpers/scope-table.ts';
import { schema } from '../src/graph/schema.ts';
import { newId } from '../src/kernel/ids.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();
const SCOPE_OF_FIELD: Record<string, FieldScope> = { ...IDENTITY_SCOPES, ...ISSUE_5_SCOPES };
/** Every scope a field needs (most need one). */
const scopesOf = (name: string): OAuthScope[] => [SCOPE_OF_FIELD[name] ?? []].flat();

/** An access token for the org's admin with exactly these scopes, written as /oauth/token would. */
async function accessToken(scopes: readonly OAuthScope[]): Promise<string> {
  const { prisma, config } = suite.server;
  const client = await prisma.oAuthClient.create({
    data: { id: newId(), name: 'Scope probe', redirectUris: ['https://probe.example/cb'] },
  });
  const token = `wdsa_${newId()}${newId()}`.slice(0, 48);
  await prisma.oAuthToken.create({
    data: {
      id: newId(),
      kind: 'access',
      tokenHash: sha256Hex(token),
      familyId: newId(),
      clientId: client.id,
      userId: suite.org.adminUserId,
      scopes: [...scopes],
      audience: config.OAUTH_AUDIENCE,
      expiresAt: new Date(Date.now() + 600_000),
    },
  });
  return token;
}

/** A type-correct value for a required input: enough to pass GraphQL's own validation and reach the auth checks. */
function sample(type: GraphQLInputType, name: string): unknown {
  if (isNonNullType(type)) return sample(type.ofType, name);
  if (isListType(type)) return [];
  if (isInputObjectType(type)) {
    return Object.fromEntries(
      Object.values(type.getFields())
        .filter((field) => isNonNullType(field.type))
        .map((field) => [field.name, sample(field.type, field.name)]),
    );
  }
  const named = getNamedType(type).name;
  if (name === 'orgId') return suite.org.orgId;
  if (named === 'ID') return newId();
  if (named === 'Int') return 1;
  if (named === 'Boolean') return false;
  if (named === 'Timestamp') return '2030-01-01T00:00:00.000Z';
  if (named === 'JSON') return {};
  return name === 'expectedVersion' ? '1' : 'probe-value-1';
}

/**
 * Valid inputs where the input type validates itself (Pothos validates input objects while coercing arguments,
 * before the auth checks run), and for fields whose scope depends on the input (updateMember: a role change).
 */
const INPUT_OVERRIDES: () => Record<string, Record<string, unknown>> = () => ({
  acceptInvitation: { input: { token: `wdsi_${'A'.repeat(43)}` } },
  updateMember: { input: { expectedVersion: '1', role: 'viewer' } },
  backupSchedulePreview: { input: { cron: '0 3 * * *', timezone: 'UTC' } },
  saveBackupSchedule: { input: { cron: '0 3 * * *', timezone: 'UTC' } },
  restoreDatabaseBackup: { input: { target: 'new-database' } },
  confirmTwoFactor: { input: { code: '123456' } },
  disableTwoFactor: { input: { code: '123456' } },
  createForeignKey: { input: { fieldIds: ['Code'], referencedRuleId: newId(), referencedTableId: newId() } },
  createUniqueRule: { input: { fieldIds: ['Code'] } },
  createInvitation: { input: { email: 'probe@example.com', role: 'viewer' } },
  createMyKey: { input: { name: 'Probe', orgId: suite.org.orgId, access: 'read' } },
  createTeamKey: { input: { name: 'Probe', access: 'read' } },
  createTable: { input: { name: 'Probe', fields: [{ name: 'A', type: 'text' }] } },
  createView: {
    input: {
      name: 'Probe',
      visibility: 'personal',
      expectedSchemaVersion: 1,
      definition: { columnOrder: [], columnWidths: {}, frozenColumns: 0, hiddenColumns: [], query: {} },
    },
  },
  previewImportRows: {
    input: {
      expectedSchemaVersion: 1,
      format: 'csv',
      content: 'a\n1',
      fileName: 'probe.csv',
      mapping: [{ source: 'a', fieldId: 'A' }],
    },
  },
  importRows: { input: { previewJobId: newId(), expectedSchemaVersion: 1, mode: 'valid-rows-only' } },
  applySchemaChange: {
    input: { expectedSchemaVersion: 1, change: { kind: 'rename_field', fieldId: newId(), name: 'Probe' } },
  },
  batchRows: { input: { expectedSchemaVersion: 1, operations: [{ op: 'create', values: {} }] } },
  exportRows: { input: { format: 'csv' } },
  exportDatabase: { input: { format: 'csv' } },
  aggregateRows: { input: { aggregates: [{ fn: 'count', as: 'n' }] } },
  lookupRows: { input: { ruleId: newId(), keys: [['probe']] } },
  createWebhook: { input: { url: 'https://hooks.example.com/probe', events: ['*'] } },
});

function probe(
  operation: 'query' | 'mutation',
  field: string,
  args: readonly GraphQLArgument[],
  returnsObject: boolean,
) {
  const required = args.filter((arg) => isNonNullType(arg.type));
  const variables = Object.fromEntries(required.map((arg) => [arg.name, sample(arg.type, arg.name)]));
  Object.assign(variables, INPUT_OVERRIDES()[field] ?? {});
  const declarations = required.map((arg) => `$${arg.name}: ${String(arg.type)}`).join(', ');
  const call = required.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const text = `${operation}${declarations ? `(${declarations})` : ''} { ${field}${call ? `(${call})` : ''}${returnsObject ? ' { __typename }' : ''} }`;
  return (token: string) => suite.server.graphql(text, variables, { token });
}

const rootFields = [
  ...Object.values(schema.getQueryType()!.getFields()).map((field) => ({ operation: 'query' as const, field })),
  ...Object.values(schema.getMutationType()!.getFields()).map((field) => ({ operation: 'mutation' as const, field })),
];

describe('every operation requires exactly its OAuth scope (the README authority table)', () => {
  it('lists every root field of the schema, and only scopes of spec §5', () => {
    const names = rootFields.map(({ field }) => field.name);
    expect(
      names.filter((name) => !(name in SCOPE_OF_FIELD)),
      'root fields missing from the table',
    ).toEqual([]);
    expect(
      Object.keys(IDENTITY_SCOPES).filter((name) => !names.includes(name)),
      'table entries the schema lacks',
    ).toEqual([]);
    for (const name of Object.keys(SCOPE_OF_FIELD))
      for (const scope of scopesOf(name)) expect(OAUTH_SCOPES).toContain(scope);
  });

  it.each(
    rootFields
      .filter(({ field }) => SCOPE_OF_FIELD[field.name] !== null)
      .map(({ operation, field }) => [field.name, operation, field] as const),
  )(
    '%s needs its scopes: refused without any one of them, not for scope reasons with them',
    async (name, operation, field) => {
      const required = scopesOf(name);
      const call = probe(operation, name, field.args, isObjectType(getNamedType(field.type)));
      for (const missing of required) {
        const without = await call(await accessToken(OAUTH_SCOPES.filter((scope) => scope !== missing)));
        expect(without.body.errors?.[0]?.extensions, without.text).toMatchObject({
          code: 'INSUFFICIENT_SCOPE',
          details: { requiredScope: missing },
        });
      }
      const withIt = await call(await accessToken(required));
      expect(withIt.body.errors?.[0]?.extensions?.code, withIt.text).not.toBe('INSUFFICIENT_SCOPE');
    },
  );
});
