import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs on stdout (stderr for the CLI, whose stdout is its result); children carry `requestId`. */
export function createLogger(level: string, destination: 1 | 2 = 1): Logger {
  return pino(
    {
      level,
      base: { service: 'workspace-data-service' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: ['req.headers.authorization', 'req.headers.cookie', 'headers.authorization'],
    },
    pino.destination({ fd: destination, sync: false }),
  );
}
