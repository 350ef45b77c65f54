import type { RequestHandler } from 'express';
import { newId } from '../../kernel/ids.ts';
import type { Logger } from '../../kernel/log.ts';
import { limitKeysOfResponse } from './caller.ts';

// A caller may supply its own id for tracing across systems; anything else is replaced.
const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{8,128}$/;

/** Gives every request an id (X-Request-Id on every response), a child logger, and one access-log line. */
export function requestContext(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const incoming = req.get('X-Request-Id');
    const requestId = incoming && CLIENT_REQUEST_ID.test(incoming) ? incoming : newId();
    const log = logger.child({ requestId });
    res.locals.requestId = requestId;
    res.locals.log = log;
    res.setHeader('X-Request-Id', requestId);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // Who asked, and in which org (the one it acts in, when it holds authority there): set once the credential resolved.
      const keys = limitKeysOfResponse(res) as ReturnType<typeof limitKeysOfResponse> | undefined;
      const who = keys && !keys.credential.startsWith('ip:') ? { credential: keys.credential } : {};
      const where = keys?.org ? { orgId: keys.org.slice('org:'.length) } : {};
      log.info(
        { method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10, ...who, ...where },
        'request',
      );
    });
    next();
  };
}
