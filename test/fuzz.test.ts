import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FilterExpression, OrderBy } from '../src/data/filter.ts';
import { httpStatusOf, isErrorCode } from '../src/kernel/errors.ts';
import { routes } from '../src/http/rest/routes.ts';
import { startTestServer, type TestServer } from './helpers/server.ts';
import {
  bodyText,
  encodeLoosely,
  knownClasses,
  rarely,
  schemaArbitrary,
  HOSTILE_VALUES,
  type Hints,
  type JsonSchema,
} from './helpers/fuzz/values.ts';
import {
  buildFuzzWorkspace,
  startDeliveryHook,
  StateDigest,
  type Digest,
  type FuzzWorkspace,
} from './helpers/fuzz/workspace.ts';
import { checkedFetch, describesRequest } from './helpers/contract.ts';

/**
 * Issue 18: generated requests across every route of the OpenAPI document — valid, boundary and hostile values
 * for every parameter and body member, and hostile headers. Whatever arrives: no 5xx, every error is the spec §7
 * envelope with a known code, every success matches the route's response schema, and a refused mutation changes
 * nothing. `FUZZ_RUNS` sets the number of requests (default 10,000), `FUZZ_SEED` the seed (fixed by default, so
 * `npm test` is repeatable; a failure prints the seed and path to replay it). `FUZZ_EXCLUDE_KNOWN=1` skips the
 * bad-input classes other issue-18 branches fix (see knownClasses) to hunt for other bugs before they are merged.
 */
const REQUESTS = Number(process.env.FUZZ_RUNS ?? 10_000);
const SEED = Number(process.env.FUZZ_SEED ?? 1_800_018);
const EXCLUDE_KNOWN = process.env.FUZZ_EXCLUDE_KNOWN === '1';
/** Requests per generated batch: its reads run concurrently, its mutations one at a time between digests. */
const BATCH = 16;

interface Operation {
  method: string;
  path: string;
  parameters: { name: string; in: 'path' | 'query' | 'header'; required: boolean; schema: JsonSchema }[];
  body?: JsonSchema;
  /** `/oauth/token` and `/oauth/revoke` take form bodies (RFC 6749); every other body is JSON. */
  bodyType: 'json' | 'form';
}

interface FuzzRequest {
  method: string;
  /** The route it was generated for, e.g. `PATCH /v1/orgs/{orgId}`. */
  route: string;
  url: string;
  headers: [string, string][];
  body?: string | Uint8Array<ArrayBuffer>;
  /**
   * Issue-18 classes fixed on other branches that this request falls in (see knownClasses). Worked out when asked:
   * walking every generated value cost ~1 ms a request, and only FUZZ_EXCLUDE_KNOWN and a failure's description ask.
   */
  known(): string[];
}

let server: TestServer;
let workspace: FuzzWorkspace;
let digest: StateDigest;
let operations: Operation[];
let document: JsonSchema;

let hook: Awaited<ReturnType<typeof startDeliveryHook>>;

beforeAll(async () => {
  hook = await startDeliveryHook();
  server = await startTestServer({
    RATE_LIMIT_RPS: '0',
    CONCURRENCY_LIMIT: '0',
    ORG_CONCURRENCY_LIMIT: '0',
    DATABASE_POOL_SIZE: '10',
    DELIVERY_WEBHOOK_URL: hook.url,
  });
  workspace = await buildFuzzWorkspace(server);
  digest = new StateDigest(server.database.url);
  await digest.connect();
  document = (await server.request('GET', '/v1/openapi.json')).body;
  operations = Object.entries(document.paths as Record<string, Record<string, any>>).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, operation]) => {
      const content = operation.requestBody?.content ?? {};
      const form = content['application/x-www-form-urlencoded']?.schema;
      return {
        method: method.toUpperCase(),
        path,
        parameters: operation.parameters ?? [],
        body: content['application/json']?.schema ?? form,
        bodyType: form && !content['application/json'] ? 'form' : 'json',
      } satisfies Operation;
    }),
  );
}, 120_000);

afterAll(async () => {
  await digest?.close();
  await server?.close();
  await hook?.close();
});

const FRESH_KEY = '\u0001fresh';
let keyCounter = 0;

const FILTERS = [
  { field: 'Name', op: 'eq', value: 'Row 1' },
  {
    and: [
      { field: 'Count', op: 'gte', value: 3 },
      {
        or: [
          { field: 'Status', op: 'eq', value: 'open' },
          { field: 'Flag', op: 'eq', value: true },
        ],
      },
    ],
  },
  { field: 'Tags', op: 'hasAny', value: ['red'] },
  { field: 'Day', op: 'lt', value: '2026-01-05' },
  { field: 'Name', op: 'iContains', value: 'ow' },
  { field: 'Data', op: 'isEmpty' },
];

function hintsFor(): Hints {
  const { ids, fieldIds, fieldNames, schemaVersions } = workspace;
  const allIds = Object.values(ids).flat();
  const byName: Record<string, readonly unknown[]> = {
    ...ids,
    field: [...fieldIds, ...fieldNames],
    fieldId: fieldIds,
    fieldIds: [fieldIds, [fieldIds[0]], fieldNames.slice(0, 2)],
    source: ['Name', 'Count', 0, 1],
    expectedSchemaVersion: schemaVersions,
    expectedVersion: ['1', '2', '3'],
    version: ['1', '2'],
    previewJobId: ids.jobId!,
    referencedTableId: ids.tableId!,
    referencedRuleId: ids.ruleId!,
    rowIds: [ids.rowId!.slice(0, 3)],
    name: ['Fuzz name', ...workspace.artifactNames],
    role: ['admin', 'member', 'viewer'],
    cursor: workspace.cursors,
    values: [
      { Name: 'Fuzz row', Count: 3 },
      { Price: 1.5, Flag: true },
      { Status: 'open', Tags: ['red', 'blue'] },
      { Name: 'Row 1' },
      { Day: '2026-03-01', At: '2026-03-01T10:00:00.000Z' },
      { Data: { a: [1] } },
      { Email: 'a@example.com', Site: 'https://example.com' },
      { [fieldIds[0]!]: 'By id', [fieldIds[2]!]: -1000 },
      { Count: 1001 },
      { Seq: 5 },
      { Status: 'missing' },
    ],
    where: FILTERS,
    filter: FILTERS,
    orderBy: [[{ field: 'Count', direction: 'desc' }], [{ field: fieldIds[0], direction: 'asc' }]],
    definition: [
      { columnOrder: [], columnWidths: {}, frozenColumns: 0, hiddenColumns: [], query: {} },
      {
        columnOrder: fieldIds.slice(0, 3),
        columnWidths: { [fieldIds[0]!]: 200 },
        frozenColumns: 1,
        hiddenColumns: [fieldIds[1]],
        query: { where: FILTERS[1], orderBy: [{ field: 'Name', direction: 'asc' }] },
      },
    ],
  };
  return (name) => byName[name] ?? (name.endsWith('Id') ? allIds : undefined);
}

/** Path ids: real ones, near misses (other org, wrong case, off by one character or length) and hostile strings. */
function pathValue(name: string, hints: Hints, hostileMode: boolean): fc.Arbitrary<string> {
  const real = (hints(name) ?? Object.values(workspace.ids).flat()) as string[];
  const nearMiss = real.flatMap((id) => [id.toLowerCase(), `${id.slice(0, -1)}Z`, id.slice(0, -1), `${id}0`]);
  const hostile = [
    '%00',
    '..',
    '%2e%2e',
    '%2F',
    '%ZZ',
    '%ED%A0%80',
    '%C3%28',
    'null',
    '0',
    '-1',
    '%20',
    'ü',
    "'%20OR%201=1",
    'x'.repeat(300),
    'x'.repeat(17_000),
    workspace.otherOrgId,
  ];
  if (!hostileMode) return fc.constantFrom(...real);
  return fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom(...real).map(encodeLoosely) },
    { weight: 2, arbitrary: fc.constantFrom(...nearMiss) },
    { weight: 2, arbitrary: fc.constantFrom(...hostile) },
    { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 30, unit: 'binary' }).map(encodeLoosely) },
  );
}

const FILTER_SCHEMA = z.toJSONSchema(FilterExpression, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
const ORDER_SCHEMA = z.toJSONSchema(OrderBy, { io: 'input', unrepresentable: 'any' }) as JsonSchema;

function queryValue(
  parameter: Operation['parameters'][number],
  hints: Hints,
  hostileMode: boolean,
): fc.Arbitrary<string> {
  const hostile = fc.constantFrom(
    '',
    '%00',
    '%ZZ',
    '%ED%A0%80',
    'x'.repeat(2_000),
    'x'.repeat(17_000),
    '-1',
    '1e309',
    'NaN',
    '[]',
    '{}',
    'null',
  );
  const json = (schema: JsonSchema) =>
    schemaArbitrary(schema, hints, { hostile: hostileMode, name: parameter.name }).map((value) =>
      encodeLoosely(bodyText(value)),
    );
  const valid =
    parameter.name === 'where'
      ? json(FILTER_SCHEMA)
      : parameter.name === 'orderBy'
        ? json(ORDER_SCHEMA)
        : schemaArbitrary(parameter.schema, hints, { hostile: hostileMode, name: parameter.name, document }).map(
            (value) => encodeLoosely(typeof value === 'string' ? value : bodyText(value)),
          );
  if (!hostileMode) return valid;
  return fc.oneof({ weight: 6, arbitrary: valid }, { weight: 1, arbitrary: hostile });
}

function queryString(operation: Operation, hints: Hints, hostileMode: boolean): fc.Arbitrary<string> {
  const parameters = operation.parameters.filter((parameter) => parameter.in === 'query');
  const members = parameters.map((parameter) =>
    fc.option(
      queryValue(parameter, hints, hostileMode).map((value) => `${parameter.name}=${value}`),
      { freq: 2 },
    ),
  );
  const oddities = !hostileMode
    ? fc.constant(null)
    : rarely(fc.constantFrom('unknown=1', 'limit=1&limit=2', 'where[field]=Name', '%ZZ=1', 'a=%00', '&&&', '=x'), 8);
  return fc.tuple(fc.tuple(...members), oddities).map(([present, odd]) => {
    const parts = [...present.filter((part): part is string => part !== null), ...(odd ? [odd] : [])];
    return parts.length === 0 ? '' : `?${parts.join('&')}`;
  });
}

function authorization(hostileMode: boolean): fc.Arbitrary<readonly string[]> {
  const { admin, member, viewer, team, otherAdmin } = workspace.keys;
  if (!hostileMode)
    return fc.constantFrom(
      [`Bearer ${admin}`],
      [`Bearer ${admin}`],
      [`Bearer ${member}`],
      [`Bearer ${viewer}`],
      [`Bearer ${team}`],
    );
  const spellings = [
    `bearer ${admin}`,
    `BEARER ${admin}`,
    `Bearer  ${admin}`,
    `Bearer\t${admin}`,
    admin,
    `Basic ${Buffer.from(`x:${admin}`).toString('base64')}`,
    'Bearer',
    'Bearer ',
    '',
    `Bearer ${admin}, Bearer ${viewer}`,
    `Bearer ${admin.slice(0, -1)}x`,
    `Bearer ${admin}x`,
    `Bearer wds_${'x'.repeat(40)}`,
    `Bearer ${'é'.repeat(10)}`,
    `Bearer ${'a'.repeat(9_000)}`,
    `Bearer ${'a'.repeat(17_000)}`,
    'Bearer null',
    'Bearer undefined',
  ];
  return fc.oneof(
    { weight: 6, arbitrary: fc.constant([`Bearer ${admin}`]) },
    { weight: 2, arbitrary: fc.constant([`Bearer ${member}`]) },
    { weight: 2, arbitrary: fc.constant([`Bearer ${viewer}`]) },
    { weight: 1, arbitrary: fc.constant([`Bearer ${team}`]) },
    { weight: 1, arbitrary: fc.constant([`Bearer ${otherAdmin}`]) },
    { weight: 2, arbitrary: fc.constantFrom(...spellings).map((value) => [value]) },
    { weight: 1, arbitrary: fc.constant([`Bearer ${admin}`, `Bearer ${viewer}`]) },
    { weight: 1, arbitrary: fc.constant([]) },
  );
}

function idempotencyKeys(hostileMode: boolean): fc.Arbitrary<readonly string[]> {
  if (!hostileMode) return fc.constant([FRESH_KEY]);
  return fc.oneof(
    { weight: 10, arbitrary: fc.constant([FRESH_KEY]) },
    { weight: 1, arbitrary: fc.constant([]) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        ['abcdefg'],
        ['k'.repeat(256)],
        [''],
        ['  spaced key  '],
        ['clé-é-é-é-é'],
        ['fuzz-reused-key-0001'],
        ['x'.repeat(17_000)],
      ),
    },
    { weight: 1, arbitrary: fc.constant([FRESH_KEY, FRESH_KEY]) },
    { weight: 1, arbitrary: fc.constant([`${FRESH_KEY}${'k'.repeat(240)}`]) },
  );
}

const CONTENT_TYPES = [
  'text/plain',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/x-www-form-urlencoded',
  'application/json; charset=UTF-8',
  'multipart/form-data; boundary=x',
  'application/merge-patch+json',
  'application/json, text/plain',
  'json',
  '',
];

function otherHeaders(): fc.Arbitrary<[string, string][]> {
  return fc.array(
    fc.constantFrom<[string, string]>(
      ['x-request-id', 'x'.repeat(300)],
      ['x-request-id', 'a b\tc'],
      ['x-request-id', ''],
      ['cookie', 'wds_session=abc; wds_csrf=x'],
      ['x-csrf-token', 'x'],
      ['accept', 'application/xml'],
      ['content-encoding', 'gzip'],
      ['x-http-method-override', 'DELETE'],
      ['accept-charset', 'latin1'],
      ['x-forwarded-for', '1.2.3.4, ::1, garbage'],
      ['origin', 'https://evil.example'],
    ),
    { maxLength: 2 },
  );
}

const RAW_BODIES: (string | Uint8Array<ArrayBuffer>)[] = [
  '',
  '{',
  'null',
  '[]',
  '"x"',
  '\ufeff{}',
  '{"a":1,"a":2}',
  '1e400',
  '{"name":"a"}{"name":"b"}',
  new Uint8Array([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
  'x'.repeat(2_000_000),
];

function bodyArbitrary(
  operation: Operation,
  hints: Hints,
  hostileMode: boolean,
): fc.Arbitrary<{ value?: unknown; text?: string | Uint8Array<ArrayBuffer> }> {
  const raw = fc.constantFrom(...RAW_BODIES).map((text) => ({ text }));
  // fetch cannot send a body with GET; the other methods without a declared body sometimes get one anyway.
  if (operation.method === 'GET') return fc.constant({});
  if (!operation.body && !hostileMode) return fc.constant({});
  if (!operation.body) {
    return rarely(
      fc.oneof(
        raw,
        fc.constantFrom(...HOSTILE_VALUES).map((value) => ({ value, text: bodyText(value) })),
      ),
      10,
    ).map((body) => body ?? {});
  }
  const encode = (value: unknown) => (operation.bodyType === 'form' ? formText(value) : bodyText(value));
  const generated = schemaArbitrary(operation.body, hints, { hostile: hostileMode, document }).map((value) => ({
    value,
    text: encode(value),
  }));
  if (!hostileMode) return generated;
  return fc.oneof(
    { weight: 12, arbitrary: generated },
    { weight: 1, arbitrary: raw },
    { weight: 1, arbitrary: fc.constant({}) },
  );
}

/**
 * One request, in one of three modes: clean (valid credentials, real ids, values the schemas allow) so that it
 * reaches deep code; hostile values (in its body and query, with a clean envelope so they get past authentication);
 * or a hostile envelope (path ids, headers, content type). Each operation's arbitraries are built once.
 */
type Mode = 'clean' | 'values' | 'envelope';

function requestArbitrary(): fc.Arbitrary<FuzzRequest> {
  const hints = hintsFor();
  const modes: Mode[] = ['clean', 'values', 'envelope'];
  return fc.oneof(
    ...operations.flatMap((operation) => modes.map((mode) => operationArbitrary(operation, hints, mode))),
  );
}

function operationArbitrary(operation: Operation, hints: Hints, mode: Mode): fc.Arbitrary<FuzzRequest> {
  const pathParameters = operation.parameters.filter((parameter) => parameter.in === 'path');
  const values = mode === 'values';
  const envelope = mode === 'envelope';
  return fc
    .record({
      // A method the path may not declare (405 with Allow), or another route on the same path.
      method: envelope ? rarely(fc.constantFrom('PUT', 'OPTIONS', 'PATCH', 'POST', 'DELETE'), 10) : fc.constant(null),
      path: fc.tuple(...pathParameters.map((parameter) => pathValue(parameter.name, hints, envelope))),
      query: queryString(operation, hints, values),
      body: bodyArbitrary(operation, hints, values),
      authorization: authorization(envelope),
      keys: idempotencyKeys(envelope),
      contentType: envelope
        ? fc.oneof(
            { weight: 4, arbitrary: fc.constant('application/json') },
            { weight: 1, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
          )
        : fc.constant('application/json'),
      others: envelope ? otherHeaders() : fc.constant([]),
    })
    .map(({ method: otherMethod, path, query, body, authorization: credentials, keys, contentType, others }) => {
      const method = otherMethod ?? operation.method;
      let index = 0;
      const url = operation.path.replace(/\{\w+\}/g, () => path[index++]!) + query;
      const headers: [string, string][] = [
        ...credentials.map((value): [string, string] => ['authorization', value]),
        ...keys.map((value): [string, string] => ['idempotency-key', value]),
        ...(body.text === undefined || contentType === ''
          ? []
          : [
              [
                'content-type',
                operation.bodyType === 'form' && contentType === 'application/json'
                  ? 'application/x-www-form-urlencoded'
                  : contentType,
              ] as [string, string],
            ]),
        ...others,
      ];
      const texts = [url, ...headers.map(([, value]) => value), ...(typeof body.text === 'string' ? [body.text] : [])];
      return withDescription({
        method,
        route: `${method} ${operation.path}`,
        url,
        headers,
        ...(body.text === undefined ? {} : { body: body.text }),
        known: () =>
          knownClasses({
            values: body.value === undefined ? [] : [body.value],
            texts: [...texts, decodeSafely(url)],
          }),
      });
    });
}

/** A form body (RFC 6749 endpoints): top-level members as fields, anything else as its JSON text. */
function formText(value: unknown): string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return bodyText(value);
  return Object.entries(value)
    .map(
      ([name, member]) =>
        `${encodeLoosely(name)}=${encodeLoosely(typeof member === 'string' ? member : bodyText(member))}`,
    )
    .join('&');
}

function decodeSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function send(request: FuzzRequest): Promise<Answer> {
  const headers = new Headers();
  for (const [name, value] of request.headers) {
    headers.append(
      name,
      value.startsWith(FRESH_KEY)
        ? `fuzz-${(keyCounter += 1).toString().padStart(8, '0')}${value.slice(FRESH_KEY.length)}`
        : value,
    );
  }
  // Requests for a method or path the document does not declare (405, 404) are outside it on purpose; every other
  // answer must keep the document.
  const response = await (describesRequest(request.method, request.url) ? checkedFetch : fetch)(
    `${server.url}${request.url}`,
    {
      method: request.method,
      headers,
      redirect: 'manual',
      ...(request.body === undefined ? {} : { body: request.body }),
    },
  );
  return { status: response.status, headers: response.headers, text: await response.text() };
}

const Envelope = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    requestId: z.string().min(1),
    details: z.unknown().optional(),
  }),
});

const routeByName = new Map(routes.map((route) => [`${route.method} ${route.path}`, route]));

/** RFC 6749 §5.2: `/oauth/*` answers its own error shape rather than the spec §7 envelope. */
const OAuthError = z.strictObject({ error: z.string(), error_description: z.string().optional() });

/** What is wrong with an answer, or null: a 5xx, an error that is not the spec §7 envelope, a success off its schema. */
function problemWith(request: FuzzRequest, answer: Answer): string | null {
  if (answer.status >= 500) return `answered ${answer.status}: ${answer.text.slice(0, 300)}`;
  if (answer.status >= 400) {
    let body: unknown;
    try {
      body = JSON.parse(answer.text);
    } catch {
      return `answered ${answer.status} with a body that is not JSON: ${JSON.stringify(answer.text.slice(0, 200))}`;
    }
    if (request.url.startsWith('/oauth/') && OAuthError.safeParse(body).success) return null;
    const envelope = Envelope.safeParse(body);
    if (!envelope.success) return `answered ${answer.status} without the §7 envelope: ${answer.text.slice(0, 300)}`;
    const { code, requestId } = envelope.data.error;
    if (!isErrorCode(code)) return `answered the unknown code ${code}`;
    if (httpStatusOf(code) !== answer.status)
      return `answered ${answer.status} with ${code}, which maps to ${httpStatusOf(code)}`;
    if (answer.headers.get('x-request-id') !== requestId)
      return `answered requestId ${requestId} but X-Request-Id ${answer.headers.get('x-request-id')}`;
    return null;
  }
  if (answer.status >= 300) return null;
  const route = routeByName.get(request.route);
  if (!route || route.file || answer.status !== route.successStatus)
    return route && answer.status !== route.successStatus
      ? `answered ${answer.status}, not ${route.successStatus}`
      : null;
  // An event stream (the fuzz workspace's jobs have ended, so it closes) is checked event by event.
  const bodies = route.stream
    ? answer.text
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice('data: '.length))
    : [answer.text];
  for (const body of bodies) {
    const parsed = route.response.safeParse(JSON.parse(body));
    if (!parsed.success) return `answered a success off the route's schema: ${parsed.error.message.slice(0, 300)}`;
  }
  return null;
}

/** A counterexample prints as the request, shortened: generated values can be megabytes long. */
function withDescription(request: FuzzRequest): FuzzRequest {
  return Object.defineProperty(request, fc.toStringMethod, {
    value: () => describeRequest(request),
    enumerable: false,
  });
}

function describeRequest(request: FuzzRequest): string {
  const body =
    request.body === undefined
      ? ''
      : typeof request.body === 'string'
        ? request.body.slice(0, 300)
        : `<${request.body.length} bytes>`;
  return `${request.method} ${request.url.slice(0, 300)} known=${request.known().join(',') || '-'} headers=${JSON.stringify(request.headers.map(([name, value]) => [name, value.slice(0, 80)]))} body=${body}`;
}

/** The state after the last mutation, pinned: the state the next mutation starts from. */
let pinned: (() => Promise<Digest>) | null = null;

/**
 * Sends one request and checks its answer. For a refused mutation it returns the check that the state did not
 * change, which runs while the next requests go out (see StateDigest.pin).
 */
async function check(request: FuzzRequest): Promise<Promise<void> | undefined> {
  if (EXCLUDE_KNOWN && request.known().length > 0) return;
  const mutation = request.method !== 'GET';
  const before = mutation ? (pinned ??= await digest.pin()) : null;
  const answer = await send(request);
  const problem = problemWith(request, answer);
  if (problem) throw new Error(`${describeRequest(request)}\n  ${problem}`);
  if (!before) return;
  if (answer.status < 400) {
    // A success may enqueue a job; the next digest waits until the workers are done with it.
    await digest.settle();
    digest.forgetTables();
    pinned = null;
    return;
  }
  const after = await digest.pin();
  pinned = after;
  return (async () => {
    const [state, changed] = await Promise.all([before(), after()]);
    // The message describes the request, which costs a walk of its values: only worth it for a failure.
    if (isDeepStrictEqual(changed, state)) return;
    expect(changed, `${describeRequest(request)}\n  was refused with ${answer.status} but changed the state`).toEqual(
      state,
    );
  })();
}

/** Mutations go one at a time; the checks that a refused one changed nothing all end before the batch does. */
async function mutateInTurn(requests: FuzzRequest[]): Promise<void> {
  const unchanged: Promise<void>[] = [];
  try {
    for (const request of requests) {
      const comparison = await check(request);
      if (comparison) unchanged.push(comparison);
    }
  } finally {
    await Promise.allSettled(unchanged);
  }
  await Promise.all(unchanged);
}

describe('fuzzing every route of the OpenAPI document (issue 18)', () => {
  it('takes a state digest that a refused mutation leaves alone and an accepted one changes', async () => {
    const table = `/v1/orgs/${workspace.orgId}/databases/${workspace.ids.databaseId![0]}/tables/${workspace.ids.tableId![0]}`;
    const initial = await digest.take();
    const refused = await server.request('POST', `${table}/rows`, {
      token: workspace.keys.viewer,
      idempotencyKey: `fuzz-self-check-${Date.now()}`,
      body: { expectedSchemaVersion: workspace.schemaVersions[0], values: { Name: 'Self check' } },
    });
    expect(refused.status, refused.text).toBe(403);
    expect(await digest.take()).toEqual(initial);
    const accepted = await server.request('POST', `${table}/rows`, {
      token: workspace.keys.admin,
      idempotencyKey: `fuzz-self-check-${Date.now()}`,
      body: { expectedSchemaVersion: workspace.schemaVersions[0], values: { Name: 'Self check' } },
    });
    expect(accepted.status, accepted.text).toBe(201);
    expect(await digest.take()).not.toEqual(initial);
  });

  it(`answers ${REQUESTS} generated requests with no 5xx, only §7 envelopes, and no change for a refused mutation`, async () => {
    const declared = new Set(operations.map((operation) => `${operation.method} ${operation.path}`));
    expect(routes.filter((route) => !declared.has(`${route.method} ${route.path}`))).toEqual([]);
    const reads = (batch: FuzzRequest[]) => batch.filter((request) => request.method === 'GET');
    const writes = (batch: FuzzRequest[]) => batch.filter((request) => request.method !== 'GET');
    await fc.assert(
      fc.asyncProperty(fc.array(requestArbitrary(), { minLength: BATCH, maxLength: BATCH }), async (batch) => {
        // Reads change nothing the digest covers, so they run beside the mutations, which run one at a time.
        const outcomes = await Promise.allSettled([...reads(batch).map(check), mutateInTurn(writes(batch))]);
        const failure = outcomes.find((outcome) => outcome.status === 'rejected');
        if (failure) throw failure.reason;
      }),
      { seed: SEED, numRuns: Math.ceil(REQUESTS / BATCH), endOnFailure: true },
    );
  }, 900_000);
});
