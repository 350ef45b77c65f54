import type { RequestHandler } from 'express';
import { sendError } from '../error-response.ts';

/**
 * 408 when a request body is not fully received within `timeoutMs` (a slow or stalled upload holds a
 * connection and a concurrency slot). Node's own requestTimeout would answer without our envelope.
 */
export function bodyReadDeadline(timeoutMs: number): RequestHandler {
  return (req, res, next) => {
    const expectsBody =
      req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (!expectsBody || req.readableEnded) {
      next();
      return;
    }
    const timer = setTimeout(() => {
      if (req.readableEnded || res.headersSent) return;
      res.setHeader('Connection', 'close');
      sendError(req, res, {
        code: 'REQUEST_TIMEOUT',
        message: `The request body was not received within ${timeoutMs} ms.`,
      });
      // The client may still be sending: stop reading and close once the response is out.
      res.on('finish', () => req.socket.destroy());
    }, timeoutMs);
    timer.unref();
    req.on('end', () => clearTimeout(timer));
    req.on('close', () => clearTimeout(timer));
    next();
  };
}
