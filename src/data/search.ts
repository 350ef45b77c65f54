import type { FieldDefinition, FieldType } from './field-types.ts';
import { columnOf, rowsTableOf } from './identifiers.ts';
import { rowJsonColumns, type PhysicalTable } from './rows.ts';
import { Params, type Statement } from './statement.ts';

/**
 * Text search and similarity (issue 28). Both compare text folded by `public.wds_fold` (lower case, accents
 * removed: the migration `search_extensions` explains why it is a wrapper in public), so "CRÈME" finds "creme".
 * Search matches each word as a substring (LIKE) of a row's search document, the folded text of its text-like
 * fields; similarity is pg_trgm's trigram similarity of one field's folded text. A GIN trigram index over the same
 * expression (src/data/search-indexes.ts) serves both; without one they scan, within the statement budget.
 */
export const SEARCHABLE_TYPES: readonly FieldType[] = ['text', 'longText', 'email', 'url', 'select', 'multiSelect'];

/** Spec-like bounds of a search text: a query, not a document. */
export const MAX_SEARCH_LENGTH = 200;
export const MAX_SEARCH_WORDS = 10;

export const isSearchable = (field: FieldDefinition): boolean => SEARCHABLE_TYPES.includes(field.type);

/** The distinct words of a search text (split on white space), in order. */
export function searchWords(text: string): string[] {
  return [...new Set(text.split(/\s+/u).filter((word) => word.length > 0))];
}

function part(field: FieldDefinition, alias: string | null): string {
  const column = alias ? `${alias}.${columnOf(field.id)}` : columnOf(field.id);
  return field.type === 'multiSelect' ? `coalesce(public.wds_join(${column}), '')` : `coalesce(${column}, '')`;
}

/**
 * The folded search document of `fields`, in their order: IMMUTABLE, so an index can hold it, and written the same
 * way with or without an alias, so that PostgreSQL matches the query's expression to the index's.
 */
export function searchDocument(fields: readonly FieldDefinition[], alias: string | null): string {
  return `public.wds_fold(${fields.map((field) => part(field, alias)).join(` || ' ' || `)})`;
}

/** One field's folded text: what similarity compares and its trigram index holds. */
export function foldedField(field: FieldDefinition, alias: string | null): string {
  return `public.wds_fold(${part(field, alias)})`;
}

/** A LIKE pattern finding `word` anywhere (its own `%`, `_` and `\` matched literally), folded as documents are. */
function containsWord(params: Params, word: string): string {
  const literal = word.replace(/[\\%_]/g, (character) => `\\${character}`);
  return `('%' || public.wds_fold(${params.add(literal, 'text')}) || '%')`;
}

export interface SearchPlan {
  /** The searched fields a ready search index covers, in its order; empty without one. */
  indexed: readonly FieldDefinition[];
  /** The other searched fields, scanned. */
  scanned: readonly FieldDefinition[];
}

/** Every word in some searched field: one condition per word over each document (an indexed one uses its index). */
export function searchCondition(plan: SearchPlan, words: readonly string[], params: Params, alias = 'r'): string {
  const documents = [plan.indexed, plan.scanned]
    .filter((fields) => fields.length > 0)
    .map((fields) => searchDocument(fields, alias));
  if (documents.length === 0) return 'false';
  const conditions = words.map((word) => {
    const pattern = containsWord(params, word);
    const matches = documents.map((document) => `${document} LIKE ${pattern}`);
    return matches.length === 1 ? matches[0]! : `(${matches.join(' OR ')})`;
  });
  return conditions.join(' AND ');
}

/** Relevance: the trigram similarity of the search text to the whole document (shorter, closer rows first). */
export function searchRank(plan: SearchPlan, text: string, params: Params, alias = 'r'): string {
  const fields = [...plan.indexed, ...plan.scanned];
  if (fields.length === 0) return '0::real';
  return `similarity(public.wds_fold(${params.add(text, 'text')}), ${searchDocument(fields, alias)})`;
}

/** pg_trgm's `%` operator filters at `pg_trgm.similarity_threshold`, 0.3 unless the server was configured otherwise. */
export const TRIGRAM_OPERATOR_THRESHOLD = 0.3;

export interface SimilarQuery {
  field: FieldDefinition;
  value: string;
  threshold: number;
  limit: number;
  /** The fields each answered row carries. */
  shown: readonly FieldDefinition[];
}

/**
 * The rows whose field is most similar to `value`, best first (then by id), each with its score. At a threshold of
 * at least 0.3 the condition includes `%`, which a trigram index over the field serves; below it, `%` would drop
 * rows the caller asked for, so the statement scans.
 */
export function similarRows(table: PhysicalTable, query: SimilarQuery): Statement {
  const params = new Params();
  const folded = foldedField(query.field, 'r');
  const value = `public.wds_fold(${params.add(query.value, 'text')})`;
  const score = `similarity(${folded}, ${value})`;
  const conditions = [
    ...(query.threshold >= TRIGRAM_OPERATOR_THRESHOLD ? [`${folded} % ${value}`] : []),
    `${score} >= ${params.add(query.threshold, 'float8')}`,
  ];
  const sql = `SELECT r.id, ${rowJsonColumns(query.shown, 'r')}, ${score} AS score
      FROM ${rowsTableOf(table.databaseId, table.tableId)} r
     WHERE ${conditions.join(' AND ')}
     ORDER BY score DESC, r.id ASC LIMIT ${params.add(query.limit, 'int')}`;
  return { sql, params: params.values };
}
