/**
 * JSON text that PostgreSQL built, carried through GraphQL execution as it is and spliced into the answer by the
 * serializer (`stringifyAnswer`) instead of being parsed into objects and stringified again. Node 20 has no
 * `JSON.rawJSON`; this does its work for the answers we serialize (REST bodies and /graphql results).
 *
 * Grafast builds its answer as text in one pass (`outputDataAsString`) and grafserv splices that text into the
 * payload; this takes the splice, for the one value that dominates our answers: a row's `values` (issue 30).
 *
 * Anything else that meets a RawJson (a log line, an event stream, a test) gets the parsed value from `toJSON`, so
 * a RawJson is never seen as anything but the JSON it holds.
 */
export class RawJson {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    if (splicing === null) return JSON.parse(this.text);
    splicing.push(this.text);
    return MARKER;
  }

  /** The value as objects, for code that reads into it. */
  parse(): unknown {
    return JSON.parse(this.text);
  }
}

// What toJSON answers while an answer is being spliced: JSON.stringify writes it as `"\u0000raw-json"`. A string in
// the answer that is (or holds, escaped) the same text also shows that token; then the count of tokens is not the
// count of RawJson values, and the answer is serialized the slow way: never a wrong splice.
const MARKER = '\u0000raw-json';
const TOKEN = JSON.stringify(MARKER);

let splicing: string[] | null = null;

/** JSON.stringify(value), with each RawJson's text written as it is. */
export function stringifyAnswer(value: unknown): string {
  const raws: string[] = [];
  splicing = raws;
  let text: string;
  try {
    text = JSON.stringify(value);
  } finally {
    splicing = null;
  }
  if (raws.length === 0) return text;
  const parts = text.split(TOKEN);
  if (parts.length !== raws.length + 1) return JSON.stringify(value);
  let answer = parts[0]!;
  for (let index = 0; index < raws.length; index += 1) answer += raws[index]! + parts[index + 1]!;
  return answer;
}

/**
 * Characters per piece of `answerPieces`: a piece (at most 64 KiB as UTF-16) stays below V8's large-object threshold
 * and its Buffer (at most 96 KiB as UTF-8) below glibc's mmap threshold (128 KiB each), so neither gets fresh pages
 * of its own. Not smaller: each piece is one write into gzip, and a 360 KB answer gzipped in 8 KB writes cost 6.9 ms
 * of CPU against 2.5 ms in 32 KB writes and 1.7 ms in one (the shared machine, one process).
 */
const PIECE_LENGTH = 32_768;

const isPlain = (value: object): boolean => {
  const prototype = Object.getPrototypeOf(value) as unknown;
  return (
    (prototype === Object.prototype || prototype === null || prototype === Array.prototype) &&
    typeof (value as { toJSON?: unknown }).toJSON !== 'function'
  );
};

/** What JSON.stringify leaves out of an object and writes as null in an array. */
const isSkipped = (value: unknown): boolean =>
  value === undefined || typeof value === 'function' || typeof value === 'symbol';

/**
 * The text `stringifyAnswer(value)` answers, as pieces of about PIECE_LENGTH characters, never one large string.
 * A 1,000-row lookup answers ~360 KB: as one string it was built by JSON.stringify, split, joined again as a rope,
 * flattened and copied into one Buffer, each a large allocation on fresh pages: ~200 page faults and ~5.6 ms of
 * CPU per answer on the shared bench machine (2.3 of them in the kernel), against 1.2 ms for JSON.stringify alone.
 * Arrays, plain objects, RawJson and primitives are written here, member by member; anything else (a Date, an
 * object with its own `toJSON`) is written by `stringifyAnswer`, so the text is JSON.stringify's with RawJson
 * spliced (such a `toJSON` is called with an empty key).
 */
export function answerPieces(value: unknown): string[] {
  const pieces: string[] = [];
  let current = '';
  const write = (text: string) => {
    current += text;
    if (current.length >= PIECE_LENGTH) {
      pieces.push(current);
      current = '';
    }
  };
  // Each row repeats the same keys: quoted once per answer, not once per member.
  const labels = new Map<string, string>();
  const labelOf = (key: string): string => {
    let label = labels.get(key);
    if (label === undefined) {
      label = `${JSON.stringify(key)}:`;
      labels.set(key, label);
    }
    return label;
  };
  const walk = (item: unknown): void => {
    if (item === null || typeof item !== 'object') write(JSON.stringify(item));
    else if (item instanceof RawJson) write(item.text);
    else if (!isPlain(item)) write(stringifyAnswer(item));
    else if (Array.isArray(item)) {
      write('[');
      for (let index = 0; index < item.length; index += 1) {
        const member: unknown = item[index];
        if (index > 0) write(',');
        if (isSkipped(member)) write('null');
        else walk(member);
      }
      write(']');
    } else {
      let separator = '{';
      for (const key of Object.keys(item)) {
        const member = (item as Record<string, unknown>)[key];
        if (isSkipped(member)) continue;
        write(separator);
        write(labelOf(key));
        separator = ',';
        walk(member);
      }
      write(separator === '{' ? '{}' : '}');
    }
  };
  if (isSkipped(value)) return [];
  walk(value);
  if (current !== '') pieces.push(current);
  return pieces;
}
