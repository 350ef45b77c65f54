import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { expect, vi } from 'vitest';
import { addMember, createOrg, createTeamKey, idempotencyKey } from '../factories.ts';
import { preview } from '../jobs.ts';
import type { TestServer } from '../server.ts';
import { addForeignKey, addUniqueRule, createRow, createTable, refreshSchemaVersion } from '../workspace.ts';

/**
 * A delivery hook (DELIVERY_WEBHOOK_URL) that accepts every message, so that invitations and mailbox verification
 * run their whole path instead of answering 503 CONFIGURATION_INVALID.
 */
export async function startDeliveryHook(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/deliver`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Every field type, with options, so that generated cells and filters reach each type's code. */
const EVERY_FIELD_TYPE = [
  { name: 'Name', type: 'text', options: { maxLength: 40 } },
  { name: 'Notes', type: 'longText' },
  { name: 'Count', type: 'integer', options: { min: -1000, max: 1000 } },
  { name: 'Price', type: 'number', options: { precision: 15, scale: 2 } },
  { name: 'Flag', type: 'boolean' },
  { name: 'Day', type: 'date' },
  { name: 'At', type: 'datetime' },
  { name: 'Email', type: 'email' },
  { name: 'Site', type: 'url' },
  { name: 'Status', type: 'select', options: { choices: ['open', 'closed'] } },
  { name: 'Tags', type: 'multiSelect', options: { choices: ['red', 'green', 'blue'] } },
  { name: 'Data', type: 'json', options: { maxDepth: 3, maxBytes: 200 } },
  { name: 'Seq', type: 'autoNumber' },
];

/** The credentials and ids the fuzzer draws from: requests that use them reach past authentication and lookup. */
export interface FuzzWorkspace {
  orgId: string;
  otherOrgId: string;
  keys: { admin: string; member: string; viewer: string; team: string; otherAdmin: string };
  /** Real ids by path parameter name. */
  ids: Record<string, string[]>;
  fieldIds: string[];
  fieldNames: string[];
  schemaVersions: number[];
  artifactNames: string[];
  /** Real cursors of several lists, and tampered copies: a cursor of one list sent to another is a hostile value too. */
  cursors: string[];
}

/**
 * An org with admin, member, viewer and team keys, a database whose table has every field type and rows, a view,
 * a unique rule and a foreign key to it, a finished import preview with its artifacts, an invitation, and a
 * second org whose ids serve as cross-tenant near-misses.
 */
export async function buildFuzzWorkspace(server: TestServer): Promise<FuzzWorkspace> {
  const org = await createOrg(server.prisma);
  const other = await createOrg(server.prisma);
  const member = await addMember(server.prisma, org.orgId, 'member');
  const viewer = await addMember(server.prisma, org.orgId, 'viewer');
  // Members the fuzzer may rename, demote or remove without losing a credential it sends.
  const spare = await addMember(server.prisma, org.orgId, 'member');
  const adminMember = await server.prisma.member.findFirstOrThrow({
    where: { orgId: org.orgId, userId: org.adminUserId },
  });
  const team = await createTeamKey(server.prisma, org);
  const write = (body: unknown) => ({ token: org.adminKey, idempotencyKey: idempotencyKey(), body });

  let table = await createTable(server, org, EVERY_FIELD_TYPE);
  const parent = await createTable(server, org, [{ name: 'Code', type: 'text', options: { maxLength: 20 } }], {
    databaseId: table.databaseId,
  });
  const child = await createTable(server, org, [{ name: 'Parent code', type: 'text', options: { maxLength: 20 } }], {
    databaseId: table.databaseId,
  });
  const rule = await addUniqueRule(server, org.adminKey, parent, { fieldIds: ['Code'] });
  expect(rule.job.state, JSON.stringify(rule.job)).toBe('succeeded');
  const foreignKey = await addForeignKey(server, org.adminKey, child, {
    fieldIds: ['Parent code'],
    referencedTableId: parent.tableId,
    referencedRuleId: rule.ruleId,
  });
  expect(foreignKey.job.state, JSON.stringify(foreignKey.job)).toBe('succeeded');
  const keys = await server.request('GET', `${child.path}/foreign-keys`, { token: org.adminKey });
  expect(keys.status, keys.text).toBe(200);
  const foreignKeyId: string = keys.body.data[0].id;
  const nameRule = await addUniqueRule(server, org.adminKey, table, { fieldIds: ['Name'] });
  expect(nameRule.job.state, JSON.stringify(nameRule.job)).toBe('succeeded');
  table = await refreshSchemaVersion(server, org.adminKey, table);

  const rowIds: string[] = [];
  for (let index = 0; index < 12; index += 1) {
    const created = await createRow(server, org.adminKey, table, {
      Name: `Row ${index}`,
      Count: index,
      Price: index * 1.25,
      Flag: index % 2 === 0,
      Day: `2026-01-0${(index % 9) + 1}`,
      Status: index % 2 === 0 ? 'open' : 'closed',
      Tags: ['red'],
      Data: { n: index },
      Email: `r${index}@example.com`,
    });
    expect(created.status, created.text).toBe(201);
    rowIds.push(created.body.row.id);
  }
  const parentTable = await refreshSchemaVersion(server, org.adminKey, parent);
  const parentRow = await createRow(server, org.adminKey, parentTable, { Code: 'A-1' });
  expect(parentRow.status, parentRow.text).toBe(201);
  rowIds.push(parentRow.body.row.id);

  const view = await server.request(
    'POST',
    `${table.path}/views`,
    write({
      expectedSchemaVersion: table.schemaVersion,
      name: 'Open rows',
      visibility: 'shared',
      definition: {
        columnOrder: [],
        columnWidths: {},
        frozenColumns: 0,
        hiddenColumns: [],
        query: { where: { field: 'Status', op: 'eq', value: 'open' } },
      },
    }),
  );
  expect(view.status, view.text).toBe(201);
  const job = await preview(server, org.adminKey, table, {
    content: 'Name,Count\nok,1\nbad,notanumber\n',
    mapping: [
      { source: 'Name', fieldId: table.fields.Name! },
      { source: 'Count', fieldId: table.fields.Count! },
    ],
  });
  expect(job.artifacts.length, JSON.stringify(job)).toBeGreaterThan(0);
  const invitation = await server.request(
    'POST',
    `/v1/orgs/${org.orgId}/invitations`,
    write({ email: 'invitee@example.com', role: 'viewer' }),
  );
  expect(invitation.status, invitation.text).toBe(201);
  const spareKey = await server.request(
    'POST',
    '/v1/me/keys',
    write({ name: 'Spare', orgId: org.orgId, access: 'read' }),
  );
  expect(spareKey.status, spareKey.text).toBe(201);

  const ids: Record<string, string[]> = {
    orgId: [org.orgId],
    databaseId: [table.databaseId],
    tableId: [table.tableId, parent.tableId, child.tableId],
    rowId: rowIds,
    viewId: [view.body.id],
    jobId: [job.jobId, rule.job.jobId, foreignKey.job.jobId],
    foreignKeyId: [foreignKeyId],
    id: [spare.memberId, adminMember.id, invitation.body.invitation.id, spareKey.body.key.id],
    ruleId: [rule.ruleId, nameRule.ruleId],
  };
  const cursors: string[] = [];
  for (const list of [
    `${table.path}/rows?limit=1`,
    `/v1/orgs/${org.orgId}/activity?limit=1`,
    `/v1/orgs/${org.orgId}/jobs?limit=1`,
    `${table.path}/rows/${rowIds[0]}/history?limit=1`,
  ]) {
    const page = await server.request('GET', list, { token: org.adminKey });
    expect(page.status, page.text).toBe(200);
    const cursor: string | null = page.body.nextCursor;
    if (cursor)
      cursors.push(
        cursor,
        `${cursor.slice(0, -2)}${cursor.endsWith('AA') ? 'AB' : 'AA'}`,
        cursor.slice(0, cursor.length / 2),
      );
  }
  expect(cursors.length).toBeGreaterThan(0);
  for (const [name, values] of Object.entries(ids))
    expect(
      values.every((value) => typeof value === 'string'),
      name,
    ).toBe(true);
  return {
    orgId: org.orgId,
    otherOrgId: other.orgId,
    keys: { admin: org.adminKey, member: member.apiKey, viewer: viewer.apiKey, team, otherAdmin: other.adminKey },
    ids,
    fieldIds: Object.values(table.fields),
    fieldNames: Object.keys(table.fields),
    schemaVersions: [table.schemaVersion, parentTable.schemaVersion, child.schemaVersion + 1],
    artifactNames: job.artifacts.map((artifact: { name: string }) => artifact.name),
    cursors,
  };
}

/**
 * Columns that change on reads (a key's last use, a session's last activity) or that record a refused request
 * by design (idempotency records replay 4xx answers): left out of the state digest.
 */
const VOLATILE: Record<string, string[]> = {
  api_keys: ['last_used_at'],
  sessions: ['last_seen_at'],
  // A wrong password or two-factor code is counted before it is checked (issue 18 §2): a refusal that counts.
  users: ['failed_logins', 'locked_until'],
  // Every feed read sequences what committed since the last (docs/decisions/changes.md): bookkeeping, not state.
  change_commits: ['position', 'committed_at'],
  change_feed: ['head_position', 'head_seq', 'head_committed_at'],
  // A waiting reader arms the feed, the next commit disarms it.
  change_arm: ['armed'],
};
const IGNORED_TABLES = new Set(['idempotency_records', '_prisma_migrations']);

/** A digest: per table, its row count and an order-independent sum of its rows' hashes. */
export type Digest = Record<string, string>;

/**
 * A cheap digest of everything a mutation could change: per table of the catalog and of every workspace schema,
 * its row count and an order-independent sum of row hashes, in one prepared statement (~2 ms on the fuzz workspace).
 *
 * `pin()` fixes the state to digest and computes the digest later: it opens a read-only REPEATABLE READ transaction
 * that locks every table against DROP and takes its snapshot, in one round trip, and leaves the digest to run in
 * that snapshot. The caller sends its next request at once, so the digests overlap the requests instead of each
 * request waiting for the digest before it.
 */
export class StateDigest {
  private readonly pool: pg.Pool;

  constructor(url: string) {
    this.pool = new pg.Pool({ connectionString: url, max: 4 });
  }

  async connect(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  close(): Promise<void> {
    return this.pool.end();
  }

  /** The tables and digest statement as of the last success, which may have created or dropped tables. */
  private tables: { names: string[]; statement: pg.QueryConfig } | null = null;
  private statements = 0;

  forgetTables(): void {
    this.tables = null;
  }

  async take(): Promise<Digest> {
    return (await this.pin())();
  }

  async pin(): Promise<() => Promise<Digest>> {
    this.tables ??= await this.digestStatement();
    const { names, statement } = this.tables;
    const client = await this.pool.connect();
    try {
      await client.query(
        `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; LOCK TABLE ${names.join(', ')} IN ACCESS SHARE MODE; SELECT 1`,
      );
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    const digest = (async () => {
      try {
        const result = await client.query<{ name: string; digest: string }>(statement);
        await client.query('COMMIT');
        client.release();
        return Object.fromEntries(result.rows.map((row) => [row.name, row.digest]));
      } catch (error) {
        client.release(error as Error);
        throw error;
      }
    })();
    // Awaited by whoever compares it; a failure before then must not count as unhandled.
    digest.catch(() => {});
    return () => digest;
  }

  private async digestStatement(): Promise<{ names: string[]; statement: pg.QueryConfig }> {
    const tables = await this.pool.query<{ schemaname: string; tablename: string }>(
      "SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2",
    );
    // A table created by a refused mutation would not be listed: its catalog rows (data_tables) still show it.
    const listed = tables.rows
      .filter((row) => !IGNORED_TABLES.has(row.tablename))
      .map((row) => ({
        name: `${pg.escapeIdentifier(row.schemaname)}.${pg.escapeIdentifier(row.tablename)}`,
        volatile: VOLATILE[row.tablename],
      }));
    const text = listed
      .map(({ name, volatile }) => {
        // A row's text is cheaper than its jsonb; a table with volatile columns drops them from its jsonb instead.
        const row = volatile
          ? `(to_jsonb(t)${volatile.map((column) => ` - ${pg.escapeLiteral(column)}`).join('')})::text`
          : 't::text';
        return `SELECT ${pg.escapeLiteral(name)} AS name, count(*)::text || ':' || coalesce(sum(hashtext(${row})), 0)::text AS digest FROM ${name} t`;
      })
      .join(' UNION ALL ');
    this.statements += 1;
    return { names: listed.map(({ name }) => name), statement: { name: `fuzz-digest-${this.statements}`, text } };
  }

  /** Waits until no job is running or due within 30 s, so that a digest is not taken while a worker is changing state. */
  async settle(timeoutMs = 30_000): Promise<void> {
    await vi.waitFor(
      async () => {
        const { rows } = await this.pool.query<{ busy: number }>(
          "SELECT count(*)::int AS busy FROM jobs WHERE state = 'running' OR (state = 'queued' AND run_at < now() + interval '30 seconds')",
        );
        if (rows[0]!.busy !== 0) throw new Error('jobs did not settle');
      },
      { timeout: timeoutMs, interval: 20 },
    );
  }
}
