import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { httpStatusOf, type ErrorCode } from '../kernel/errors.ts';
import { newId } from '../kernel/ids.ts';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/** What Node's HTTP parser refused, as an envelope code and message (its own answer is a bare status line). */
function answerFor(error: NodeJS.ErrnoException): { code: ErrorCode; message: string } {
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return {
      code: 'HEADERS_TOO_LARGE',
      message: 'The request line and headers exceed 16 KiB; send large filters in a body (POST …/rows/query).',
    };
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return { code: 'REQUEST_TIMEOUT', message: 'The request was not received in time.' };
  return { code: 'BAD_REQUEST', message: 'The request is not valid HTTP/1.1.' };
}

/**
 * Requests Node's HTTP parser refuses never reach Express: a URL over ~16 KiB (the request line counts against
 * `maxHeaderSize`) would get a bodiless `431`. This answers them with the spec §7 envelope and an X-Request-Id,
 * then closes the connection (the parser cannot resynchronise on it).
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const { code, message } = answerFor(error);
    const status = httpStatusOf(code);
    const requestId = newId();
    const body = JSON.stringify({ error: { code, message, requestId } });
    socket.end(
      `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
