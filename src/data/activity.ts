import { Params, type Statement } from './statement.ts';

/**
 * The one insert of an activity entry (spec §6). Every writer uses it: the catalog's resolvers, row writes and
 * batches (as a CTE of their single statement), the job runner, imports, backups and the webhook deliverer.
 */

/** Who did it, as the audit feed keeps it: kept even if they are renamed or removed later. */
export interface Actor {
  id: string;
  kind: string;
  name: string;
  /** The credential's public prefix, shown in the audit feed. */
  key: string | null;
}

/** One activity entry. An absent member takes its column's default: NULL, and `now()` for `occurredAt`. */
export interface ActivityEntry {
  id: string;
  orgId: string;
  category: string;
  /** One of the event kinds of spec §6. */
  event: string;
  summary: string;
  actor: Actor;
  occurredAt?: string;
  databaseId?: string | null;
  tableId?: string | null;
  rowId?: string | null;
  affectedRows?: number | null;
  jobId?: string | null;
  fileName?: string | null;
  mutationId?: string | null;
}

/** Each member's column and the cast its bound value takes, in the column order of every insert. */
const COLUMNS = {
  id: ['id', 'bpchar'],
  orgId: ['org_id', 'bpchar'],
  occurredAt: ['occurred_at', 'timestamptz'],
  category: ['category', 'text'],
  event: ['event', 'text'],
  summary: ['summary', 'text'],
  actorId: ['actor_id', 'bpchar'],
  actorKind: ['actor_kind', 'text'],
  actorKey: ['actor_key', 'text'],
  actorName: ['actor_name', 'text'],
  databaseId: ['database_id', 'bpchar'],
  tableId: ['table_id', 'bpchar'],
  rowId: ['row_id', 'bpchar'],
  affectedRows: ['affected_rows', 'int'],
  jobId: ['job_id', 'bpchar'],
  fileName: ['file_name', 'text'],
  mutationId: ['mutation_id', 'bpchar'],
} as const;

export type ActivityColumn = keyof typeof COLUMNS;

/** The column holds 500 characters: a longer summary is cut rather than failing the write it describes. */
const SUMMARY_LENGTH = 500;

/**
 * The insert's SQL, each member an SQL expression: a placeholder, or a column of `source` when one entry is
 * written per row of `source` (a row write's CTE). Members left out take their column's default.
 */
export function activityInsertSql(values: Partial<Record<ActivityColumn, string>>, source?: string): string {
  const members = (Object.keys(COLUMNS) as ActivityColumn[]).filter((member) => values[member] !== undefined);
  const columns = [...members.map((member) => COLUMNS[member][0]), 'status'].join(', ');
  const expressions = [...members.map((member) => values[member]), `'requested'`].join(', ');
  return source === undefined
    ? `INSERT INTO public.activity_events (${columns}) VALUES (${expressions})`
    : `INSERT INTO public.activity_events (${columns}) SELECT ${expressions} FROM ${source}`;
}

/** One entry as a statement of its own, every value bound. */
export function insertActivity(entry: ActivityEntry): Statement {
  const params = new Params();
  const { actor, ...members } = entry;
  const values: Partial<Record<ActivityColumn, unknown>> = {
    ...members,
    summary: entry.summary.slice(0, SUMMARY_LENGTH),
    actorId: actor.id,
    actorKind: actor.kind,
    actorKey: actor.key,
    actorName: actor.name,
  };
  const bound: Partial<Record<ActivityColumn, string>> = {};
  for (const member of Object.keys(COLUMNS) as ActivityColumn[]) {
    if (values[member] !== undefined) bound[member] = params.add(values[member], COLUMNS[member][1]);
  }
  return { sql: activityInsertSql(bound), params: params.values };
}
