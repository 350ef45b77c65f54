import type { Readable } from 'node:stream';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { EXPORT_SESSION, type CopyPlan } from '../../../data/exports.ts';

/**
 * One consistent view of the data for a whole export: a REPEATABLE READ, READ ONLY transaction on a connection of
 * its own. Every count and COPY of the job runs in it, so every row is as of one instant while writes go on, across
 * all tables of a database. The transaction cannot outlive its worker: after a crash the job starts again with a new
 * snapshot (docs/decisions/exports.md).
 */
export class Snapshot {
  private constructor(private readonly client: pg.PoolClient) {}

  static async open(pool: pg.Pool): Promise<Snapshot> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      for (const setting of EXPORT_SESSION) await client.query(setting);
      return new Snapshot(client);
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  async query<Row extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<Row[]> {
    return (await this.client.query<Row>(sql, params)).rows;
  }

  /** Binds the plan's settings and answers how many rows its COPY writes. */
  async prepare(plan: CopyPlan): Promise<number> {
    if (plan.settings) {
      const commands = await this.query<{ command: string }>(plan.settings.sql, plan.settings.params);
      for (const { command } of commands) await this.client.query(command);
    }
    const [row] = await this.query<{ rows: string }>(plan.count);
    return Number(row!.rows);
  }

  copy(plan: CopyPlan): Readable {
    return this.client.query(copyTo(plan.copy));
  }

  async close(): Promise<void> {
    await this.client.query('COMMIT');
    this.client.release();
  }

  /** After a failure part-way through a COPY the connection's state is unknown: it is closed, not reused. */
  abandon(): void {
    this.client.release(true);
  }
}
