import fc from 'fast-check';

/**
 * Values for the route fuzzer (issue 18): generators that follow a JSON Schema (the OpenAPI document's, which is
 * generated from the zod schemas that validate), mixed at every node with boundary and hostile values.
 */
export type JsonSchema = Record<string, any>;

/** Realistic values by property or parameter name (real ids, field names, current versions), so requests reach deep code. */
export type Hints = (name: string) => readonly unknown[] | undefined;

/**
 * A value JSON cannot spell from JavaScript (1e400, -0, a 30-digit integer): generated as this marker string and
 * written raw into the body text by `bodyText`.
 */
const RAW = '__fuzz_raw__:';
export const raw = (text: string) => `${RAW}${text}`;

/** Deep nesting, far past any sane depth: the canonical-JSON fingerprint must not recurse into it. */
export function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let level = 0; level < depth; level += 1) value = level % 2 === 0 ? [value] : { a: value };
  return value;
}

/** 5,000 levels, written as raw text: JSON.stringify itself would overflow the stack deep inside fast-check. */
const DEEP = raw(`${'['.repeat(5_000)}1${']'.repeat(5_000)}`);

const BIND_PARAMETER_BOMB = {
  or: Array.from({ length: 70 }, () => ({
    field: 'Name',
    op: 'in',
    value: Array.from({ length: 1_000 }, (_, i) => i),
  })),
};

/** Hostile values any member may receive: wrong types, control and unpaired-surrogate text, huge and odd numbers, nesting. */
export const HOSTILE_VALUES: readonly unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  '',
  ' ',
  [],
  {},
  [null],
  { '': null },
  '\u0000',
  'a\u0000b',
  'a\ud800b',
  '\udc00',
  '\ud83d',
  'x'.repeat(10_000),
  '😀'.repeat(300),
  '\u202egnp.exe',
  'e\u0301',
  "' OR 1=1 --",
  '"; DROP TABLE users; --',
  '../../etc/passwd',
  '%00',
  '${jndi:x}',
  '<script>alert(1)</script>',
  'NaN',
  'Infinity',
  '-Infinity',
  '-0',
  '1e309',
  '0x1F',
  ' 1',
  '1_000',
  '9007199254740993',
  '2026-02-30T25:61:00Z',
  raw('1e400'),
  raw('-1e400'),
  raw('-0'),
  raw('123456789012345678901234567890'),
  raw('1E-400'),
  2 ** 31,
  2 ** 53 + 2,
  -(2 ** 63),
  1e308,
  JSON.parse('{"__proto__":{"polluted":true}}'),
  { constructor: { prototype: { polluted: true } } },
  nested(70),
  DEEP,
  BIND_PARAMETER_BOMB,
];

const HOSTILE_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  '',
  '\u0000',
  'a\ud800',
  'x'.repeat(300),
  'extra',
  '$where',
];

const hostile = fc.constantFrom(...HOSTILE_VALUES);

/** `arbitrary` once in `every` values, else null (fc.option's `freq` is the other way round: 1 in freq is nil). */
export function rarely<T>(arbitrary: fc.Arbitrary<T>, every: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: every - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary });
}

interface Context {
  root: JsonSchema;
  hints: Hints;
  depth: number;
  /** Whether hostile values and extra members are mixed in, or only what the schema and the hints allow. */
  hostile: boolean;
  /** The OpenAPI document, for `#/components/…` references. */
  document: JsonSchema;
}

/** A `$ref`: `#` and `#/$defs/…` within the schema itself, any other `#/…` pointer within the OpenAPI document. */
function resolve(schema: JsonSchema, context: Context): JsonSchema {
  if (typeof schema.$ref !== 'string') return schema;
  if (schema.$ref === '#') return context.root;
  const pointer = schema.$ref
    .replace(/^#\//, '')
    .split('/')
    .map((part: string) => part.replace(/~1/g, '/').replace(/~0/g, '~'));
  const base = pointer[0] === '$defs' || pointer[0] === 'definitions' ? context.root : context.document;
  let target: any = base;
  for (const part of pointer) target = target?.[part];
  return target && typeof target === 'object' ? resolve(target, context) : {};
}

function mentionsRef(schema: JsonSchema): boolean {
  return JSON.stringify(schema).includes('"$ref"');
}

const plainStrings = new Map<string, fc.Arbitrary<string>[]>();

/**
 * Any text and any binary-unit text within the lengths, built once per length pair: building an `fc.string` costs
 * ~1 ms (it tokenizes its built-in dangerous strings) and the document asks for a few hundred.
 */
function plainStringsOf(minLength: number, maxLength: number): fc.Arbitrary<string>[] {
  const key = `${minLength}:${maxLength}`;
  let strings = plainStrings.get(key);
  if (!strings) {
    strings = [fc.string({ minLength, maxLength }), fc.string({ minLength, maxLength, unit: 'binary' })];
    plainStrings.set(key, strings);
  }
  return strings;
}

const matchingStrings = new Map<string, fc.Arbitrary<string>>();

/** Text matching a pattern, built once per pattern: the document repeats the id pattern ~500 times. */
function matchingStringsOf(pattern: string): fc.Arbitrary<string> {
  let strings = matchingStrings.get(pattern);
  if (!strings) {
    strings = fc.stringMatching(new RegExp(pattern));
    matchingStrings.set(pattern, strings);
  }
  return strings;
}

function stringArbitrary(schema: JsonSchema, hostileMode: boolean): fc.Arbitrary<unknown> {
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  if (schema.const !== undefined) return fc.constant(schema.const);
  const min = schema.minLength ?? 0;
  const max = Math.min(schema.maxLength ?? 40, Math.max(min, 40));
  const choices: fc.Arbitrary<unknown>[] = [];
  if (schema.format === 'date-time')
    choices.push(
      fc
        .date({ min: new Date('1900-01-01'), max: new Date('2200-01-01'), noInvalidDate: true })
        .map((d) => d.toISOString()),
    );
  else if (schema.format === 'date')
    choices.push(
      fc
        .date({ min: new Date('1900-01-01'), max: new Date('2200-01-01'), noInvalidDate: true })
        .map((d) => d.toISOString().slice(0, 10)),
    );
  else if (schema.format === 'email') choices.push(fc.emailAddress());
  else if (schema.format === 'uri' || schema.format === 'url') choices.push(fc.webUrl());
  else if (typeof schema.pattern === 'string') {
    try {
      choices.push(
        matchingStringsOf(schema.pattern).filter(
          (text) => text.length >= min && text.length <= (schema.maxLength ?? Infinity),
        ),
      );
    } catch {
      // a pattern fast-check cannot invert is covered by the plain strings below
    }
  }
  if (choices.length === 0) choices.push(...plainStringsOf(min, max));
  const boundary = [
    min,
    Math.max(0, min - 1),
    ...(schema.maxLength === undefined ? [] : [schema.maxLength, schema.maxLength + 1]),
  ];
  const valid = fc.oneof(...choices);
  return fc.oneof(
    { weight: 8, arbitrary: valid },
    { weight: 1, arbitrary: fc.constantFrom(...boundary).map((length) => 'é'.repeat(length)) },
    // Text that is valid but for one character (U+0000, an unpaired surrogate): it passes length and pattern checks.
    ...(hostileMode
      ? [
          {
            weight: 4,
            arbitrary: fc
              .tuple(valid, fc.constantFrom('\u0000', '\ud800', '\udfff'))
              .map(([text, bad]) => `${String(text).slice(0, -1)}${bad}`),
          },
        ]
      : []),
  );
}

function numberArbitrary(schema: JsonSchema): fc.Arbitrary<unknown> {
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  const safe = (value: unknown, fallback: number) =>
    typeof value === 'number' && Number.isSafeInteger(value) ? value : fallback;
  const min = safe(
    schema.minimum ?? (typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : undefined),
    -1_000_000,
  );
  const max = safe(
    schema.maximum ?? (typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - 1 : undefined),
    1_000_000,
  );
  const lo = Math.min(min, max);
  const hi = Math.max(min, max);
  const valid =
    schema.type === 'integer'
      ? fc.integer({ min: lo, max: hi })
      : fc.double({ min: lo, max: hi, noNaN: true, noDefaultInfinity: true });
  const boundary = fc.constantFrom(lo, hi, lo - 1, hi + 1, 0, -1, 0.5, 2 ** 31, Number.MAX_SAFE_INTEGER + 2);
  return fc.oneof({ weight: 6, arbitrary: valid }, { weight: 2, arbitrary: boundary });
}

function objectArbitrary(schema: JsonSchema, context: Context): fc.Arbitrary<unknown> {
  const properties: Record<string, JsonSchema> = schema.properties ?? {};
  const required = new Set<string>(schema.required ?? []);
  const entries = Object.entries(properties).map(([name, member]) => ({
    name,
    value: valueFor(member, { ...context, depth: context.depth + 1 }, name),
    required: required.has(name),
  }));
  const record = fc
    .tuple(...entries.map((entry) => fc.tuple(fc.constant(entry), fc.integer({ min: 0, max: 19 }))))
    .chain((picked) =>
      fc.tuple(
        ...picked.map(([entry, dice]) => {
          // Required members are nearly always present, optional ones half the time.
          const present = entry.required ? dice !== 0 : dice < 10;
          return present ? entry.value.map((value) => [entry.name, value] as const) : fc.constant(null);
        }),
      ),
    );
  const additional =
    schema.additionalProperties && typeof schema.additionalProperties === 'object'
      ? fc.dictionary(
          keyArbitrary(context.hints, schema.propertyNames),
          valueFor(schema.additionalProperties, { ...context, depth: context.depth + 1 }, '*'),
          { maxKeys: 4 },
        )
      : fc.constant({});
  const extra = context.hostile ? rarely(fc.tuple(fc.constantFrom(...HOSTILE_KEYS), hostile), 12) : fc.constant(null);
  return fc.tuple(entries.length === 0 ? fc.constant([]) : record, additional, extra).map(([members, more, odd]) => {
    const object: Record<string, unknown> = { ...(more as object) };
    for (const member of members) if (member) object[member[0]] = member[1];
    if (odd)
      Object.defineProperty(object, odd[0], { value: odd[1], enumerable: true, writable: true, configurable: true });
    return object;
  });
}

function keyArbitrary(hints: Hints, propertyNames: JsonSchema | undefined): fc.Arbitrary<string> {
  const known = (hints('field') ?? []).filter((value): value is string => typeof value === 'string');
  return fc.oneof(
    { weight: 4, arbitrary: known.length > 0 ? fc.constantFrom(...known) : fc.string() },
    {
      weight: 1,
      arbitrary: propertyNames?.pattern ? fc.stringMatching(new RegExp(propertyNames.pattern)) : fc.string(),
    },
    { weight: 1, arbitrary: fc.constantFrom(...HOSTILE_KEYS) },
  );
}

function arrayArbitrary(schema: JsonSchema, context: Context): fc.Arbitrary<unknown> {
  const minLength = schema.minItems ?? 0;
  const maxLength = Math.min(schema.maxItems ?? 4, Math.max(minLength, 4));
  if (Array.isArray(schema.prefixItems)) {
    return fc.tuple(
      ...schema.prefixItems.map((item: JsonSchema) => valueFor(item, { ...context, depth: context.depth + 1 }, '*')),
    );
  }
  const item =
    context.depth > 4 && schema.items && mentionsRef(schema.items)
      ? fc.constant(null)
      : valueFor(schema.items ?? {}, { ...context, depth: context.depth + 1 }, '*');
  const boundary =
    schema.maxItems === undefined
      ? []
      : [fc.array(item, { minLength: schema.maxItems + 1, maxLength: schema.maxItems + 1 })];
  return fc.oneof(
    { weight: 8, arbitrary: fc.array(item, { minLength, maxLength }) },
    ...boundary.map((arbitrary) => ({ weight: 1, arbitrary })),
  );
}

function byType(schema: JsonSchema, context: Context): fc.Arbitrary<unknown> {
  const schemaResolved = resolve(schema, context);
  const variants: JsonSchema[] | undefined = schemaResolved.anyOf ?? schemaResolved.oneOf;
  if (variants) {
    // Past the depth budget, recursive branches (a filter's `and`/`or`) give way to their leaves.
    const usable = context.depth > 4 ? variants.filter((variant) => !mentionsRef(variant)) : variants;
    return fc.oneof(...(usable.length > 0 ? usable : variants.slice(0, 1)).map((variant) => byType(variant, context)));
  }
  if (schemaResolved.allOf) return byType(Object.assign({}, ...schemaResolved.allOf), context);
  if (schemaResolved.const !== undefined) return fc.constant(schemaResolved.const);
  if (Array.isArray(schemaResolved.enum)) return fc.constantFrom(...schemaResolved.enum);
  const type = Array.isArray(schemaResolved.type) ? schemaResolved.type : [schemaResolved.type];
  const arbitraries = type.map((name: string | undefined) => {
    switch (name) {
      case 'string':
        return stringArbitrary(schemaResolved, context.hostile);
      case 'integer':
      case 'number':
        return numberArbitrary(schemaResolved);
      case 'boolean':
        return fc.boolean();
      case 'null':
        return fc.constant(null);
      case 'array':
        return arrayArbitrary(schemaResolved, context);
      case 'object':
        return objectArbitrary(schemaResolved, context);
      // Any JSON (a cell, an option): sometimes one nested far deeper than any limit.
      default:
        return context.hostile
          ? fc.oneof(
              { weight: 9, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
              { weight: 1, arbitrary: fc.constant(DEEP) },
            )
          : fc.jsonValue({ maxDepth: 2 });
    }
  });
  return fc.oneof(...arbitraries);
}

/**
 * A value for one schema node: mostly what the schema allows (or, when `hints` knows the member's name, a real
 * value such as an existing field id), sometimes a boundary, sometimes something hostile.
 */
export function valueFor(schema: JsonSchema, context: Context, name: string): fc.Arbitrary<unknown> {
  // Recursion through a member that is itself the schema (not through an array) stops here.
  if (context.depth > 8) return fc.constant(null);
  const known = context.hints(name);
  const choices: { weight: number; arbitrary: fc.Arbitrary<unknown> }[] = [
    { weight: known ? 3 : 8, arbitrary: byType(schema, context) },
    ...(context.hostile ? [{ weight: 1, arbitrary: hostile }] : []),
  ];
  if (known && known.length > 0) choices.push({ weight: 6, arbitrary: fc.constantFrom(...known) });
  return fc.oneof(...choices);
}

export function schemaArbitrary(
  schema: JsonSchema,
  hints: Hints,
  options: { hostile: boolean; name?: string; document?: JsonSchema },
): fc.Arbitrary<unknown> {
  return valueFor(
    schema,
    { root: schema, hints, depth: 0, hostile: options.hostile, document: options.document ?? schema },
    options.name ?? '',
  );
}

/** JSON text of a generated value, with RAW markers written as the raw number text they stand for. */
export function bodyText(value: unknown): string {
  return JSON.stringify(value).replace(new RegExp(`"${RAW}([^"]*)"`, 'g'), '$1');
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function depthOf(value: unknown, limit: number): number {
  let depth = 0;
  let level: unknown[] = [value];
  while (level.length > 0 && depth <= limit) {
    depth += 1;
    level = level.flatMap((item) => (item !== null && typeof item === 'object' ? Object.values(item) : []));
  }
  return depth;
}

/** Every value inside a generated one, iteratively (a 5,000-level value would overflow a recursive walk). */
function* walk(value: unknown): Generator<unknown> {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    yield item;
    if (item !== null && typeof item === 'object') {
      for (const [key, member] of Object.entries(item)) stack.push(key, member);
    }
  }
}

const containsBindParameterBomb = (value: unknown) => [...walk(value)].includes(BIND_PARAMETER_BOMB);

/** Whether any string (member names included) in a generated value satisfies `test`. */
const anyText = (value: unknown, test: (text: string) => boolean) =>
  [...walk(value)].some((item) => typeof item === 'string' && test(item));

/**
 * The classes of bad input that other branches of issue 18 fix (hygiene: U+0000, unpaired surrogates, deep
 * nesting, URLs and headers over 16 KB; capacity: filters over 65,535 bind parameters). A request in one of them is
 * still generated; `FUZZ_EXCLUDE_KNOWN=1` skips them when hunting for other bugs before those branches are merged.
 */
export function knownClasses(parts: { values: unknown[]; texts: string[] }): string[] {
  const classes = new Set<string>();
  const texts = parts.texts;
  const hasNul = (text: string) => text.includes('\u0000');
  if (parts.values.some((value) => anyText(value, hasNul)) || texts.some((text) => hasNul(text) || /%00/i.test(text)))
    classes.add('nul');
  if (
    parts.values.some((value) => anyText(value, (text) => LONE_SURROGATE.test(text))) ||
    texts.some((text) => /%ED%[AB]/i.test(text))
  )
    classes.add('surrogate');
  if (parts.values.some((value) => depthOf(value, 64) > 64) || texts.some((text) => text.includes('['.repeat(65))))
    classes.add('deep-nesting');
  if (texts.some((text) => text.length > 15_000)) classes.add('oversized-url-or-header');
  if (parts.values.some((value) => containsBindParameterBomb(value))) classes.add('bind-parameters');
  return [...classes];
}

/** encodeURIComponent that writes an unpaired surrogate as its three WTF-8 bytes (`%ED%A0%80`) instead of throwing. */
export function encodeLoosely(text: string): string {
  return text.replace(/[\s\S]/gu, (char) => {
    const code = char.charCodeAt(0);
    if (char.length === 1 && code >= 0xd800 && code <= 0xdfff) {
      return [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((byte) => `%${byte.toString(16).toUpperCase()}`)
        .join('');
    }
    return encodeURIComponent(char);
  });
}
