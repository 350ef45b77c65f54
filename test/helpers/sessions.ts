import { expect } from 'vitest';
import { setPassword } from '../../src/identity/provision.ts';
import type { TestServer } from './server.ts';

export interface TestSession {
  id: string;
  /** The `Cookie` header value a browser would send. */
  cookie: string;
  csrfToken: string;
  setCookie: string;
}

/** Gives the user a password (as `cli set-password` does) and signs in over HTTP. */
export async function signIn(
  server: TestServer,
  email: string,
  password = 'a long test password',
  totp?: string,
): Promise<TestSession> {
  const response = await server.request('POST', '/v1/auth/login', {
    body: { email, password, ...(totp ? { totp } : {}) },
  });
  expect(response.status, response.text).toBe(201);
  const setCookie = response.headers.get('set-cookie')!;
  return {
    id: response.body.session.id,
    cookie: setCookie.split(';')[0]!,
    csrfToken: response.body.csrfToken,
    setCookie,
  };
}

export async function withPassword(
  server: TestServer,
  userId: string,
  password = 'a long test password',
): Promise<string> {
  const { email } = await server.prisma.user.findUniqueOrThrow({ where: { id: userId }, select: { email: true } });
  await setPassword(server.prisma, { email, password });
  return email;
}

/** Headers of a cookie-authenticated request; `csrf: false` leaves the CSRF token out. */
export function browser(session: TestSession, csrf: boolean | string = true): Record<string, string> {
  const headers: Record<string, string> = { cookie: session.cookie };
  if (csrf !== false) headers['x-csrf-token'] = csrf === true ? session.csrfToken : csrf;
  return headers;
}
