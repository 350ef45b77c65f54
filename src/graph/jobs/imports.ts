import type { TransactionClient } from '../../db/prisma.ts';
import { isStorableText } from '../../data/field-types.ts';
import { DomainError, notFound, validationFailed } from '../../kernel/errors.ts';
import { newId } from '../../kernel/ids.ts';
import { sha256Of } from '../../jobs/engine/artifacts.ts';
import { UPLOAD_ARTIFACT } from '../../jobs/kinds/imports/previewImportRows.ts';
import type { ImportRowsPayload } from '../../jobs/kinds/imports/importRows.ts';
import { csvHeaderOf, resolveMapping } from '../../jobs/kinds/imports/mapping.ts';
import { ImportSpec } from '../../jobs/kinds/imports/pipeline.ts';
import type { Caller } from '../../kernel/caller.ts';
import { requireCaller } from '../server/guards.ts';
import { builder } from '../server/builder.ts';
import type { Context } from '../server/context.ts';
import { idempotent } from '../../idempotency/run.ts';
import { enqueueJob, JobHandle, type JobHandleShape } from './enqueue.ts';
import { startScopes } from './start-authority.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { schemaVersionConflict, type TableAddress } from '../../catalog/table-schema.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';
import { ImportRowsBody, MAX_IMPORT_CHARACTERS, PreviewImportBody } from '../../contracts/jobs.ts';

const MappingItemInput = builder.inputType('ImportMappingItemInput', {
  fields: (t) => ({
    source: t.field({
      type: 'JSON',
      required: true,
      description: 'A CSV header name, a 0-based CSV column index, or a JSONL property name.',
    }),
    fieldId: t.string({ required: true, description: 'The target field’s id (or exact name).' }),
  }),
});

const PreviewImportInput = builder
  .inputType('PreviewImportInput', {
    fields: (t) => ({
      expectedSchemaVersion: t.int({ required: true }),
      format: t.string({ required: true }),
      content: t.string({ required: true }),
      fileName: t.string({ required: true }),
      mapping: t.field({ type: [MappingItemInput], required: true }),
      header: t.boolean(),
    }),
  })
  .validate(PreviewImportBody);

const ImportRowsInput = builder
  .inputType('ImportRowsInput', {
    fields: (t) => ({
      previewJobId: t.id({ required: true }),
      expectedSchemaVersion: t.int({ required: true }),
      mode: t.string({ required: true, description: '`valid-rows-only` or `all-or-nothing`.' }),
    }),
  })
  .validate(ImportRowsBody);

function codePointLength(text: string): number {
  let pairs = 0;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        pairs += 1;
        index += 1;
      }
    }
  }
  return text.length - pairs;
}

function checkContent(content: string): void {
  const length = codePointLength(content);
  if (length > MAX_IMPORT_CHARACTERS) {
    throw new DomainError(
      'PAYLOAD_TOO_LARGE',
      `Import content may hold at most ${MAX_IMPORT_CHARACTERS} characters; this one has ${length}.`,
      {
        details: { limit: MAX_IMPORT_CHARACTERS, length },
      },
    );
  }
  if (!isStorableText(content)) {
    throw validationFailed([
      {
        path: ['content'],
        message: 'is not valid Unicode text (it holds U+0000 or an unpaired surrogate, e.g. from non-UTF-8 bytes)',
      },
    ]);
  }
}

async function previewImport(
  tx: TransactionClient,
  context: Context,
  caller: Caller,
  address: TableAddress,
  body: PreviewImportBody,
  content: Buffer<ArrayBuffer>,
): Promise<JobHandleShape> {
  const schema = await currentSchema(context, address);
  if (schema.schemaVersion !== body.expectedSchemaVersion)
    throw schemaVersionConflict(body.expectedSchemaVersion, schema.schemaVersion);
  const header = body.format === 'csv' && body.header !== false;
  const { mapping, problems } = resolveMapping(
    schema.fields,
    body.mapping,
    body.format,
    header ? csvHeaderOf(body.content) : null,
  );
  if (problems.length > 0)
    throw validationFailed(
      problems.map((problem) => ({ ...problem, path: problem.path })),
      'The mapping does not fit the table or the file.',
    );
  const spec: ImportSpec = {
    ...address,
    schemaVersion: schema.schemaVersion,
    format: body.format,
    fileName: body.fileName,
    header,
    mapping,
  };
  const jobId = newId();
  const handle = await enqueueJob(
    tx,
    caller,
    {
      kind: 'previewImportRows',
      category: 'imports',
      ...address,
      payload: spec,
      fileName: body.fileName,
      summary: `Queued an import preview of ${body.fileName}`,
      queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
    },
    jobId,
  );
  await tx.jobArtifact.create({
    data: {
      jobId,
      name: UPLOAD_ARTIFACT,
      contentType: body.format === 'csv' ? 'text/csv' : 'application/x-ndjson',
      content,
      sizeBytes: content.length,
      sha256: sha256Of(content),
      listed: false,
      expiresAt: new Date(Date.now() + context.config.ARTIFACT_TTL_HOURS * 3_600_000),
    },
  });
  return handle;
}

function alreadyImported(jobId: string): DomainError {
  return new DomainError(
    'JOB_STATE_CONFLICT',
    'This preview is already being imported or was imported; preview the file again to import it again.',
    {
      details: { importJobId: jobId },
    },
  );
}

async function importPreviewed(
  tx: TransactionClient,
  context: Context,
  caller: Caller,
  address: TableAddress,
  body: ImportRowsBody,
): Promise<JobHandleShape> {
  const preview = await tx.job.findFirst({
    where: { id: body.previewJobId, orgId: address.orgId, tableId: address.tableId, kind: 'previewImportRows' },
  });
  if (!preview) throw notFound('import preview');
  if (preview.state !== 'succeeded') {
    throw new DomainError(
      'JOB_STATE_CONFLICT',
      `The preview is ${preview.state}; only a succeeded preview can be imported.`,
      { details: { state: preview.state } },
    );
  }
  const schema = await currentSchema(context, address);
  if (schema.schemaVersion !== body.expectedSchemaVersion)
    throw schemaVersionConflict(body.expectedSchemaVersion, schema.schemaVersion);
  const spec = ImportSpec.parse(preview.payload);
  if (spec.schemaVersion !== schema.schemaVersion)
    throw schemaVersionConflict(spec.schemaVersion, schema.schemaVersion);
  const upload = await tx.jobArtifact.findUnique({
    where: { jobId_name: { jobId: preview.id, name: UPLOAD_ARTIFACT } },
    select: { expiresAt: true },
  });
  if (!upload || upload.expiresAt.getTime() <= Date.now()) {
    throw new DomainError('ARTIFACT_EXPIRED', 'The previewed file is no longer stored; preview it again.');
  }
  const earlier = await tx.job.findFirst({
    where: {
      kind: 'importRows',
      orgId: address.orgId,
      state: { in: ['queued', 'running', 'succeeded', 'partially_completed'] },
      payload: { path: ['previewJobId'], equals: preview.id },
    },
    select: { id: true },
  });
  if (earlier) throw alreadyImported(earlier.id);
  const payload: ImportRowsPayload = { spec, previewJobId: preview.id, mode: body.mode };
  return enqueueJob(tx, caller, {
    kind: 'importRows',
    category: 'imports',
    ...address,
    payload,
    fileName: spec.fileName,
    serialKey: `import:${preview.id}`,
    serialConflict: () => alreadyImported(preview.id),
    summary: `Queued an import of ${spec.fileName} (${body.mode})`,
    queueLimit: context.config.JOB_QUEUE_LIMIT_PER_ORG,
  });
}

builder.mutationFields((t) => ({
  previewImportRows: t.field({
    type: JobHandle,
    description:
      'Validates an append-only CSV or JSONL import without inserting anything (endpoint 4). The job yields counts, a typed preview and a JSONL error report.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: PreviewImportInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('previewImportRows', orgId),
    resolve: (_root, args, context) => {
      const body = args.input;
      checkContent(body.content);
      const address = addressOf(args);
      // The content enters the fingerprint as its digest: the same, for a fraction of canonicalising 4 MiB of JSON.
      const content = Buffer.from(body.content, 'utf8');
      const fingerprinted = { ...address, ...body, content: sha256Of(content) };
      return idempotent(
        context,
        { operation: 'previewImportRows', key: args.idempotencyKey, input: fingerprinted },
        (tx) => previewImport(tx, context, requireCaller(context), address, body, content),
      );
    },
  }),
  importRows: t.field({
    type: JobHandle,
    description: 'Appends the rows of a succeeded import preview, validated again against the table as it is now.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      ...tableAddressArgs,
      input: t.arg({ type: ImportRowsInput, required: true }),
    },
    authScopes: (_root, { orgId }) => startScopes('importRows', orgId),
    resolve: (_root, args, context) => {
      const body = args.input;
      const address = addressOf(args);
      return idempotent(
        context,
        { operation: 'importRows', key: args.idempotencyKey, input: { ...address, ...body } },
        (tx) => importPreviewed(tx, context, requireCaller(context), address, body),
      );
    },
  }),
}));
