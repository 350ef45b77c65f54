import { describe, expect, it } from 'vitest';
import { PreferenceOptionsResponse, PreferencesResponse } from '../src/contracts/preferences.ts';
import { expectError, expectProblemPaths } from './helpers/expectations.ts';
import { addMember, createTeamKey, idempotencyKey } from './helpers/factories.ts';
import { useServerWithOrg } from './helpers/suite.ts';

const suite = useServerWithOrg();

const DEFAULTS = {
  timezone: 'UTC',
  locale: 'en-US',
  dateFormat: 'year-month-day',
  timeFormat: '24-hour',
  theme: 'system',
};

async function freshUserKey(): Promise<string> {
  return (await addMember(suite.server.prisma, suite.org.orgId, 'viewer')).apiKey;
}

describe('GET /v1/me/preferences (endpoint 15)', () => {
  it('returns the documented defaults for a user who never changed anything', async () => {
    const response = await suite.server.request('GET', '/v1/me/preferences', { token: await freshUserKey() });
    expect(response.status).toBe(200);
    expect(response.body).toEqual(DEFAULTS);
    expect(PreferencesResponse.safeParse(response.body).success).toBe(true);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  });

  it('is refused to a team key, which has no personal identity', async () => {
    const response = await suite.server.request('GET', '/v1/me/preferences', {
      token: await createTeamKey(suite.server.prisma, suite.org),
    });
    expectError(response, 403, 'PERSONAL_IDENTITY_REQUIRED');
  });

  it('rejects unknown query parameters', async () => {
    const response = await suite.server.request('GET', '/v1/me/preferences?foo=1', { token: suite.org.adminKey });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [['query']]);
  });
});

describe('PATCH /v1/me/preferences', () => {
  it('changes only the members it names and keeps them on later reads', async () => {
    const token = await freshUserKey();
    const patched = await suite.server.request('PATCH', '/v1/me/preferences', {
      token,
      idempotencyKey: idempotencyKey(),
      body: { timezone: 'Europe/Berlin', theme: 'dark' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...DEFAULTS, timezone: 'Europe/Berlin', theme: 'dark' });

    const second = await suite.server.request('PATCH', '/v1/me/preferences', {
      token,
      idempotencyKey: idempotencyKey(),
      body: { locale: 'de-DE', dateFormat: 'day-month-year', timeFormat: '12-hour-seconds' },
    });
    expect(second.body).toEqual({
      timezone: 'Europe/Berlin',
      locale: 'de-DE',
      dateFormat: 'day-month-year',
      timeFormat: '12-hour-seconds',
      theme: 'dark',
    });
    const read = await suite.server.request('GET', '/v1/me/preferences', { token });
    expect(read.body).toEqual(second.body);
  });

  it('keeps each user’s preferences apart', async () => {
    const [a, b] = [await freshUserKey(), await freshUserKey()];
    await suite.server.request('PATCH', '/v1/me/preferences', {
      token: a,
      idempotencyKey: idempotencyKey(),
      body: { theme: 'light' },
    });
    expect((await suite.server.request('GET', '/v1/me/preferences', { token: b })).body.theme).toBe('system');
  });

  it.each([
    ['unknown timezone', { timezone: 'Mars/Olympus_Mons' }, ['body', 'timezone']],
    ['timezone too long', { timezone: 'A'.repeat(101) }, ['body', 'timezone']],
    ['empty timezone', { timezone: '' }, ['body', 'timezone']],
    ['unknown locale', { locale: 'xx-XX' }, ['body', 'locale']],
    ['locale too short', { locale: 'e' }, ['body', 'locale']],
    ['locale too long', { locale: 'e'.repeat(65) }, ['body', 'locale']],
    ['bad dateFormat', { dateFormat: 'dd/mm/yyyy' }, ['body', 'dateFormat']],
    ['bad timeFormat', { timeFormat: '25-hour' }, ['body', 'timeFormat']],
    ['bad theme', { theme: 'neon' }, ['body', 'theme']],
    ['null value', { theme: null }, ['body', 'theme']],
    ['wrong type', { timezone: 42 }, ['body', 'timezone']],
  ])('rejects %s with 422 naming the field, and changes nothing', async (_name, body, path) => {
    const token = await freshUserKey();
    const response = await suite.server.request('PATCH', '/v1/me/preferences', {
      token,
      idempotencyKey: idempotencyKey(),
      body,
    });
    expectError(response, 422, 'VALIDATION_FAILED');
    expectProblemPaths(response, [path]);
    expect((await suite.server.request('GET', '/v1/me/preferences', { token })).body).toEqual(DEFAULTS);
  });

  it('rejects members the spec does not define', async () => {
    const response = await suite.server.request('PATCH', '/v1/me/preferences', {
      token: suite.org.adminKey,
      idempotencyKey: idempotencyKey(),
      body: { theme: 'dark', fontSize: 12 },
    });
    expectError(response, 422, 'VALIDATION_FAILED');
  });

  it('accepts every timezone and locale that the options list offers', async () => {
    const token = await freshUserKey();
    const options = (await suite.server.request('GET', '/v1/preferences/options', { token })).body;
    for (const timezone of [options.timezones[0], options.timezones.at(-1), 'UTC']) {
      const response = await suite.server.request('PATCH', '/v1/me/preferences', {
        token,
        idempotencyKey: idempotencyKey(),
        body: { timezone },
      });
      expect(response.status, timezone).toBe(200);
    }
    for (const locale of options.locales) {
      const response = await suite.server.request('PATCH', '/v1/me/preferences', {
        token,
        idempotencyKey: idempotencyKey(),
        body: { locale },
      });
      expect(response.status, locale).toBe(200);
    }
  });

  it('accepts current IANA names the runtime knows as aliases (Asia/Kolkata, Europe/Kyiv), as the backup preview does', async () => {
    const token = await freshUserKey();
    for (const timezone of ['Asia/Kolkata', 'Europe/Kyiv']) {
      const response = await suite.server.request('PATCH', '/v1/me/preferences', {
        token,
        idempotencyKey: idempotencyKey(),
        body: { timezone },
      });
      expect({ status: response.status, timezone: response.body.timezone }, response.text).toEqual({
        status: 200,
        timezone,
      });
    }
  });
});

describe('GET /v1/preferences/options (endpoint 16)', () => {
  it('lists IANA timezones, offered locales and the enums of spec 2.14', async () => {
    const response = await suite.server.request('GET', '/v1/preferences/options', { token: suite.org.adminKey });
    expect(response.status).toBe(200);
    expect(PreferenceOptionsResponse.safeParse(response.body).success).toBe(true);
    expect(response.body.timezones).toEqual(
      expect.arrayContaining(['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo']),
    );
    expect(response.body.locales).toEqual(expect.arrayContaining(['en-US', 'de-DE']));
    expect(response.body.dateFormats).toEqual([
      'day-short-month-year',
      'short-month-day-year',
      'year-month-day',
      'day-month-year',
      'month-day-year',
    ]);
    expect(response.body.timeFormats).toEqual(['24-hour', '12-hour', '24-hour-seconds', '12-hour-seconds']);
    expect(response.body.themes).toEqual(['system', 'light', 'dark']);
  });

  it('is available to team keys too (it is not personal)', async () => {
    const response = await suite.server.request('GET', '/v1/preferences/options', {
      token: await createTeamKey(suite.server.prisma, suite.org),
    });
    expect(response.status).toBe(200);
  });
});

describe('GraphQL', () => {
  it('serves the same preferences, rules and error codes', async () => {
    const token = await freshUserKey();
    const mutation = `mutation($key: String!, $input: UpdatePreferencesInput!) {
      updateMyPreferences(idempotencyKey: $key, input: $input) { timezone theme } }`;
    const ok = await suite.server.graphql(mutation, { key: idempotencyKey(), input: { theme: 'light' } }, { token });
    expect(ok.body).toEqual({ data: { updateMyPreferences: { timezone: 'UTC', theme: 'light' } } });

    const bad = await suite.server.graphql(
      mutation,
      { key: idempotencyKey(), input: { timezone: 'Nowhere/Atlantis' } },
      { token },
    );
    expect(bad.body.errors[0].extensions.code).toBe('VALIDATION_FAILED');
    expect(bad.body.errors[0].extensions.details.problems[0].path).toContain('timezone');

    const read = await suite.server.graphql('{ myPreferences { theme } }', {}, { token });
    expect(read.body).toEqual({ data: { myPreferences: { theme: 'light' } } });
  });
});
