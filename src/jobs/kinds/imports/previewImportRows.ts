import { pgExecutor, type SqlExecutor } from '../../../db/sql.ts';
import type { Json } from '../../../kernel/formats.ts';
import { loadArtifactContent, saveArtifact, sha256Of } from '../../engine/artifacts.ts';
import type { JobHandler, JobOutcome, JobRun } from '../../engine/handler.ts';
import { succeededEvent } from '../../engine/handler.ts';
import { PreviewImportRowsResult } from './results.ts';
import { ImportSpec, validateImport, type ValidationJournal } from './pipeline.ts';
import { countOutcome, dropStaging, selectPreview, selectProblems } from './staging.ts';

/**
 * Import preview (endpoint 4): validates the file against the table without inserting anything, and produces
 * counts, a typed preview of the first rows and a JSONL error report artifact (`errors.jsonl`).
 */
export const UPLOAD_ARTIFACT = 'upload';
export const REPORT_ARTIFACT = 'errors.jsonl';
const PREVIEW_ROWS = 50;
/** A report past this many problems is cut (the counts stay exact); 100,000 lines is roughly 15 MB. */
const MAX_REPORTED_PROBLEMS = 100_000;

type PreviewJournal = ValidationJournal | { phase: 'done'; outcome: JobOutcome<PreviewImportRowsResult> };

export async function readUpload(sql: SqlExecutor, jobId: string): Promise<string> {
  const content = await loadArtifactContent(sql, jobId, UPLOAD_ARTIFACT);
  if (content === null) throw new Error(`The upload of job ${jobId} is missing`);
  return content.toString('utf8');
}

interface ProblemRow {
  line: number;
  label: string | null;
  field_id: string | null;
  code: string;
  message: string;
}

/** The error report: one JSON object per problem, `{line, column, fieldId, code, message}`, in file order. */
export async function writeReport(
  sql: SqlExecutor,
  run: JobRun<unknown, unknown>,
): Promise<{ name: string; size: number; sha256: string; problems: number; truncated: boolean }> {
  const select = selectProblems(run.job.id, MAX_REPORTED_PROBLEMS + 1);
  const rows = await sql.run<ProblemRow>(select);
  const truncated = rows.length > MAX_REPORTED_PROBLEMS;
  const lines = rows.slice(0, MAX_REPORTED_PROBLEMS).map((row) =>
    JSON.stringify({
      line: row.line,
      column: row.label,
      fieldId: row.field_id?.trim() ?? null,
      code: row.code,
      message: row.message,
    }),
  );
  const content = Buffer.from(lines.map((line) => `${line}\n`).join(''), 'utf8');
  await saveArtifact(sql, {
    jobId: run.job.id,
    name: REPORT_ARTIFACT,
    contentType: 'application/x-ndjson',
    content,
    listed: true,
    ttlHours: run.config.ARTIFACT_TTL_HOURS,
  });
  return {
    name: REPORT_ARTIFACT,
    size: content.length,
    sha256: sha256Of(content),
    problems: Math.min(rows.length, MAX_REPORTED_PROBLEMS),
    truncated,
  };
}

export async function countRows(
  sql: SqlExecutor,
  jobId: string,
): Promise<{ totalRows: number; validRows: number; invalidRows: number }> {
  const [counts] = await sql.query<{ total: number; invalid: number }>(countOutcome(jobId).sql);
  return { totalRows: counts!.total, validRows: counts!.total - counts!.invalid, invalidRows: counts!.invalid };
}

async function summarise(
  sql: SqlExecutor,
  run: JobRun<ImportSpec, PreviewJournal>,
  malformed: { line: number; message: string } | null,
): Promise<JobOutcome<PreviewImportRowsResult>> {
  const counts = await countRows(sql, run.job.id);
  const preview = await sql.query<{ line: number; cells: Record<string, Json>; valid: boolean }>(
    selectPreview(run.job.id, PREVIEW_ROWS).sql,
  );
  const report = await writeReport(sql, run as JobRun<unknown, unknown>);
  await sql.query(dropStaging(run.job.id).sql);
  const result: PreviewImportRowsResult = {
    ...counts,
    schemaVersion: run.payload.schemaVersion,
    preview: preview.map((row) => ({ line: row.line, valid: row.valid, values: row.cells })),
    report,
  };
  if (malformed) {
    return {
      state: 'failed',
      result,
      summary: `Import preview of ${run.payload.fileName}`,
      error: {
        code: 'VALIDATION_FAILED',
        message: `The CSV file is malformed at line ${malformed.line}: ${malformed.message}`,
        details: { line: malformed.line },
      },
    };
  }
  return { state: 'succeeded', result, summary: `Import preview of ${run.payload.fileName}` };
}

export const previewImportRows: JobHandler<ImportSpec, PreviewJournal, PreviewImportRowsResult> = {
  kind: 'previewImportRows',
  payload: ImportSpec,
  result: PreviewImportRowsResult,
  successEvent: () => succeededEvent('previewImportRows'),
  describe: (payload) => `Import preview of ${payload.fileName}`,
  fileName: (payload) => payload.fileName,
  async run(run) {
    if (run.journal.phase !== 'done') {
      const content = await readUpload(pgExecutor(run.pool), run.job.id);
      const { malformed } = await validateImport(run as JobRun<unknown, ValidationJournal>, run.payload, content);
      await run.step(async (sql) => {
        const outcome = await summarise(sql, run, malformed);
        const { totalRows } = outcome.result;
        return { journal: { phase: 'done', outcome }, progress: { done: totalRows, total: totalRows } };
      });
    }
    return (run.journal as { outcome: JobOutcome<PreviewImportRowsResult> }).outcome;
  },
  async discard(run) {
    await pgExecutor(run.pool).query(dropStaging(run.job.id).sql);
  },
};
