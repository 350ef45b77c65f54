import { Router, type Request, type Response } from 'express';
import type { z } from 'zod';
import type { Config } from '../kernel/config.ts';
import type { PrismaClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';
import { resolveCredential } from '../identity/credentials.ts';
import { verifyEmail, VerifyEmailBody } from '../identity/email-verification.ts';
import { requireCsrfProof } from '../identity/csrf.ts';
import { login, LoginBody, stepUp, StepUpBody } from '../identity/login.ts';
import { sessionCookie } from '../identity/session-tokens.ts';
import { problemsFromIssues } from '../kernel/validation.ts';
import { sendDomainError, sendError } from './error-response.ts';
import { jsonBody } from './middleware/json-body.ts';
import { credentialHeaders } from './middleware/caller.ts';
import { requireJson } from './rest/router.ts';

/**
 * `POST /v1/auth/login`, `POST /v1/auth/step-up` and `POST /v1/auth/verify-email`: plain handlers because they set
 * or need a session cookie, or have no caller to scope an Idempotency-Key to (docs/decisions/identity.md); spending a
 * verification token twice is harmless (the second answers 404 and changes nothing). The decisions live in
 * src/identity/login.ts; these only parse, call and answer.
 */
function parsed<T extends z.ZodType>(req: Request, res: Response, schema: T): z.output<T> | undefined {
  const result = schema.safeParse(req.body ?? {});
  if (result.success) return result.data;
  const problems = problemsFromIssues(result.error.issues).map((problem) => ({
    ...problem,
    path: ['body', ...problem.path],
  }));
  sendError(req, res, {
    code: 'VALIDATION_FAILED',
    message: 'The request body did not pass validation.',
    details: { problems },
  });
  return undefined;
}

async function answer(req: Request, res: Response, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof DomainError) sendDomainError(req, res, error);
    else throw error;
  }
}

export function sessionRoutes(prisma: PrismaClient, config: Config): Router {
  const router = Router({ strict: true });
  const json = [requireJson, ...jsonBody(16_384)];

  router.post('/v1/auth/login', ...json, (req, res) =>
    answer(req, res, async () => {
      const body = parsed(req, res, LoginBody);
      if (!body) return;
      const issued = await login(prisma, config, body, req.get('user-agent'));
      res.setHeader('Set-Cookie', sessionCookie(issued.token, issued.maxAgeSeconds));
      res.setHeader('Cache-Control', 'no-store');
      res.status(201).json(issued.body);
    }),
  );

  router.post('/v1/auth/step-up', ...json, (req, res) =>
    answer(req, res, async () => {
      const body = parsed(req, res, StepUpBody);
      if (!body) return;
      const caller = await resolveCredential(prisma, new Headers(credentialHeaders(req)), config.OAUTH_AUDIENCE);
      const session = caller?.credential.session;
      if (!caller?.userId || !session) throw new DomainError('UNAUTHENTICATED', 'Step-up needs a browser session.');
      requireCsrfProof(caller);
      res.json(await stepUp(prisma, config, { id: caller.credential.id, userId: caller.userId }, body));
    }),
  );

  router.post('/v1/auth/verify-email', ...json, (req, res) =>
    answer(req, res, async () => {
      const body = parsed(req, res, VerifyEmailBody);
      if (!body) return;
      res.json(await verifyEmail(prisma, body.token));
    }),
  );

  return router;
}
