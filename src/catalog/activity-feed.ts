import { ID, jsonObject, jsonValue, Params, utcTimestamp, type Statement } from '../data/statement.ts';

/**
 * The activity feed's SQL (spec 4.11, 4.12). A page is one keyset range scan on (org, occurred_at, id) — or on the
 * (database | table | org+category, occurred_at, id) index a filter selects — whatever the size of the feed.
 */
export interface FeedFilter {
  orgId: string;
  databaseId?: string | undefined;
  tableId?: string | undefined;
  category?: string | undefined;
  event?: string | undefined;
  /** Case-insensitive substring of the summary, the actor's name or the database or table name. */
  text?: string | undefined;
  from?: string | undefined;
  to?: string | undefined;
}

export interface FeedPosition {
  occurredAt: string;
  id: string;
}

/**
 * One row of a feed page: an entry, and when the filter names a table or database, that scope on every row (and
 * on one row with no entry when the page is empty).
 */
export interface FeedEntryRecord extends Partial<FeedScopeRecord> {
  id: string | null;
  /** The entry's instant at microsecond precision, for the cursor. */
  position: string | null;
  /** The entry in spec 2.10's shape as JSON text, built by PostgreSQL. */
  entry: string | null;
}

const escapeLike = (text: string) => text.replace(/[\\%_]/g, (character) => `\\${character}`);

function conditions(filter: FeedFilter, asOf: string, params: Params): string[] {
  const where = [`e.org_id = ${params.add(filter.orgId, ID)}`, `e.occurred_at <= ${params.add(asOf, 'timestamptz')}`];
  if (filter.databaseId) where.push(`e.database_id = ${params.add(filter.databaseId, ID)}`);
  if (filter.tableId) where.push(`e.table_id = ${params.add(filter.tableId, ID)}`);
  if (filter.category) where.push(`e.category = ${params.add(filter.category, 'text')}`);
  if (filter.event) where.push(`e.event = ${params.add(filter.event, 'text')}`);
  if (filter.from) where.push(`e.occurred_at >= ${params.add(filter.from, 'timestamptz')}`);
  if (filter.to) where.push(`e.occurred_at < ${params.add(filter.to, 'timestamptz')}`);
  if (filter.text) {
    const pattern = params.add(`%${escapeLike(filter.text)}%`, 'text');
    where.push(
      `(e.summary ILIKE ${pattern} OR e.actor_name ILIKE ${pattern} OR d.name ILIKE ${pattern} OR t.name ILIKE ${pattern})`,
    );
  }
  return where;
}

/** A database or table as spec 2.10 names it: null when gone, else its id, name and state. */
const named = (alias: string) =>
  `CASE WHEN ${alias}.id IS NULL THEN 'null' ELSE ${jsonObject([
    ['id', jsonValue(`${alias}.id`)],
    ['name', jsonValue(`coalesce(${alias}.name, '')`)],
    ['state', jsonValue(`coalesce(${alias}.state, 'active')`)],
  ])} END`;

/** An entry in spec 2.10's shape, as JSON text (`jsonObject`: the page builds 101 of them). */
const entryJson = jsonObject([
  ['id', jsonValue('e.id')],
  ['category', jsonValue('e.category')],
  ['occurredAt', jsonValue(utcTimestamp('e.occurred_at'))],
  ['summary', jsonValue('e.summary')],
  ['event', jsonValue('e.event')],
  ['status', jsonValue('e.status')],
  [
    'actor',
    jsonObject([
      ['id', jsonValue('e.actor_id')],
      ['key', jsonValue("coalesce(e.actor_key, '')")],
      ['kind', jsonValue('e.actor_kind')],
      ['name', jsonValue('e.actor_name')],
      ['avatarUrl', `'""'`],
    ]),
  ],
  ['database', named('d')],
  ['table', named('t')],
  ['rowId', jsonValue('e.row_id')],
  ['affectedRows', jsonValue('e.affected_rows')],
  ['jobId', jsonValue('e.job_id')],
  ['fileName', jsonValue('e.file_name')],
  ['destination', jsonValue('e.destination')],
]);

/**
 * One page, newest first; `after` is the last entry of the previous page; `asOf` is the first page's cutoff. Each
 * entry comes as one JSON text in the spec's shape (no avatars are stored yet: an empty string keeps spec 2.10's
 * "all strings"), so the service parses one column a row instead of twenty and maps nothing (issue 14, round 3).
 * A feed scoped to a table or database carries that scope (`FeedScopeRecord`, null when it is not the org's) in
 * the same statement: the page is a lateral join on the one scope row, one round trip instead of two.
 */
export function selectFeedPage(filter: FeedFilter, asOf: string, after: FeedPosition | null, limit: number): Statement {
  const params = new Params();
  const scope = filter.tableId || filter.databaseId ? feedScope(filter, params) : null;
  const where = conditions(filter, asOf, params);
  if (after)
    where.push(`(e.occurred_at, e.id) < (${params.add(after.occurredAt, 'timestamptz')}, ${params.add(after.id, ID)})`);
  const page = `SELECT e.id, e.occurred_at::text AS position, ${entryJson} AS entry
      FROM activity_events e
      LEFT JOIN databases d ON d.id = e.database_id
      LEFT JOIN data_tables t ON t.id = e.table_id
     WHERE ${where.join(' AND ')}
     ORDER BY e.occurred_at DESC, e.id DESC
     LIMIT ${params.add(limit + 1, 'int')}`;
  const sql =
    scope === null
      ? page
      : `SELECT s.*, p.id, p.position, p.entry FROM (${scope}) s LEFT JOIN LATERAL (${page}) p ON true
        ORDER BY p.position::timestamptz DESC, p.id DESC`;
  return { sql, params: params.values };
}

export interface FeedScopeRecord {
  table_id: string | null;
  table_name: string | null;
  table_state: string | null;
  database_id: string | null;
  database_name: string | null;
  database_state: string | null;
}

/**
 * The database and table a feed is scoped to, when they are the org's (a table-scoped feed is also scoped to the
 * table's database): always exactly one row. Two ORM look-ups in a row here cost the filtered feed page a third of
 * its time; a statement of its own beside the page, another round trip.
 */
function feedScope(filter: Pick<FeedFilter, 'orgId' | 'databaseId' | 'tableId'>, params: Params): string {
  const org = params.add(filter.orgId, ID);
  const table = params.add(filter.tableId ?? null, ID);
  const database = params.add(filter.databaseId ?? null, ID);
  return `SELECT t.id AS table_id, t.name AS table_name, t.state AS table_state,
           d.id AS database_id, d.name AS database_name, d.state AS database_state
      FROM (SELECT 1) AS one
      LEFT JOIN data_tables t ON t.id = ${table} AND t.org_id = ${org}
      LEFT JOIN databases d ON d.id = coalesce(${database}, t.database_id) AND d.org_id = ${org}`;
}

export interface ActorRecord {
  actor_id: string;
  actor_name: string;
  actor_kind: string;
  actor_key: string | null;
}

/**
 * The distinct actors of an org's history whose latest name matches `text`: a skip scan over the
 * (org, actor, occurred_at) index — one probe per actor, not a pass over the feed.
 */
export function selectActors(orgId: string, text: string | undefined, limit: number): Statement {
  const params = new Params();
  const org = params.add(orgId, ID);
  const match = text ? `WHERE latest.actor_name ILIKE ${params.add(`%${escapeLike(text)}%`, 'text')}` : '';
  const sql = `WITH RECURSIVE actors(actor_id) AS (
        (SELECT actor_id FROM activity_events WHERE org_id = ${org} ORDER BY actor_id LIMIT 1)
        UNION ALL
        SELECT (SELECT e.actor_id FROM activity_events e WHERE e.org_id = ${org} AND e.actor_id > a.actor_id ORDER BY e.actor_id LIMIT 1)
          FROM actors a WHERE a.actor_id IS NOT NULL
      )
      SELECT latest.* FROM actors a CROSS JOIN LATERAL (
        SELECT e.actor_id, e.actor_name, e.actor_kind, e.actor_key FROM activity_events e
         WHERE e.org_id = ${org} AND e.actor_id = a.actor_id ORDER BY e.occurred_at DESC LIMIT 1
      ) latest
      ${match}
      ORDER BY lower(latest.actor_name), latest.actor_id
      LIMIT ${params.add(limit + 1, 'int')}`;
  return { sql, params: params.values };
}

export interface ResourceRecord {
  kind: 'database' | 'table';
  id: string;
  name: string;
  database_name: string | null;
}

/** Databases and tables of the org that appear in its history, by name. */
export function selectResources(orgId: string, text: string | undefined, limit: number): Statement {
  const params = new Params();
  const org = params.add(orgId, ID);
  const match = text ? `AND name ILIKE ${params.add(`%${escapeLike(text)}%`, 'text')}` : '';
  const sql = `SELECT * FROM (
        SELECT 'database' AS kind, d.id, d.name, NULL::text AS database_name FROM databases d
         WHERE d.org_id = ${org} AND EXISTS (SELECT 1 FROM activity_events e WHERE e.database_id = d.id)
        UNION ALL
        SELECT 'table' AS kind, t.id, t.name, d.name AS database_name FROM data_tables t JOIN databases d ON d.id = t.database_id
         WHERE t.org_id = ${org} AND EXISTS (SELECT 1 FROM activity_events e WHERE e.table_id = t.id)
      ) resources
      WHERE true ${match}
      ORDER BY lower(name), kind, id
      LIMIT ${params.add(limit + 1, 'int')}`;
  return { sql, params: params.values };
}
