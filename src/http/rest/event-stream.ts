import type { Response } from 'express';
import { stringifyAnswer } from '../../kernel/raw-json.ts';
import type { ErrorBody } from '../error-response.ts';
import type { OperationResult } from './execute.ts';

/**
 * Writes a subscription as server-sent events (WHATWG HTML §9.2): one `data:` frame per event, the root field's
 * value as JSON (the default `message` event, so `EventSource.onmessage` sees it; PostgreSQL-built JSON in it written as
 * it is, which never holds a line break: jsonb prints one inside a string as `\n`); an error met after the stream
 * began is one `event: error` frame with the §7 envelope, then the stream ends. A comment line every
 * `heartbeatMs` keeps proxies that cut idle connections (commonly after 30-60 s) from closing a quiet stream.
 */
export async function sendEventStream<Data>(
  res: Response,
  events: AsyncGenerator<OperationResult<Data>, void, undefined>,
  close: () => Promise<void>,
  heartbeatMs: number,
  /** The member of each event that names it (`id:`); a RawJson event carries it as a property of its own. */
  eventId?: string,
): Promise<void> {
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    // nginx buffers proxied answers unless told not to; a buffered stream would arrive all at once at the end.
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  (res.locals.releaseInFlight as (() => void) | undefined)?.();
  const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), heartbeatMs);
  res.on('close', () => {
    clearInterval(heartbeat);
    void close();
  });
  try {
    for await (const event of events) {
      if (!event.ok) {
        writeError(res, event.error);
        break;
      }
      const [payload] = Object.values(event.data as Record<string, unknown>);
      const id = eventId === undefined ? undefined : (payload as Record<string, unknown>)[eventId];
      // The events of one read arrive together: one socket write for them all, at the end of this tick, instead of
      // one per event (each write a syscall and a wake-up of the reader's process).
      if (res.writableCorked === 0) {
        res.cork();
        process.nextTick(() => res.uncork());
      }
      res.write(`${typeof id === 'string' ? `id: ${id}\n` : ''}data: ${stringifyAnswer(payload)}\n\n`);
    }
  } catch {
    writeError(res, { code: 'INTERNAL_ERROR', message: 'Internal error.' });
  } finally {
    clearInterval(heartbeat);
    res.end();
  }
}

function writeError(res: Response, error: ErrorBody): void {
  const requestId = String(res.locals.requestId ?? '');
  const details = error.details === undefined ? {} : { details: error.details };
  res.write(
    `event: error\ndata: ${JSON.stringify({ error: { code: error.code, message: error.message, requestId, ...details } })}\n\n`,
  );
}
