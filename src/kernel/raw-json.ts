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
