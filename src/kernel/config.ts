import { z } from 'zod';

const nonNegativeInt = z.coerce.number().int().min(0);

/** Every setting the service reads from the environment, with its default. `0` disables a limit. */
const ConfigSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z.string().url().optional(),
  /** Where the embedded PostgreSQL keeps its cluster when DATABASE_URL is unset. */
  DATA_DIR: z.string().min(1).default('.data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(10),
  /** Sustained requests per second per credential (token bucket refill rate). */
  RATE_LIMIT_RPS: nonNegativeInt.default(50),
  /** Extra requests a credential may burst above the sustained rate. */
  RATE_LIMIT_BURST: nonNegativeInt.default(100),
  /** Requests one credential may have in flight at once; always held below DATABASE_POOL_SIZE (src/http/middleware/in-flight.ts). */
  CONCURRENCY_LIMIT: nonNegativeInt.default(4),
  /** Requests one organisation's credentials may have in flight together; also held below the pool. */
  ORG_CONCURRENCY_LIMIT: nonNegativeInt.default(6),
  /** Requests per credential (and per org) that may wait for an in-flight slot; beyond it, 429 at once. */
  CONCURRENCY_QUEUE: nonNegativeInt.default(16),
  /** How long a queued request waits for an in-flight slot before it gets 429. */
  CONCURRENCY_QUEUE_WAIT_MS: nonNegativeInt.default(2_000),
  /** Shares rate and in-flight limits between all processes of the service; unset → counted per process. */
  REDIS_URL: z.string().url().optional(),
  /** statement_timeout of every statement a request runs (QUERY_TIMEOUT, 503, beyond it); `0` disables. */
  QUERY_TIMEOUT_MS: nonNegativeInt.default(5_000),
  /** statement_timeout of the statements a job's steps run: jobs backfill and build indexes, so longer; `0` disables. */
  JOB_QUERY_TIMEOUT_MS: nonNegativeInt.default(600_000),
  /** JSON bodies larger than this get 413 (routes may declare a larger limit, e.g. imports). */
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(1_048_576),
  /** Largest answer of one GraphQL operation (/graphql and REST alike), as JSON bytes; 413 PAYLOAD_TOO_LARGE beyond. */
  RESPONSE_LIMIT_BYTES: z.coerce.number().int().min(1024).default(67_108_864),
  /** A body not fully received within this many milliseconds gets 408. */
  BODY_READ_TIMEOUT_MS: z.coerce.number().int().min(1).default(10_000),
  /** How long idempotency records are kept (DESIGN §4 requires at least 24 hours). */
  IDEMPOTENCY_TTL_HOURS: z.coerce.number().int().min(24).default(24),
  /** Rows one table may hold (ROW_LIMIT_REACHED beyond it). */
  TABLE_ROW_LIMIT: z.coerce.number().int().min(1).default(1_000_000),
  /** Largest row, measured as the UTF-8 JSON of its values (ROW_SIZE_LIMIT beyond it). */
  ROW_SIZE_LIMIT_BYTES: z.coerce.number().int().min(1024).default(524_288),
  /** How long SIGTERM waits for in-flight requests before closing connections. */
  SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
  /** An event stream with nothing to send writes a comment this often, so that proxies do not cut it as idle. */
  EVENT_STREAM_HEARTBEAT_MS: z.coerce.number().int().min(100).default(15_000),
  /** Event streams (job events, change feeds) one credential may hold open at once in one process (429 beyond). */
  EVENT_STREAMS_PER_CREDENTIAL: z.coerce.number().int().min(1).default(16),
  /** Event streams all credentials of one org may hold open at once in one process (429 beyond). */
  EVENT_STREAMS_PER_ORG: z.coerce.number().int().min(1).default(100),
  /** How often an open stream's credential and membership are checked again; revoked or removed ends the stream. */
  EVENT_STREAM_RECHECK_MS: z.coerce.number().int().min(100).default(5_000),
  /**
   * Client connections the HTTP server holds at once (beyond them new sockets are closed at once). 0 derives it from
   * the process's descriptor limit, less those the pools and files need (docs/decisions/faults.md).
   */
  MAX_CONNECTIONS: nonNegativeInt.default(0),
  /**
   * Of those, the connections one client address may hold (beyond them its new sockets are closed at once). 0 derives
   * it: a quarter of the connection cap, at least 16. Behind a reverse proxy every client is the proxy's address: set
   * it to MAX_CONNECTIONS there (docs/decisions/faults.md).
   */
  MAX_CONNECTIONS_PER_ADDRESS: nonNegativeInt.default(0),
  /** A client that has not sent its request headers within this long is disconnected (slowloris). */
  HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(20_000),
  /** A request not fully received within this long is answered 408 and closed (Node's requestTimeout). */
  REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(120_000),
  /** An idle keep-alive connection is closed after this long. */
  KEEP_ALIVE_TIMEOUT_MS: z.coerce.number().int().min(100).default(65_000),
  /** Jobs one worker process runs at once. */
  JOB_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  /**
   * Of one worker process's JOB_CONCURRENCY slots, how many one organisation's jobs may hold at once, so that its long
   * or hung jobs leave a slot to the others. 0 (the default): JOB_CONCURRENCY − 1, at least 1.
   */
  JOB_SLOTS_PER_ORG: z.coerce.number().int().min(0).max(64).default(0),
  /** A job whose worker sent no heartbeat for this long is taken over by another worker. */
  JOB_LEASE_SECONDS: z.coerce.number().min(1).max(3600).default(30),
  /** Idle workers look for due jobs this often (they also wake at once on NOTIFY). */
  JOB_POLL_MS: z.coerce.number().int().min(10).default(1_000),
  /** Jobs one organisation may have queued (not yet running); one more is refused with 429 CAPACITY_LIMIT. */
  JOB_QUEUE_LIMIT_PER_ORG: z.coerce.number().int().min(1).default(50),
  /** How long a trashed database or table stays restorable before its purge job runs (fractions allowed). */
  TRASH_RETENTION_DAYS: z.coerce.number().min(0).max(3650).default(7),
  /** How long the change feed of each database keeps a change (fractions allowed); older cursors get 410. */
  CHANGE_RETENTION_DAYS: z.coerce.number().min(0.00001).max(3650).default(7),
  /** How long job artifacts (import error reports) can be downloaded (ARTIFACT_EXPIRED after). */
  ARTIFACT_TTL_HOURS: z.coerce.number().min(0.001).default(72),
  /** A browser session older than this since its last password (and TOTP) check must step up for sensitive operations. */
  STEP_UP_WINDOW_SECONDS: z.coerce.number().int().min(1).default(900),
  /** Absolute lifetime of a browser session. */
  SESSION_TTL_HOURS: z.coerce.number().int().min(1).default(12),
  /** Consecutive failed logins after which an account is locked for a while. */
  LOGIN_LOCKOUT_THRESHOLD: z.coerce.number().int().min(1).default(5),
  /** The first lock lasts this long and doubles with every further failure, up to LOGIN_LOCKOUT_MAX_SECONDS. */
  LOGIN_LOCKOUT_BASE_SECONDS: z.coerce.number().int().min(1).default(30),
  LOGIN_LOCKOUT_MAX_SECONDS: z.coerce.number().int().min(1).default(900),
  /** The audience OAuth access tokens are issued for; a token minted for another one is refused (401). */
  OAUTH_AUDIENCE: z.string().min(1).max(255).default('workspace-data-service'),
  OAUTH_ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(30).default(600),
  OAUTH_REFRESH_TOKEN_TTL_DAYS: z.coerce.number().int().min(1).default(30),
  OAUTH_CODE_TTL_SECONDS: z.coerce.number().int().min(10).default(60),
  /** How long an invitation's token can be accepted. */
  INVITATION_TTL_HOURS: z.coerce.number().int().min(1).default(168),
  /** Where one-time tokens (invitations, mailbox verification) are POSTed as JSON instead of being answered; unset: no hook. */
  DELIVERY_WEBHOOK_URL: z
    .string()
    .url()
    .refine((value) => /^https?:\/\//i.test(value), 'must be an http(s) URL')
    .optional(),
  /** A delivery that has not answered 2xx within this many milliseconds fails the request (502). */
  DELIVERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(30_000).default(5_000),
  /** How long a mailbox verification token can be spent. */
  EMAIL_VERIFICATION_TTL_HOURS: z.coerce.number().int().min(1).default(24),
  /** Origins allowed to call /v1 and /graphql from a browser (CORS), comma-separated; empty: no CORS at all. */
  /** The service's public base URL (`https://api.example.com`): the OAuth issuer; unset, read from each request's Host. */
  PUBLIC_URL: z
    .url({ protocol: /^https?$/ })
    .transform((url) => url.replace(/\/+$/, ''))
    .optional(),
  /** Serves GET /metrics (Prometheus) to `Authorization: Bearer <METRICS_TOKEN>`; unset: /metrics is 404. */
  METRICS_TOKEN: z.string().min(16).max(256).optional(),
  CORS_ORIGINS: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(',')
        .map((origin) => origin.trim())
        .filter(Boolean),
    ),
  /** Run the job worker inside the HTTP process (`npm start`); `npm run worker` runs it alone. */
  /** Where backups are written when no S3 bucket is configured (default `DATA_DIR/backups`). */
  BACKUP_DIR: z.string().min(1).optional(),
  /** An S3-compatible bucket for backups instead of BACKUP_DIR; credentials come from the AWS SDK's environment. */
  BACKUP_S3_BUCKET: z.string().min(1).optional(),
  BACKUP_S3_PREFIX: z.string().default(''),
  BACKUP_S3_ENDPOINT: z.string().url().optional(),
  BACKUP_S3_REGION: z.string().min(1).default('us-east-1'),
  /** Each S3 request (connect, send, answer) ends with an error after this long; the SDK retries it twice. */
  BACKUP_S3_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  /** Backups without a keepDays policy expire after this many days. */
  BACKUP_TTL_DAYS: z.coerce.number().min(0.0001).default(30),
  /** A database whose last success is older than its interval plus this grace is `backup.overdue`. */
  BACKUP_OVERDUE_GRACE_MINUTES: z.coerce.number().min(0).default(60),
  /** A backup schedule may not run two backups closer together than this (422 on save). */
  BACKUP_MIN_INTERVAL_MINUTES: z.coerce.number().int().min(1).default(60),
  /** Backups kept per database whatever its policy: the oldest beyond either bound are pruned (the newest always stays). */
  BACKUP_RETAIN_MAX_COUNT: z.coerce.number().int().min(1).default(100),
  BACKUP_RETAIN_MAX_BYTES: z.coerce.number().int().min(1).default(53_687_091_200),
  /** How often each worker looks for due backup schedules. */
  BACKUP_SCHEDULER_INTERVAL_MS: z.coerce.number().int().min(10).default(15_000),
  /** Tests only: a file holding an ISO timestamp the scheduler uses as "now" instead of the clock. */
  BACKUP_SCHEDULER_CLOCK_FILE: z.string().min(1).optional(),
  /** Networks (CIDRs, comma-separated) webhooks may reach although they are private, loopback or link-local. */
  WEBHOOK_ALLOWED_NETWORKS: z.string().default(''),
  /**
   * Ports webhooks may use besides 443 (and 80 with WEBHOOK_ALLOW_HTTP), comma-separated; any port is allowed to an
   * address inside WEBHOOK_ALLOWED_NETWORKS.
   */
  WEBHOOK_ALLOWED_PORTS: z.string().default(''),
  /** Allows `http:` webhook URLs (development, tests); otherwise only `https:`. */
  WEBHOOK_ALLOW_HTTP: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true'),
  /** Delays before each retry of a failed webhook message; after the last one fails, the endpoint is disabled. */
  WEBHOOK_RETRY_SCHEDULE: z.string().default('5s,30s,2m,10m,30m,2h,5h,10h'),
  /** A webhook attempt with no complete answer within this many milliseconds fails (and is retried). */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  /** Webhook messages one worker process has in flight at once (to different endpoints). */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(16),
  /**
   * `POST …/webhooks/{id}/test` and `…/replay` requests per org per minute, together (0: no limit): each queues a
   * message or sends the retained feed again.
   */
  WEBHOOK_ACTIONS_PER_MINUTE: z.coerce.number().int().min(0).default(10),
  /** 32 bytes, base64: the key that seals webhook signing secrets at rest; unset → a key kept in the database. */
  WEBHOOK_SECRET_KEY: z.string().optional(),
  RUN_WORKER: z
    .enum(['true', 'false'])
    .default('true')
    .transform((value) => value === 'true'),
});

export type Config = z.infer<typeof ConfigSchema>;

export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  overrides: Partial<Record<keyof Config, string>> = {},
): Config {
  const source = Object.fromEntries(
    Object.entries({ ...env, ...overrides }).filter(([, value]) => value !== undefined && value !== ''),
  );
  const parsed = ConfigSchema.safeParse(source);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`Invalid configuration: ${problems.join('; ')}`);
  }
  return parsed.data;
}
