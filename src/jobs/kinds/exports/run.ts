import { pgExecutor } from '../../../db/sql.ts';
import { deleteChunkedArtifacts, registerChunkedArtifact, saveChunk } from '../../engine/artifacts.ts';
import type { JobOutcome, JobRun } from '../../engine/handler.ts';
import type { RowCounter } from './file-formats.ts';
import { ChunkSink } from './sink.ts';
import { Snapshot } from './snapshot.ts';

/**
 * What every export kind shares: one snapshot for the whole read, the file streamed into chunked artifact storage
 * (each chunk one checkpointed step, which also reports progress and notices a cancel), and the artifact made
 * downloadable in the last step.
 *
 * Resuming: the snapshot is a transaction and dies with its worker, so a rerun cannot continue the same read. A
 * rerun therefore deletes what the earlier run stored and starts over with a new snapshot; the artifact row is only
 * written at the end, so nothing half-written is ever downloadable (docs/decisions/exports.md).
 */
export type ExportJournal<Result = unknown> =
  | { phase: 'export'; attempt: number }
  | { phase: 'done'; outcome: JobOutcome<Result> };

export interface ExportProgress extends RowCounter {
  /** Rows the export will write, counted in its snapshot before it starts (null until then). */
  total: number | null;
}

export interface ExportFile {
  name: string;
  contentType: string;
}

/** What runExport adds to every export's result (src/jobs/kinds/exports/results.ts). */
type Totals = { rowsDone: number; rowsTotal: number; artifact: { name: string; size: number; sha256: string } };

/** Streams the whole file into `sink` and resolves when the sink has stored it; answers the kind's own result fields. */
export type ExportWriter<Result extends Totals> = (
  snapshot: Snapshot,
  sink: ChunkSink,
  progress: ExportProgress,
) => Promise<Omit<Result, keyof Totals>>;

export async function runExport<Result extends Totals>(
  run: JobRun<unknown, ExportJournal<Result>>,
  file: ExportFile,
  summary: string,
  write: ExportWriter<Result>,
): Promise<JobOutcome<Result>> {
  if (run.journal.phase === 'done' && run.journal.outcome) return run.journal.outcome;
  const jobId = run.job.id;
  const exporting: ExportJournal = { phase: 'export', attempt: run.job.attempt };
  await run.step(async (sql) => {
    await deleteChunkedArtifacts(sql, jobId);
    return { journal: exporting, progress: { done: 0, total: null } };
  });
  const progress: ExportProgress = { rows: 0, total: null };
  const sink = new ChunkSink((seq, data) =>
    run.step(async (sql) => {
      await saveChunk(sql, jobId, file.name, seq, data);
      return { journal: exporting, progress: { done: progress.rows, total: progress.total } };
    }),
  );
  const snapshot = await Snapshot.open(run.pool);
  let extra: Omit<Result, keyof Totals>;
  try {
    extra = await write(snapshot, sink, progress);
  } catch (error) {
    snapshot.abandon();
    await sink.settled();
    throw error;
  }
  await snapshot.close();
  const artifact = { name: file.name, size: sink.size, sha256: sink.sha256 };
  const outcome: JobOutcome<Result> = {
    state: 'succeeded',
    result: { ...extra, rowsDone: progress.rows, rowsTotal: progress.total ?? progress.rows, artifact } as Result,
    summary,
    affectedRows: progress.rows,
  };
  await run.step(async (sql) => {
    await registerChunkedArtifact(sql, {
      jobId,
      name: file.name,
      contentType: file.contentType,
      size: sink.size,
      sha256: sink.sha256,
      chunks: sink.chunks,
      ttlHours: run.config.ARTIFACT_TTL_HOURS,
    });
    return { journal: { phase: 'done', outcome }, progress: { done: progress.rows, total: progress.rows } };
  });
  return outcome;
}

/** Undoes a stopped export: its stored chunks (and, defensively, a registered artifact) go. */
export async function discardExport(run: JobRun<unknown, ExportJournal>): Promise<void> {
  await deleteChunkedArtifacts(pgExecutor(run.pool), run.job.id);
}
