import { parseArgs } from 'node:util';
import { z } from 'zod';
import { addUser, bootstrapOrg, ProvisionError } from './cli/provision.ts';
import { Id } from './graph/common.ts';
import { openRuntime } from './runtime.ts';

const USAGE = `Usage:
  npm run -s cli -- bootstrap --org-name NAME --email EMAIL --name NAME
  npm run -s cli -- add-user --org ORG_ID --email EMAIL --name NAME --role admin|member|viewer
Both print one line of JSON. DATABASE_URL selects the database (default: the embedded one under ./.data).`;

class UsageError extends Error {}

const Name = z.string().trim().min(1).max(120);
const Email = z.email().max(254).transform((email) => email.toLowerCase());

const BootstrapArgs = z.strictObject({ 'org-name': Name, email: Email, name: Name });
const AddUserArgs = z.strictObject({ org: Id, email: Email, name: Name, role: z.enum(['admin', 'member', 'viewer']) });

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
      },
    });
    if (positionals.length !== 1) throw new UsageError('Give exactly one command: bootstrap or add-user.');
    return { command: positionals[0]!, values };
  } catch (error) {
    throw error instanceof UsageError ? error : new UsageError((error as Error).message);
  }
}

async function run(argv: string[]): Promise<unknown> {
  const { command, values } = readCommand(argv);
  if (command !== 'bootstrap' && command !== 'add-user') throw new UsageError(`Unknown command "${command}".`);
  const args = command === 'bootstrap' ? parse(BootstrapArgs, values) : parse(AddUserArgs, values);
  // Logs go to stderr so that stdout carries exactly one line of JSON.
  const runtime = await openRuntime({ LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' }, 'stderr');
  try {
    if ('org-name' in args) return await bootstrapOrg(runtime.prisma, { orgName: args['org-name'], email: args.email, name: args.name });
    return await addUser(runtime.prisma, { orgId: args.org, email: args.email, name: args.name, role: args.role });
  } finally {
    await runtime.close();
  }
}

run(process.argv.slice(2)).then(
  (result) => {
    process.stdout.write(`${JSON.stringify(result)}\n`);
  },
  (error: unknown) => {
    if (error instanceof UsageError) process.stderr.write(`${error.message}\n\n${USAGE}\n`);
    else if (error instanceof ProvisionError) process.stderr.write(`${error.message}\n`);
    else process.stderr.write(`cli failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exitCode = error instanceof UsageError ? 2 : 1;
  },
);
