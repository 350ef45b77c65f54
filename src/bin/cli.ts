import { text } from 'node:stream/consumers';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { Password } from '../identity/passwords.ts';
import { Email, Id } from '../kernel/formats.ts';
import type { Runtime } from './runtime.ts';

const USAGE = `Usage:
  npm run -s cli -- bootstrap --org-name NAME --email EMAIL --name NAME
  npm run -s cli -- add-user --org ORG_ID --email EMAIL --name NAME --role admin|member|viewer [--accept-unverified]
  npm run -s cli -- set-password --email EMAIL   (reads the password from stdin, never from the command line)
  npm run -s cli -- issue-email-verification --email EMAIL   (prints a token for an operator to deliver by hand)
  npm run -s cli -- register-oauth-client --name NAME --redirect-uri URI [--redirect-uri URI…] [--confidential]
Each prints one line of JSON. DATABASE_URL selects the database (default: the embedded one under ./.data).`;

class UsageError extends Error {}

const Name = z.string().trim().min(1).max(120);

const BootstrapArgs = z.strictObject({ 'org-name': Name, email: Email, name: Name });
const AddUserArgs = z.strictObject({
  org: Id,
  email: Email,
  name: Name,
  role: z.enum(['admin', 'member', 'viewer']),
  'accept-unverified': z.boolean().default(false),
});
const SetPasswordArgs = z.strictObject({ email: Email });
const IssueEmailVerificationArgs = z.strictObject({ email: Email });
const RegisterClientArgs = z.strictObject({
  name: Name,
  'redirect-uri': z.array(z.string()).min(1),
  confidential: z.boolean().default(false),
});
const COMMANDS = ['bootstrap', 'add-user', 'set-password', 'issue-email-verification', 'register-oauth-client'];

function parse<T extends z.ZodType>(schema: T, values: unknown): z.output<T> {
  const result = schema.safeParse(values);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `--${issue.path.join('.') || '?'}: ${issue.message}`);
  throw new UsageError(problems.join('\n'));
}

function readCommand(argv: string[]): { command: string; values: Record<string, unknown> } {
  try {
    const { positionals, values } = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        'org-name': { type: 'string' },
        email: { type: 'string' },
        name: { type: 'string' },
        org: { type: 'string' },
        role: { type: 'string' },
        'redirect-uri': { type: 'string', multiple: true },
        confidential: { type: 'boolean' },
        'accept-unverified': { type: 'boolean' },
      },
    });
    if (positionals.length !== 1) throw new UsageError(`Give exactly one command: ${COMMANDS.join(', ')}.`);
    return { command: positionals[0]!, values };
  } catch (error) {
    throw error instanceof UsageError ? error : new UsageError((error as Error).message);
  }
}

/** The password from stdin (its first line), so that it stays out of shell history and `ps`. */
async function passwordFromStdin(): Promise<string> {
  const [line = ''] = (await text(process.stdin)).split(/\r?\n/);
  const parsed = Password.safeParse(line);
  if (!parsed.success) throw new UsageError('stdin: the password must be 10 to 256 characters.');
  return parsed.data;
}

// The commands' modules (Prisma, pg, the logger: ~0.9 s of CPU to load) load only once the arguments are good, so
// that `--help` and a mistyped flag answer at once.
const provision = () => import('../identity/provision.ts');
const clients = () => import('../identity/oauth/clients.ts');

/** Checks the arguments (and reads stdin) before anything connects to the database. */
async function commandOf(
  command: string,
  values: Record<string, unknown>,
): Promise<(runtime: Runtime) => Promise<unknown>> {
  if (command === 'bootstrap') {
    const args = parse(BootstrapArgs, values);
    return async (runtime) =>
      (await provision()).bootstrapOrg(runtime.prisma, {
        orgName: args['org-name'],
        email: args.email,
        name: args.name,
      });
  }
  if (command === 'add-user') {
    const args = parse(AddUserArgs, values);
    return async (runtime) =>
      (await provision()).addUser(runtime.prisma, {
        orgId: args.org,
        email: args.email,
        name: args.name,
        role: args.role,
        acceptUnverified: args['accept-unverified'],
      });
  }
  if (command === 'set-password') {
    const args = parse(SetPasswordArgs, values);
    const password = await passwordFromStdin();
    return async (runtime) => (await provision()).setPassword(runtime.prisma, { email: args.email, password });
  }
  if (command === 'issue-email-verification') {
    const args = parse(IssueEmailVerificationArgs, values);
    return async (runtime) =>
      (await provision()).issueVerificationToken(runtime.prisma, {
        email: args.email,
        ttlHours: runtime.config.EMAIL_VERIFICATION_TTL_HOURS,
      });
  }
  if (command === 'register-oauth-client') {
    const args = parse(RegisterClientArgs, values);
    return async (runtime) =>
      (await clients()).registerClient(runtime.prisma, {
        name: args.name,
        redirectUris: args['redirect-uri'],
        confidential: args.confidential,
      });
  }
  throw new UsageError(`Unknown command "${command}".`);
}

async function run(argv: string[]): Promise<unknown> {
  const { command, values } = readCommand(argv);
  const execute = await commandOf(command, values);
  // Logs go to stderr so that stdout carries exactly one line of JSON.
  const { openRuntime } = await import('./runtime.ts');
  const runtime = await openRuntime({ LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' }, 'stderr');
  try {
    return await execute(runtime);
  } finally {
    await runtime.close();
  }
}

const argv = process.argv.slice(2);
// `--help`, `-h` or `help` anywhere: the usage on stdout, exit 0, nothing connected.
if (argv.some((arg) => ['--help', '-h', 'help'].includes(arg))) process.stdout.write(`${USAGE}\n`);
else
  run(argv).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    },
    async (error: unknown) => {
      process.exitCode = error instanceof UsageError ? 2 : 1;
      if (error instanceof UsageError) return process.stderr.write(`${error.message}\n\n${USAGE}\n`);
      const [{ ProvisionError }, { ClientRegistrationError }] = await Promise.all([provision(), clients()]);
      if (error instanceof ProvisionError || error instanceof ClientRegistrationError)
        process.stderr.write(`${error.message}\n`);
      else process.stderr.write(`cli failed: ${error instanceof Error ? error.message : String(error)}\n`);
    },
  );
