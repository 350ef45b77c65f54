/**
 * Input every layer can trust: text PostgreSQL can store, and JSON shallow enough to walk.
 *
 * PostgreSQL text cannot hold U+0000, and an unpaired UTF-16 surrogate (a valid JSON escape such as "\ud800")
 * has no UTF-8 form: `pg` would silently send U+FFFD instead. Both are refused before they reach a resolver, the
 * database or an idempotency record. Every walk here is iterative, so a hostile nesting cannot overflow the stack.
 */

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const UNSTORABLE_GLOBAL = new RegExp(UNSTORABLE.source, 'g');

export const UNSTORABLE_TEXT_MESSAGE = 'must not contain U+0000 or an unpaired surrogate (they cannot be stored)';

/** Deepest JSON accepted in a request body or a JSON query parameter (docs/decisions/input-hygiene.md). */
export const MAX_JSON_DEPTH = 64;

export const isStorableText = (value: string): boolean => !UNSTORABLE.test(value);

/** The text with every unstorable character replaced by U+FFFD: safe to echo, log and store. */
export const storableText = (value: string): string => value.replace(UNSTORABLE_GLOBAL, '\ufffd');

export type JsonPath = (string | number)[];

/** Whether `value` (a parsed JSON value) nests arrays and objects deeper than `maxDepth`. */
export function exceedsDepth(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (current === null || typeof current !== 'object') continue;
    if (depth + 1 > maxDepth) return true;
    for (const child of Object.values(current)) stack.push([child, depth + 1]);
  }
  return false;
}

export interface UnstorableOptions {
  /** Paths whose subtree another validator checks with more precise answers (e.g. row cells, per field). */
  skip?: (path: JsonPath) => boolean;
  /** Stop after this many findings: one answer need not list thousands. */
  limit?: number;
}

/**
 * Paths (in document order) of the strings and object keys in `value` that hold unstorable text. A path names
 * the offending key with its bad characters replaced by U+FFFD, so the answer itself is storable.
 */
export function unstorablePaths(value: unknown, options: UnstorableOptions = {}): JsonPath[] {
  const limit = options.limit ?? 20;
  const found: JsonPath[] = [];
  const stack: [unknown, JsonPath][] = [[value, []]];
  while (stack.length > 0 && found.length < limit) {
    const [current, path] = stack.pop()!;
    if (path.length > 0 && options.skip?.(path)) continue;
    if (typeof current === 'string') {
      if (!isStorableText(current)) found.push(path);
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    const entries: [string | number, unknown][] = Array.isArray(current)
      ? current.map((item, index) => [index, item])
      : Object.entries(current);
    for (const [key, child] of entries.reverse()) {
      if (typeof key === 'string' && !isStorableText(key)) found.push([...path, storableText(key)]);
      else stack.push([child, [...path, key]]);
    }
  }
  return found;
}

/** A copy of a JSON value whose strings and keys are all storable (for echoing or recording untrusted text). */
export function storableJson<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (Array.isArray(value)) return value.map((item) => storableJson(item)) as T;
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [storableText(key), storableJson(item)])) as T;
  }
  return value;
}

/**
 * Bidirectional control characters: embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069. In a file name
 * they make `invoice\u202Efdp.exe` display as `invoiceexe.pdf` (Trojan Source, CVE-2021-42574), so file names
 * refuse them (422) and names derived from user text lose them.
 */
export const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069]/;
export const BIDI_CONTROLS_GLOBAL = new RegExp(BIDI_CONTROLS.source, 'g');
export const BIDI_CONTROL_MESSAGE = 'must not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069)';
