import { Cron } from 'croner';
import { describe, expect, it } from 'vitest';
import { nextRuns, parseCron } from '../src/kernel/cron.ts';
import { BackupSchedulePreviewResponse } from '../src/contracts/backups.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createOrg, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import type { ApiResponse } from './helpers/server.ts';
import { useServerWithOrg } from './helpers/suite.ts';
import { createDatabase } from './helpers/workspace.ts';

const suite = useServerWithOrg();

/** Runs as spec 2.1 Timestamps, so expectations read like the API's answers. */
function runsAfter(cron: string, timezone: string, after: string, count = 3): string[] {
  return nextRuns(cron, timezone, new Date(after), count).map((run) => run.toISOString());
}

describe('nextRuns: a local time that does not exist (spring forward) runs once, when the clock jumps', () => {
  it.each([
    // 02:30 CET does not exist on 2027-03-28: 02:00 CET (01:00Z) jumps to 03:00 CEST.
    [
      'Europe/Berlin',
      '2027-03-27T12:00:00.000Z',
      ['2027-03-28T01:00:00.000Z', '2027-03-29T00:30:00.000Z', '2027-03-30T00:30:00.000Z'],
    ],
    // 02:30 EST does not exist on 2027-03-14: 02:00 EST (07:00Z) jumps to 03:00 EDT.
    [
      'America/New_York',
      '2027-03-13T12:00:00.000Z',
      ['2027-03-14T07:00:00.000Z', '2027-03-15T06:30:00.000Z', '2027-03-16T06:30:00.000Z'],
    ],
  ])('30 2 * * * in %s', (zone, after, expected) => {
    expect(runsAfter('30 2 * * *', zone, after)).toEqual(expected);
  });

  it('moves a time inside a 30-minute gap too (Lord Howe Island, 02:00 → 02:30 on 2026-10-04)', () => {
    expect(runsAfter('15 2 * * *', 'Australia/Lord_Howe', '2026-10-03T00:00:00.000Z')).toEqual([
      '2026-10-03T15:30:00.000Z',
      '2026-10-04T15:15:00.000Z',
      '2026-10-05T15:15:00.000Z',
    ]);
  });

  it('collapses every skipped time, and a time right after the gap, into one run', () => {
    expect(runsAfter('*/15 2 * * *', 'Europe/Berlin', '2027-03-27T12:00:00.000Z')).toEqual([
      '2027-03-28T01:00:00.000Z',
      '2027-03-29T00:00:00.000Z',
      '2027-03-29T00:15:00.000Z',
    ]);
    expect(runsAfter('*/15 * * * *', 'Europe/Berlin', '2027-03-28T00:40:00.000Z', 4)).toEqual([
      '2027-03-28T00:45:00.000Z',
      '2027-03-28T01:00:00.000Z',
      '2027-03-28T01:15:00.000Z',
      '2027-03-28T01:30:00.000Z',
    ]);
  });
});

describe('nextRuns: a local time that occurs twice (fall back) runs once, at its first occurrence', () => {
  it.each([
    // 01:30 occurs at 05:30Z (EDT) and again at 06:30Z (EST).
    [
      '30 1 * * *',
      'America/New_York',
      '2026-10-31T12:00:00.000Z',
      ['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z', '2026-11-03T06:30:00.000Z'],
    ],
    [
      '30 1 * * *',
      'America/New_York',
      '2027-11-06T12:00:00.000Z',
      ['2027-11-07T05:30:00.000Z', '2027-11-08T06:30:00.000Z', '2027-11-09T06:30:00.000Z'],
    ],
    // 02:30 occurs at 00:30Z (CEST) and again at 01:30Z (CET).
    [
      '30 2 * * *',
      'Europe/Berlin',
      '2027-10-30T12:00:00.000Z',
      ['2027-10-31T00:30:00.000Z', '2027-11-01T01:30:00.000Z', '2027-11-02T01:30:00.000Z'],
    ],
  ])('%s in %s', (cron, zone, after, expected) => {
    expect(runsAfter(cron, zone, after)).toEqual(expected);
  });

  it('does not run again when now falls between the two occurrences', () => {
    expect(runsAfter('30 1 * * *', 'America/New_York', '2026-11-01T06:15:00.000Z')[0]).toBe('2026-11-02T06:30:00.000Z');
  });

  it('applies to every schedule: an hourly one skips the repeated 01:00', () => {
    expect(runsAfter('0 * * * *', 'America/New_York', '2026-11-01T04:30:00.000Z')).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
      '2026-11-01T08:00:00.000Z',
    ]);
  });
});

describe('nextRuns: cron semantics', () => {
  it.each([
    [
      'strictly after now',
      '0 0 * * *',
      '2026-01-01T00:00:00.000Z',
      ['2026-01-02T00:00:00.000Z', '2026-01-03T00:00:00.000Z', '2026-01-04T00:00:00.000Z'],
    ],
    [
      'seconds and milliseconds of now',
      '* * * * *',
      '2026-01-01T00:00:59.999Z',
      ['2026-01-01T00:01:00.000Z', '2026-01-01T00:02:00.000Z', '2026-01-01T00:03:00.000Z'],
    ],
    [
      'a list',
      '5,35,50 * * * *',
      '2026-01-01T00:40:00.000Z',
      ['2026-01-01T00:50:00.000Z', '2026-01-01T01:05:00.000Z', '2026-01-01T01:35:00.000Z'],
    ],
    [
      'a range with a step',
      '0 8-18/5 * * *',
      '2026-01-01T09:00:00.000Z',
      ['2026-01-01T13:00:00.000Z', '2026-01-01T18:00:00.000Z', '2026-01-02T08:00:00.000Z'],
    ],
    [
      '* with a step',
      '0 0 */10 * *',
      '2026-01-05T00:00:00.000Z',
      ['2026-01-11T00:00:00.000Z', '2026-01-21T00:00:00.000Z', '2026-01-31T00:00:00.000Z'],
    ],
    [
      'month names, any case',
      '0 0 1 jan,Jul *',
      '2026-02-01T00:00:00.000Z',
      ['2026-07-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z', '2027-07-01T00:00:00.000Z'],
    ],
    [
      'a range of weekday names',
      '0 9 * * MON-WED',
      '2026-01-01T00:00:00.000Z',
      ['2026-01-05T09:00:00.000Z', '2026-01-06T09:00:00.000Z', '2026-01-07T09:00:00.000Z'],
    ],
    [
      '7 as Sunday',
      '0 0 * * 7',
      '2026-01-01T00:00:00.000Z',
      ['2026-01-04T00:00:00.000Z', '2026-01-11T00:00:00.000Z', '2026-01-18T00:00:00.000Z'],
    ],
    [
      'both day fields restricted: either matches (13th or Friday)',
      '0 0 13 * FRI',
      '2026-04-01T00:00:00.000Z',
      ['2026-04-03T00:00:00.000Z', '2026-04-10T00:00:00.000Z', '2026-04-13T00:00:00.000Z'],
    ],
    [
      'a day field starting with *: both must match (odd-day Mondays)',
      '0 0 */2 * MON',
      '2026-01-01T00:00:00.000Z',
      ['2026-01-05T00:00:00.000Z', '2026-01-19T00:00:00.000Z', '2026-02-09T00:00:00.000Z'],
    ],
    [
      'a bare * day of month: weekday only',
      '0 0 * * 1',
      '2026-01-01T00:00:00.000Z',
      ['2026-01-05T00:00:00.000Z', '2026-01-12T00:00:00.000Z', '2026-01-19T00:00:00.000Z'],
    ],
    [
      'a leap day',
      '0 0 29 2 *',
      '2026-01-01T00:00:00.000Z',
      ['2028-02-29T00:00:00.000Z', '2032-02-29T00:00:00.000Z', '2036-02-29T00:00:00.000Z'],
    ],
    [
      'the 31st, only in long months',
      '0 0 31 * *',
      '2026-01-31T00:00:00.000Z',
      ['2026-03-31T00:00:00.000Z', '2026-05-31T00:00:00.000Z', '2026-07-31T00:00:00.000Z'],
    ],
    [
      'a half-hour zone alias',
      '0 0 * * *',
      '2026-01-01T00:00:00.000Z',
      ['2026-01-01T18:30:00.000Z', '2026-01-02T18:30:00.000Z', '2026-01-03T18:30:00.000Z'],
      'Asia/Kolkata',
    ],
  ])('%s: %s', (_name, cron, after, expected, zone = 'UTC') => {
    expect(runsAfter(cron, zone, after)).toEqual(expected);
  });
});

describe('parseCron: problems name the field and the part that is wrong', () => {
  it.each([
    ['', 'must not be empty'],
    ['   ', 'must not be empty'],
    ['@reboot', '"@reboot": macros are not supported'],
    ['@daily', 'e.g. "0 0 * * *" for @daily'],
    ['0 0 0 * * *', 'exactly 5 fields (minute hour day-of-month month day-of-week), found 6'],
    ['0 0 * *', 'found 4'],
    ['60 * * * *', 'minute field: "60" is not a valid minute (0-59)'],
    ['0 24 * * *', 'hour field: "24" is not a valid hour (0-23)'],
    ['0 0 0 * *', 'day-of-month field: "0" is not a valid day-of-month (1-31)'],
    ['0 0 * 13 *', 'month field: "13" is not a valid month (1-12 or JAN-DEC)'],
    ['0 0 * * 8', 'day-of-week field: "8" is not a valid day-of-week (0-7 or SUN-SAT)'],
    ['0 0 * * MONDAY', 'day-of-week field: "MONDAY" is not a valid day-of-week'],
    ['0 0 * * FRI-MON', 'day-of-week field: the range "FRI-MON" runs backwards (Sunday is 0 or 7)'],
    ['5/15 * * * *', 'minute field: "5/15" needs * or a range before its step, e.g. 5-59/15'],
    ['*/0 * * * *', 'minute field: the step in "*/0" must be 1-59'],
    ['1,,2 * * * *', 'minute field: "" is not a value, range or step'],
    ['0 0 L * *', 'day-of-month field: "L" is not a valid day-of-month'],
    ['0 0 * * 1#2', 'day-of-week field: "1#2" is not a value, range or step'],
    ['H * * * *', 'minute field: "H" is not a valid minute'],
    ['0 0 31 4,6 *', 'never runs: no chosen month has a day 31'],
    ['0 0 30 2 */2', 'never runs: no chosen month has a day 30'],
  ])('%j', (cron, message) => {
    const parsed = parseCron(cron);
    expect(parsed.ok).toBe(false);
    expect(parsed.ok ? [] : parsed.problems.join('\n')).toContain(message);
  });

  it('reports every wrong field, and accepts surrounding whitespace and tabs', () => {
    expect(parseCron('99 99 * * *')).toEqual({
      ok: false,
      problems: [expect.stringMatching(/^minute/), expect.stringMatching(/^hour/)],
    });
    expect(parseCron(' 0\t0  1 * * ').ok).toBe(true);
    // Either day field can rescue the other, so a day that never exists is fine beside a restricted weekday.
    expect(parseCron('0 0 31 2 MON').ok).toBe(true);
  });
});

describe('cross-check against croner, an independent implementation', () => {
  const expressions = [
    '* * * * *',
    '*/5 * * * *',
    '0 * * * *',
    '15,45 * * * *',
    '0-10/5 3 * * *',
    '30 4 * * *',
    '0 0 * * *',
    '0 12 * * MON-FRI',
    '0 9 * * mon,wed,fri',
    '0 18 * * 0',
    '0 18 * * 7',
    '0 6 1 * *',
    '0 6 15 * *',
    '0 0 1 JAN *',
    '0 0 1 1,4,7,10 *',
    '59 23 31 * *',
    '0 0 29 2 *',
    '0 8-18/2 * * 1-5',
    '*/10 9-17 * * MON-FRI',
    '5 4 * * sun',
    '0 0 13 * 5',
    '0 0 1,15 * 3',
    '0 12 */2 * *',
    '0 12 */2 * 1',
    '0 0 1-7 * MON',
    '0 0 * * */2',
    '7 7 7 7 *',
    '20-40/10 6 * * *',
    '0 0 30 1-3 *',
    '0 */3 * * *',
    '0 0 25 DEC *',
  ];
  const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Kolkata', 'Australia/Sydney'];
  // None of these is close enough to a DST change for the sampled schedules to meet one (that is tested below).
  const starts = ['2026-01-15T10:20:30.456Z', '2026-07-31T23:59:59.999Z', '2027-12-31T22:30:00.000Z'];

  /** croner ORs the day fields by default; Vixie ANDs them when one starts with `*`, which croner calls domAndDow. */
  function cronerRuns(cron: string, timezone: string, after: string): string[] {
    const parsed = parseCron(cron);
    if (!parsed.ok) throw new Error(parsed.problems.join('; '));
    const job = new Cron(cron, { timezone, mode: '5-part', domAndDow: parsed.schedule.dayRule === 'both' });
    return job.nextRuns(3, new Date(after)).map((run) => run.toISOString());
  }

  it(`agrees on ${expressions.length} expressions × ${zones.length} zones × ${starts.length} start dates`, () => {
    const disagreements = expressions.flatMap((cron) =>
      zones.flatMap((zone) =>
        starts.flatMap((after) => {
          const [ours, theirs] = [runsAfter(cron, zone, after), cronerRuns(cron, zone, after)];
          return JSON.stringify(ours) === JSON.stringify(theirs) ? [] : [{ cron, zone, after, ours, theirs }];
        }),
      ),
    );
    expect(disagreements).toEqual([]);
  });

  it.each([
    ['30 2 * * *', 'Europe/Berlin', '2027-03-27T12:00:00.000Z'],
    ['30 2 * * *', 'America/New_York', '2027-03-13T12:00:00.000Z'],
    ['30 2 * * *', 'Australia/Sydney', '2026-10-03T00:00:00.000Z'],
    ['30 1 * * *', 'America/New_York', '2026-10-31T12:00:00.000Z'],
    ['30 1 * * *', 'America/New_York', '2027-11-06T12:00:00.000Z'],
    ['30 2 * * *', 'Europe/Berlin', '2027-10-30T12:00:00.000Z'],
    ['30 2 * * *', 'Australia/Sydney', '2027-04-03T00:00:00.000Z'],
  ])('agrees on the fixed-time schedule %s in %s across the DST change after %s', (cron, zone, after) => {
    expect(runsAfter(cron, zone, after)).toEqual(cronerRuns(cron, zone, after));
  });

  it('differs on purpose for interval schedules: croner repeats a fall-back hour and skips a spring-forward gap', () => {
    expect(cronerRuns('0 * * * *', 'America/New_York', '2026-11-01T04:30:00.000Z')).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T06:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
    ]);
    expect(runsAfter('0 * * * *', 'America/New_York', '2026-11-01T04:30:00.000Z')).toEqual([
      '2026-11-01T05:00:00.000Z',
      '2026-11-01T07:00:00.000Z',
      '2026-11-01T08:00:00.000Z',
    ]);
    expect(cronerRuns('*/30 2 * * *', 'Europe/Berlin', '2027-03-27T12:00:00.000Z')[0]).toBe('2027-03-29T00:00:00.000Z');
    expect(runsAfter('*/30 2 * * *', 'Europe/Berlin', '2027-03-27T12:00:00.000Z')[0]).toBe('2027-03-28T01:00:00.000Z');
  });
});

describe('POST /v1/orgs/{orgId}/databases/{databaseId}/backup-schedule/preview (endpoint 7)', () => {
  let databaseId: Promise<string> | undefined;
  const database = () => (databaseId ??= createDatabase(suite.server, suite.org));
  const pathFor = (orgId: string, id: string) => `/v1/orgs/${orgId}/databases/${id}/backup-schedule/preview`;

  async function preview(body: unknown, token = suite.org.adminKey): Promise<ApiResponse> {
    return suite.server.request('POST', pathFor(suite.org.orgId, await database()), { token, body });
  }

  it('answers 200 with the next three runs after now, without an Idempotency-Key', async () => {
    const before = new Date();
    const response = await preview({ cron: '0 0 1 * *', timezone: 'Europe/Berlin' });
    const after = new Date();
    expect(response.status, response.text).toBe(200);
    expect(BackupSchedulePreviewResponse.parse(response.body)).toEqual(response.body);
    // The server's "now" lies between the two; both give the same runs except across a month boundary.
    const possible = [before, after].map((now) =>
      nextRuns('0 0 1 * *', 'Europe/Berlin', now).map((run) => run.toISOString()),
    );
    expect(possible).toContainEqual(response.body.nextRuns);
  });

  it('returns minute-by-minute runs strictly after the request for * * * * *', async () => {
    const before = new Date();
    const response = await preview({ cron: '* * * * *', timezone: 'UTC' });
    const after = new Date();
    expect(response.status, response.text).toBe(200);
    // The next three whole minutes after the server's "now", which lies between the two clocks read here.
    const possible = [before, after].map((now) => nextRuns('* * * * *', 'UTC', now).map((run) => run.toISOString()));
    expect(possible).toContainEqual(response.body.nextRuns);
    const runs = (response.body.nextRuns as string[]).map((run) => Date.parse(run));
    expect([runs[1]! - runs[0]!, runs[2]! - runs[1]!]).toEqual([60_000, 60_000]);
  });

  it('accepts a key sent anyway and answers the same', async () => {
    const body = { cron: '0 3 * * 0', timezone: 'UTC' };
    const response = await suite.server.request('POST', pathFor(suite.org.orgId, await database()), {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body,
    });
    expect(response.status).toBe(200);
    expect(response.body).toEqual((await preview(body)).body);
  });

  it.each(['UTC', 'Europe/Berlin', 'Asia/Kolkata', 'US/Eastern', 'Etc/UTC', 'Pacific/Chatham'])(
    'accepts the zone %s',
    async (timezone) => {
      expect((await preview({ cron: '0 0 * * *', timezone })).status).toBe(200);
    },
  );

  it.each([
    ['an empty cron', { cron: '', timezone: 'UTC' }, ['body', 'cron'], 'must not be empty'],
    ['six fields', { cron: '0 0 0 * * *', timezone: 'UTC' }, ['body', 'cron'], 'exactly 5 fields'],
    ['@reboot', { cron: '@reboot', timezone: 'UTC' }, ['body', 'cron'], 'macros are not supported'],
    ['@daily', { cron: '@daily', timezone: 'UTC' }, ['body', 'cron'], 'macros are not supported'],
    ['a minute out of range', { cron: '61 * * * *', timezone: 'UTC' }, ['body', 'cron'], 'minute field'],
    ['an unknown month name', { cron: '0 0 1 FOO *', timezone: 'UTC' }, ['body', 'cron'], 'month field'],
    ['a schedule that never runs', { cron: '0 0 31 4 *', timezone: 'UTC' }, ['body', 'cron'], 'never runs'],
    ['a cron too long', { cron: `0 0 * * ${'1,'.repeat(130)}1`, timezone: 'UTC' }, ['body', 'cron'], '256'],
    ['a cron that is not a string', { cron: 5, timezone: 'UTC' }, ['body', 'cron'], 'string'],
    [
      'an unknown timezone',
      { cron: '0 0 * * *', timezone: 'Mars/Olympus_Mons' },
      ['body', 'timezone'],
      'unknown timezone',
    ],
    [
      'a UTC offset for a timezone',
      { cron: '0 0 * * *', timezone: '+01:00' },
      ['body', 'timezone'],
      'unknown timezone',
    ],
    ['an empty timezone', { cron: '0 0 * * *', timezone: '' }, ['body', 'timezone'], ''],
    ['a missing timezone', { cron: '0 0 * * *' }, ['body', 'timezone'], ''],
    ['an unknown member', { cron: '0 0 * * *', timezone: 'UTC', count: 5 }, ['body'], 'count'],
  ])('rejects %s with 422 VALIDATION_FAILED at the field', async (_name, body, path, message) => {
    const response = await preview(body);
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
    const messages = (response.body.error.details.problems as { message: string }[])
      .map((problem) => problem.message)
      .join('\n');
    expect(messages).toContain(message);
  });

  it('is open to viewers and read-only team keys: a preview reads no data', async () => {
    const viewer = await addMember(suite.server.prisma, suite.org.orgId, 'viewer');
    expect((await preview({ cron: '0 0 * * *', timezone: 'UTC' }, viewer.apiKey)).status).toBe(200);
    const teamKey = await createTeamKey(suite.server.prisma, suite.org, 'read');
    expect((await preview({ cron: '0 0 * * *', timezone: 'UTC' }, teamKey)).status).toBe(200);
  });

  it('answers 401 without a credential', async () => {
    const response = await suite.server.request('POST', pathFor(suite.org.orgId, await database()), {
      body: { cron: '0 0 * * *', timezone: 'UTC' },
    });
    expectError(response, 401, 'UNAUTHENTICATED');
  });

  it('answers 404 for a database of another org, an unknown one, or an org the caller is not in', async () => {
    const other = await createOrg(suite.server.prisma);
    const foreignDatabase = await createDatabase(suite.server, other);
    const body = { cron: '0 0 * * *', timezone: 'UTC' };
    const token = suite.org.adminKey;
    expectError(
      await suite.server.request('POST', pathFor(suite.org.orgId, foreignDatabase), { token, body }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('POST', pathFor(suite.org.orgId, '01ARZ3NDEKTSV4RRFFQ69G5FAV'), { token, body }),
      404,
      'RESOURCE_NOT_FOUND',
    );
    expectError(
      await suite.server.request('POST', pathFor(other.orgId, foreignDatabase), { token, body }),
      404,
      'RESOURCE_NOT_FOUND',
    );
  });

  it('answers 400 for a malformed database id and 405 for other methods', async () => {
    const malformed = await suite.server.request('POST', pathFor(suite.org.orgId, 'not-an-id'), {
      token: suite.org.adminKey,
      body: { cron: '0 0 * * *', timezone: 'UTC' },
    });
    expectError(malformed, 400, 'BAD_REQUEST');
    // A method the path does not declare is outside the document on purpose.
    const get = await suite.server.request('GET', pathFor(suite.org.orgId, await database()), {
      token: suite.org.adminKey,
      outsideContract: true,
    });
    expectError(get, 405, 'METHOD_NOT_ALLOWED');
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('is the GraphQL query backupSchedulePreview, with the same rules', async () => {
    const query = `query($orgId: ID!, $databaseId: ID!, $input: PreviewBackupScheduleInput!) {
      backupSchedulePreview(orgId: $orgId, databaseId: $databaseId, input: $input) { nextRuns } }`;
    const variables = { orgId: suite.org.orgId, databaseId: await database() };
    const ok = await suite.server.graphql(
      query,
      { ...variables, input: { cron: '0 0 1 1 *', timezone: 'UTC' } },
      { token: suite.org.adminKey },
    );
    expect(ok.body.data.backupSchedulePreview.nextRuns).toHaveLength(3);
    const bad = await suite.server.graphql(
      query,
      { ...variables, input: { cron: '0 0 * *', timezone: 'UTC' } },
      { token: suite.org.adminKey },
    );
    expect(bad.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
    expect(bad.body.errors[0].extensions.details.problems[0].path).toContain('cron');
  });
});

describe('the backup policy body, over REST and GraphQL', () => {
  const policyPath = (databaseId: string) => `/v1/orgs/${suite.org.orgId}/databases/${databaseId}/backup-policy`;
  const mutation = `mutation($orgId: ID!, $databaseId: ID!, $key: String!, $input: BackupPolicyInput!) {
    updateBackupPolicy(orgId: $orgId, databaseId: $databaseId, idempotencyKey: $key, input: $input) {
      policy { keepLast keepDays } } }`;

  it('PUT needs both members: 422 naming the one left out', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const response = await suite.server.request('PUT', policyPath(databaseId), {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { keepLast: 3 },
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['body', 'keepDays']]);
  });

  it('GraphQL cannot require a nullable field: a member left out there is null, as null is in the PUT', async () => {
    const databaseId = await createDatabase(suite.server, suite.org);
    const answer = await suite.server.graphql(
      mutation,
      { orgId: suite.org.orgId, databaseId, key: idempotencyKey(), input: { keepLast: 3 } },
      { token: suite.org.adminKey },
    );
    expect(answer.body).toEqual({ data: { updateBackupPolicy: { policy: { keepLast: 3, keepDays: null } } } });
    const shown = await suite.server.request('GET', `${policyPath(databaseId).replace(/policy$/, 'schedule')}`, {
      token: suite.org.adminKey,
    });
    expect(shown.body.policy).toEqual({ keepLast: 3, keepDays: null });
  });
});
