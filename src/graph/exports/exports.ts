import type { TransactionClient } from '../../db/prisma.ts';
import { resolveField } from '../../data/filter.ts';
import { filterBudgetProblems } from '../../data/filter-budget.ts';
import type { FieldDefinition } from '../../data/field-types.ts';
import { notFound, validationFailed, type FieldProblem } from '../../kernel/errors.ts';
import type { ExportDatabasePayload } from '../../jobs/kinds/exports/exportDatabase.ts';
import { readsOf, type ExportRowsPayload } from '../../jobs/kinds/exports/exportRows.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import { heavyRead } from '../server/query-limits.ts';
import { Id } from '../../kernel/formats.ts';
import { BIDI_CONTROLS_GLOBAL } from '../../kernel/input-hygiene.ts';
import type { Context } from '../server/context.ts';
import { idempotent } from '../../idempotency/run.ts';
import { enqueueJob, JobHandle, type JobHandleShape } from '../jobs/enqueue.ts';
import { startScopes } from '../jobs/start-authority.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import type { TableAddress, TableSchema } from '../../catalog/table-schema.ts';
import { checkRowQuery, throughView } from '../rows/row-pages.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';
import { viewLens, type ViewLens } from '../views/views.ts';
import { ExportDatabaseBody, ExportRowsBody } from '../../contracts/exports.ts';

/**
 * Exports (issue 15): a table's rows, or a saved view's, to CSV, JSONL or XLSX, and a whole database to a ZIP
 * archive. The request is checked and resolved here (fields, filter, the view's definition as of now) and the job
 * (src/jobs/kinds/export-*.ts) reads one snapshot and produces the downloadable artifact.
 */
const OrderInput = builder.inputType('ExportOrderInput', {
  fields: (t) => ({ field: t.string({ required: true }), direction: t.string({ required: true }) }),
});

const ExportRowsInput = builder
  .inputType('ExportRowsInput', {
    fields: (t) => ({
      format: t.string({ required: true, description: '`csv`, `jsonl` or `xlsx`.' }),
      viewId: t.id(),
      where: t.field({ type: 'JSON' }),
      orderBy: t.field({ type: [OrderInput] }),
      fieldIds: t.stringList(),
      fieldNames: t.boolean(),
      fileName: t.string(),
      escapeFormulas: t.boolean(),
    }),
  })
  .validate(ExportRowsBody);

const ExportDatabaseInput = builder
  .inputType('ExportDatabaseInput', {
    fields: (t) => ({
      format: t.string({
        required: true,
        description: '`csv` or `jsonl` (one file per table inside the ZIP archive).',
      }),
      fileName: t.string(),
      escapeFormulas: t.boolean(),
    }),
  })
  .validate(ExportDatabaseBody);

/** A user's name made into a safe default file name (the same rule as `ExportFileName` in src/contracts/exports.ts). */
function defaultFileName(name: string, extension: string): string {
  const safe =
    name
      .replace(/[\u0000-\u001f\u007f/\\]/g, '_')
      .replace(BIDI_CONTROLS_GLOBAL, '')
      .trim()
      .slice(0, 120) || 'export';
  return `${safe}.${extension}`;
}

/** The requested fields, else the view's visible columns in its order, else every field. */
function columnsOf(schema: TableSchema, body: ExportRowsBody, lens: ViewLens | null): FieldDefinition[] {
  if (body.fieldIds) {
    const problems: FieldProblem[] = [];
    const seen = new Set<string>();
    const fields = body.fieldIds.map((reference, index) => {
      const field = resolveField(schema.fields, reference);
      if (!field) problems.push({ path: ['fieldIds', index], message: 'is not a field of this table' });
      else if (seen.has(field.id))
        problems.push({ path: ['fieldIds', index], message: 'names a field twice', fieldId: field.id });
      if (field) seen.add(field.id);
      return field!;
    });
    if (problems.length) throw validationFailed(problems, 'The fields do not fit the table.');
    return fields;
  }
  if (!lens) return schema.fields;
  const ordered = lens.columnOrder
    .map((id) => schema.fieldsById.get(id))
    .filter((field): field is FieldDefinition => field !== undefined);
  const rest = schema.fields.filter((field) => !lens.columnOrder.includes(field.id));
  return [...ordered, ...rest].filter((field) => !lens.hidden.has(field.id));
}

async function planExport(context: Context, address: TableAddress, body: ExportRowsBody): Promise<ExportRowsPayload> {
  const schema = await currentSchema(context, address);
  const lens = body.viewId ? await viewLens(context, schema, body.viewId) : null;
  const asked = checkRowQuery(schema, body.where, body.orderBy);
  const query = lens ? throughView(lens, asked) : asked;
  const overBudget = query.where ? filterBudgetProblems(query.where, schema.fields) : [];
  if (overBudget.length)
    throw validationFailed(
      overBudget.map((problem) => ({ ...problem, path: ['where', ...problem.path] })),
      'The filter is over its cost budget; simplify it.',
    );
  const table = await context.prisma.dataTable.findUnique({ where: { id: address.tableId }, select: { name: true } });
  if (!table) throw notFound('table');
  const payload = {
    ...address,
    schemaVersion: schema.schemaVersion,
    format: body.format,
    fileName: body.fileName ?? defaultFileName(table.name, body.format),
    fieldIds: columnsOf(schema, body, lens).map((field) => field.id),
    where: query.where ?? null,
    orderBy: query.orderBy.map((item) => ({
      fieldId: resolveField(schema.fields, item.field)!.id,
      direction: item.direction,
    })),
    fieldNames: body.fieldNames ?? false,
    viewId: body.viewId ?? null,
    escapeFormulas: body.escapeFormulas ?? true,
  };
  return { ...payload, reads: readsOf(schema.fields, payload) };
}

function enqueueExport(
  tx: TransactionClient,
  context: Context,
  caller: Caller,
  payload: ExportRowsPayload,
): Promise<JobHandleShape> {
  const kind = payload.viewId ? 'exportView' : 'exportRows';
  return enqueueJob(tx, caller, {
    kind,
    category: 'exports',
    orgId: payload.orgId,
    databaseId: payload.databaseId,
    tableId: payload.tableId,
    payload,
    fileName: payload.fileName,
    summary: `Queued an export of ${payload.fileName}`,
    queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
  });
}

/** `viewsOf`: whose personal views the archive holds besides the shared ones (a team key has none). */
async function planDatabaseExport(
  context: Context,
  caller: Caller,
  orgId: string,
  databaseId: string,
  body: ExportDatabaseBody,
): Promise<ExportDatabasePayload> {
  const database = await context.prisma.database.findFirst({
    where: { id: databaseId, orgId, state: 'active' },
    select: { name: true },
  });
  if (!database) throw notFound('database');
  return {
    orgId,
    databaseId,
    format: body.format,
    fileName: body.fileName ?? defaultFileName(database.name, 'zip'),
    viewsOf: caller.userId,
    escapeFormulas: body.escapeFormulas ?? true,
  };
}

builder.mutationFields((t) => ({
  exportRows: t.field({
    type: JobHandle,
    description:
      'Exports a table’s rows (or a saved view’s) to one CSV, JSONL or XLSX file: a job (`exportRows`, `exportView` with a view) whose artifact is the file.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: ExportRowsInput, required: true }),
    },
    extensions: heavyRead(),
    authScopes: (_root, { orgId }) => startScopes('exportRows', orgId),
    resolve: async (_root, args, context) => {
      const body = args.input;
      const address = addressOf(args);
      return idempotent(
        context,
        { operation: 'exportRows', key: args.idempotencyKey, input: { ...address, ...body } },
        async (tx) => enqueueExport(tx, context, requireCaller(context), await planExport(context, address, body)),
      );
    },
  }),
  exportDatabase: t.field({
    type: JobHandle,
    description:
      'Exports a whole database to one ZIP archive (`schema.json` and one CSV or JSONL file per table): an `exportDatabase` job.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      orgId: t.arg.id({ required: true, validate: Id }),
      databaseId: t.arg.id({ required: true, validate: Id }),
      input: t.arg({ type: ExportDatabaseInput, required: true }),
    },
    extensions: heavyRead(),
    authScopes: (_root, { orgId }) => startScopes('exportDatabase', orgId),
    resolve: async (_root, args, context) => {
      const body = args.input;
      const [orgId, databaseId] = [String(args.orgId), String(args.databaseId)];
      return idempotent(
        context,
        { operation: 'exportDatabase', key: args.idempotencyKey, input: { orgId, databaseId, ...body } },
        async (tx) => {
          const caller = requireCaller(context);
          const payload = await planDatabaseExport(context, caller, orgId, databaseId, body);
          return enqueueJob(tx, caller, {
            kind: 'exportDatabase',
            category: 'exports',
            orgId,
            databaseId,
            payload,
            fileName: payload.fileName,
            summary: `Queued an export of ${payload.fileName}`,
            queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
          });
        },
      );
    },
  }),
}));
