import type { FieldDefinition } from '../../../data/field-types.ts';
import { visibleViewSql } from '../../../data/view-visibility.ts';
import type { Snapshot } from './snapshot.ts';

/**
 * The definitions an export needs, read inside its snapshot, so the schema written and the rows written belong to
 * the same instant (a schema change cannot land between them).
 */
export interface ExportedTable {
  id: string;
  name: string;
  schemaVersion: number;
  fields: FieldDefinition[];
  uniqueRules: { id: string; fieldIds: string[]; where: unknown }[];
  foreignKeys: {
    id: string;
    fieldIds: string[];
    referencedTableId: string;
    referencedRuleId: string;
    referencedFieldIds: string[];
  }[];
}

const TABLES = `
  SELECT t.id, t.name, t.schema_version AS "schemaVersion",
    (SELECT coalesce(json_agg(json_build_object('id', f.id, 'name', f.name, 'type', f.type, 'required', f.required,
               'options', f.options, 'position', f.position) ORDER BY f.position), '[]')
       FROM public.fields f WHERE f.table_id = t.id) AS fields,
    (SELECT coalesce(json_agg(json_build_object('id', r.id, 'fieldIds', r.field_ids, 'where', r."where") ORDER BY r.id), '[]')
       FROM public.unique_rules r WHERE r.table_id = t.id AND r.state = 'active') AS "uniqueRules",
    (SELECT coalesce(json_agg(json_build_object('id', k.id, 'fieldIds', k.field_ids, 'referencedTableId', k.referenced_table_id,
               'referencedRuleId', k.referenced_rule_id, 'referencedFieldIds', rr.field_ids) ORDER BY k.id), '[]')
       FROM public.foreign_keys k JOIN public.unique_rules rr ON rr.id = k.referenced_rule_id
      WHERE k.table_id = t.id AND k.state = 'active') AS "foreignKeys"
    FROM public.data_tables t`;

/** The active table, or null when it was deleted since the export was asked for. */
export async function readTable(
  snapshot: Snapshot,
  orgId: string,
  databaseId: string,
  tableId: string,
): Promise<ExportedTable | null> {
  const [table] = await snapshot.query<ExportedTable>(
    `${TABLES} WHERE t.id = $1::bpchar AND t.database_id = $2::bpchar AND t.org_id = $3::bpchar AND t.state = 'active'`,
    [tableId, databaseId, orgId],
  );
  return table ?? null;
}

export interface ExportedView {
  id: string;
  name: string;
  tableId: string;
  kind: 'shared' | 'personal';
  schemaVersion: number;
  definition: unknown;
}

export interface ExportedDatabase {
  name: string;
  tables: ExportedTable[];
  views: ExportedView[];
}

/**
 * Every active table of the database, oldest first, and their saved views: the shared ones, and the personal
 * ones of `viewsOf` only (another user's personal view is theirs; the views API does not show it either).
 */
export async function readDatabase(
  snapshot: Snapshot,
  orgId: string,
  databaseId: string,
  viewsOf: string | null,
): Promise<ExportedDatabase | null> {
  const [database] = await snapshot.query<{ name: string }>(
    `SELECT name FROM public.databases WHERE id = $1::bpchar AND org_id = $2::bpchar AND state = 'active'`,
    [databaseId, orgId],
  );
  if (!database) return null;
  const tables = await snapshot.query<ExportedTable>(
    `${TABLES} WHERE t.database_id = $1::bpchar AND t.state = 'active' ORDER BY t.created_at, t.id`,
    [databaseId],
  );
  const views = await snapshot.query<ExportedView>(
    `SELECT v.id, v.name, v.table_id AS "tableId", v.visibility AS kind, v.schema_version AS "schemaVersion", v.definition
       FROM public.saved_views v JOIN public.data_tables t ON t.id = v.table_id
      WHERE t.database_id = $1::bpchar AND t.state = 'active'
        AND ${visibleViewSql('v.', '$2::bpchar')}
      ORDER BY t.created_at, t.id, v.created_at, v.id`,
    [databaseId, viewsOf],
  );
  return { name: database.name, tables, views };
}
