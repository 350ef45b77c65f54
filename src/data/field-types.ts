import { z } from 'zod';
import { isId } from '../kernel/ids.ts';
import { TIMESTAMP_PATTERN } from '../kernel/formats.ts';

/**
 * The field types of a table: for each, the options it accepts, the PostgreSQL column that stores it, how a cell
 * value is validated (typed policy: no coercion, no silent rounding, no NaN/Infinity) and how it is read back.
 * Cell values on the wire are plain JSON; `docs/decisions/data-plane.md` lists each type's JSON form.
 */
export const FIELD_TYPES = [
  'text',
  'longText',
  'integer',
  'number',
  'boolean',
  'date',
  'datetime',
  'email',
  'url',
  'select',
  'multiSelect',
  'json',
  'autoNumber',
] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/** Fields a table may hold, at creation and through `add_field` alike (Airtable's limit too; PostgreSQL's is 1,600). */
export const MAX_FIELDS_PER_TABLE = 500;

export type CellValue = string | number | boolean | null | CellValue[] | { [key: string]: CellValue };

/** Filter/sort families: which operators and comparisons make sense for a type (src/data/filter.ts). */
export type ValueFamily = 'string' | 'number' | 'boolean' | 'date' | 'datetime' | 'array' | 'json';

/** JavaScript numbers are exact up to 2^53 - 1, so integers beyond it could not round-trip through JSON. */
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const SafeInteger = z.number().int().min(-MAX_SAFE).max(MAX_SAFE);

/**
 * Text PostgreSQL can store: no U+0000, and well-formed UTF-16 (an unpaired surrogate, which JSON allows as an
 * escape, cannot become UTF-8). Refusing them here turns a database error into a 422.
 */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
export const isStorableText = (value: string): boolean => !UNSTORABLE.test(value);
export const UNSTORABLE_TEXT = 'must not contain U+0000 or an unpaired surrogate (they cannot be stored)';
const hasNul = (value: string) => !isStorableText(value);
const codePoints = (value: string) => [...value].length;

function boundedText(maxLength: number) {
  return z
    .string()
    .refine((value) => !hasNul(value), UNSTORABLE_TEXT)
    .refine((value) => codePoints(value) <= maxLength, `must be at most ${maxLength} characters`);
}

/** Decimal digits of a finite double's shortest representation: [integer digits, fraction digits]. */
export function decimalDigits(value: number): [number, number] {
  const [mantissa = '', exponentText] = Math.abs(value).toExponential().split('e');
  const exponent = Number(exponentText);
  const significant = mantissa.replace('.', '').replace(/0+$/, '') || '0';
  const integerDigits = Math.max(exponent + 1, 1);
  const fractionDigits = Math.max(significant.length - exponent - 1, 0);
  return [integerDigits, fractionDigits];
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * A proleptic Gregorian date, as JavaScript's Date reckons it, by arithmetic: building a Date for each cell was
 * 4 % of an import preview's CPU (two per datetime cell).
 */
function isCalendarDate(value: string): boolean {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  return day <= (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!);
}

function isUtcTimestamp(value: string): boolean {
  if (!TIMESTAMP_PATTERN.test(value) || !isCalendarDate(value.slice(0, 10))) return false;
  const [hours, minutes, seconds] = value.slice(11, 19).split(':').map(Number);
  return hours! < 24 && minutes! < 60 && seconds! < 60;
}

function jsonDepth(value: unknown): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(jsonDepth));
  if (value !== null && typeof value === 'object') return 1 + Math.max(0, ...Object.values(value).map(jsonDepth));
  return 0;
}

function jsonHasNul(value: unknown): boolean {
  if (typeof value === 'string') return hasNul(value);
  if (Array.isArray(value)) return value.some(jsonHasNul);
  if (value !== null && typeof value === 'object')
    return Object.entries(value).some(([key, item]) => hasNul(key) || jsonHasNul(item));
  return false;
}

/** JSON.parse turns 1e400 into Infinity, which JSON cannot hold: refuse it rather than store null. */
function jsonHasNonFinite(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isFinite(value);
  if (Array.isArray(value)) return value.some(jsonHasNonFinite);
  if (value !== null && typeof value === 'object') return Object.values(value).some(jsonHasNonFinite);
  return false;
}

const utf8Bytes = (value: string) => Buffer.byteLength(value, 'utf8');

/**
 * A JSON document with its object keys in jsonb's order (shorter keys first, then bytewise), so the value a write
 * returns is exactly the value a later read returns.
 */
export function inJsonbOrder(value: CellValue): CellValue {
  if (Array.isArray(value)) return value.map(inJsonbOrder);
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value)
    .map((key) => [key, Buffer.from(key, 'utf8')] as const)
    .sort(([, a], [, b]) => a.length - b.length || Buffer.compare(a, b));
  return Object.fromEntries(keys.map(([key]) => [key, inJsonbOrder(value[key]!)]));
}

const Choices = z
  .array(boundedText(100).pipe(z.string().min(1)))
  .min(1)
  .max(1000)
  .refine((choices) => new Set(choices).size === choices.length, 'choices must be distinct');

const RangeOptions = { min: SafeInteger.optional(), max: SafeInteger.optional() };
const minNotAboveMax = (options: { min?: number | undefined; max?: number | undefined }) =>
  options.min === undefined || options.max === undefined || options.min <= options.max;

/**
 * A text field's default `maxLength`: 255 characters (1,020 bytes at 4 per character) keep a key of one or two
 * default text fields within a btree entry (INDEX_BUDGET_BYTES, 2,600), so a unique rule on them is a btree index that
 * foreign keys can reference and views can sort by index. Longer keys take an explicit maxLength (hashed rule).
 */
export const DEFAULT_TEXT_MAX_LENGTH = 255;

/** Options per type, with their defaults. Each is a strict object: unknown options are a 422. */
export const FIELD_OPTIONS = {
  text: z.strictObject({ maxLength: z.number().int().min(1).max(10_000).default(DEFAULT_TEXT_MAX_LENGTH) }),
  longText: z.strictObject({ maxLength: z.number().int().min(1).max(1_000_000).default(100_000) }),
  integer: z.strictObject(RangeOptions).refine(minNotAboveMax, 'min must not exceed max'),
  number: z
    .strictObject({
      precision: z.number().int().min(1).max(15).default(15),
      scale: z.number().int().min(0).max(14).default(2),
      min: z.number().optional(),
      max: z.number().optional(),
    })
    .refine((options) => options.scale < options.precision, 'scale must be less than precision')
    .refine(minNotAboveMax, 'min must not exceed max'),
  boolean: z.strictObject({}),
  date: z.strictObject({}),
  datetime: z.strictObject({}),
  email: z.strictObject({}),
  url: z.strictObject({}),
  select: z.strictObject({ choices: Choices }),
  multiSelect: z.strictObject({ choices: Choices }),
  json: z.strictObject({
    maxDepth: z.number().int().min(1).max(64).default(16),
    maxBytes: z.number().int().min(1).max(524_288).default(65_536),
  }),
  autoNumber: z
    .strictObject({
      start: z.number().int().min(1).max(MAX_SAFE).default(1),
      max: z.number().int().min(1).max(MAX_SAFE).default(MAX_SAFE),
    })
    .refine((options) => options.start <= options.max, 'start must not exceed max'),
} satisfies Record<FieldType, z.ZodType>;

export type FieldOptions<T extends FieldType = FieldType> = z.output<(typeof FIELD_OPTIONS)[T]>;

/** A field as the data plane sees it: its catalog row with options already resolved to their defaults. */
export interface FieldDefinition {
  id: string;
  name: string;
  type: FieldType;
  required: boolean;
  options: Record<string, unknown>;
  position: number;
}

interface TypeSpec {
  family: ValueFamily;
  /** The PostgreSQL column type. */
  column: (options: any) => string;
  /** Validates a non-null cell and returns its canonical JSON form. */
  value: (options: any) => z.ZodType<CellValue>;
  /** Cast applied to the bound parameter, whose JS value is `toParam(value)`. */
  cast: string;
  /** SQL that reads the column as text (parsed back by `fromText`), so no driver type conversion is involved. */
  read: (column: string) => string;
  fromText: (text: string) => CellValue;
  /** Largest index entry in bytes, or null when the type cannot take part in unique rules and foreign keys. */
  indexBytes: (options: any) => number | null;
  /** Filled by the service, never by a request. */
  generated?: true;
}

const asText = (column: string) => `${column}::text`;
const identity = (text: string): CellValue => text;

const NUMBER_POLICY = 'must be a finite JSON number';

function numberValue(options: FieldOptions<'number'>) {
  const integerDigits = options.precision - options.scale;
  return z
    .number({ error: NUMBER_POLICY })
    .refine(Number.isFinite, NUMBER_POLICY)
    .superRefine((value, context) => {
      const [whole, fraction] = decimalDigits(value);
      if (fraction > options.scale)
        context.addIssue({
          code: 'custom',
          message: `must have at most ${options.scale} decimal places (values are never rounded)`,
        });
      if (whole > integerDigits && Math.abs(value) >= 1)
        context.addIssue({
          code: 'custom',
          message: `must have at most ${integerDigits} digits before the decimal point`,
        });
      if (options.min !== undefined && value < options.min)
        context.addIssue({ code: 'custom', message: `must be at least ${options.min}` });
      if (options.max !== undefined && value > options.max)
        context.addIssue({ code: 'custom', message: `must be at most ${options.max}` });
    });
}

function integerValue(options: FieldOptions<'integer'>) {
  let schema = z
    .number({ error: 'must be a JSON integer' })
    .int('must be an integer')
    .min(-MAX_SAFE, 'must be a safe integer (|n| < 2^53)')
    .max(MAX_SAFE, 'must be a safe integer (|n| < 2^53)');
  if (options.min !== undefined) schema = schema.min(options.min, `must be at least ${options.min}`);
  if (options.max !== undefined) schema = schema.max(options.max, `must be at most ${options.max}`);
  return schema;
}

function choiceValue(options: FieldOptions<'select'>) {
  const allowed = new Set(options.choices);
  return z
    .string({ error: 'must be one of the declared choices' })
    .refine((value) => allowed.has(value), 'must be one of the declared choices');
}

const TYPES: Record<FieldType, TypeSpec> = {
  text: {
    family: 'string',
    column: () => 'text',
    cast: 'text',
    read: asText,
    fromText: identity,
    value: (options: FieldOptions<'text'>) => boundedText(options.maxLength),
    indexBytes: (options: FieldOptions<'text'>) => options.maxLength * 4,
  },
  longText: {
    family: 'string',
    column: () => 'text',
    cast: 'text',
    read: asText,
    fromText: identity,
    value: (options: FieldOptions<'longText'>) => boundedText(options.maxLength),
    indexBytes: () => null,
  },
  integer: {
    family: 'number',
    column: () => 'bigint',
    cast: 'bigint',
    read: asText,
    fromText: Number,
    value: integerValue,
    indexBytes: () => 8,
  },
  number: {
    family: 'number',
    cast: 'numeric',
    read: asText,
    fromText: Number,
    column: (options: FieldOptions<'number'>) => `numeric(${options.precision},${options.scale})`,
    value: numberValue,
    indexBytes: () => 16,
  },
  boolean: {
    family: 'boolean',
    column: () => 'boolean',
    cast: 'boolean',
    read: asText,
    fromText: (text) => text === 'true',
    value: () => z.boolean({ error: 'must be true or false' }),
    indexBytes: () => 1,
  },
  date: {
    family: 'date',
    column: () => 'date',
    cast: 'date',
    fromText: identity,
    read: (column) => `to_char(${column}, 'YYYY-MM-DD')`,
    value: () =>
      z.string({ error: 'must be a date YYYY-MM-DD' }).refine(isCalendarDate, 'must be a calendar date YYYY-MM-DD'),
    indexBytes: () => 4,
  },
  datetime: {
    family: 'datetime',
    column: () => 'timestamptz(3)',
    cast: 'timestamptz',
    fromText: identity,
    read: (column) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
    value: () =>
      z
        .string({ error: 'must be a UTC timestamp' })
        .refine(isUtcTimestamp, 'must be a UTC timestamp YYYY-MM-DDTHH:MM:SS.mmmZ'),
    indexBytes: () => 8,
  },
  email: {
    family: 'string',
    column: () => 'text',
    cast: 'text',
    read: asText,
    fromText: identity,
    value: () =>
      z
        .string({ error: 'must be an e-mail address' })
        .max(254, 'must be at most 254 characters')
        .pipe(z.email('must be an e-mail address')),
    indexBytes: () => 254,
  },
  url: {
    family: 'string',
    column: () => 'text',
    cast: 'text',
    read: asText,
    fromText: identity,
    value: () =>
      z
        .string({ error: 'must be an absolute http(s) URL' })
        .max(2048, 'must be at most 2048 characters')
        .regex(/^[\x21-\x7E]+$/, 'must be ASCII (percent-encode other characters)')
        .pipe(z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' })),
    indexBytes: () => 2048,
  },
  select: {
    family: 'string',
    column: () => 'text',
    cast: 'text',
    read: asText,
    fromText: identity,
    value: choiceValue,
    indexBytes: (options: FieldOptions<'select'>) => Math.max(...options.choices.map(utf8Bytes)),
  },
  multiSelect: {
    family: 'array',
    column: () => 'text[]',
    cast: 'text[]',
    fromText: (text) => JSON.parse(text) as CellValue,
    read: (column) => `array_to_json(${column})::text`,
    value: (options: FieldOptions<'multiSelect'>) =>
      z
        .array(choiceValue(options), { error: 'must be an array of declared choices' })
        .refine((values) => new Set(values).size === values.length, 'must not repeat a choice'),
    indexBytes: () => null,
  },
  json: {
    family: 'json',
    column: () => 'jsonb',
    cast: 'jsonb',
    read: asText,
    fromText: (text) => JSON.parse(text) as CellValue,
    value: (options: FieldOptions<'json'>) =>
      z
        .custom<CellValue>(() => true)
        .superRefine((value, context) => {
          if (jsonDepth(value) > options.maxDepth)
            context.addIssue({ code: 'custom', message: `must nest at most ${options.maxDepth} levels` });
          if (utf8Bytes(JSON.stringify(value)) > options.maxBytes)
            context.addIssue({ code: 'custom', message: `must be at most ${options.maxBytes} bytes as JSON` });
          if (jsonHasNul(value)) context.addIssue({ code: 'custom', message: UNSTORABLE_TEXT });
          if (jsonHasNonFinite(value))
            context.addIssue({ code: 'custom', message: 'must not contain numbers beyond the range of a double' });
        })
        .transform(inJsonbOrder),
    indexBytes: () => null,
  },
  autoNumber: {
    family: 'number',
    column: () => 'bigint',
    cast: 'bigint',
    read: asText,
    fromText: Number,
    generated: true,
    value: () => z.never(),
    indexBytes: () => 8,
  },
};

export function typeSpecOf(type: FieldType): TypeSpec {
  return TYPES[type];
}

/** A field's canonical value validator, built once per schema version (src/catalog/table-schema.ts). */
export function valueSchemaOf(field: FieldDefinition): z.ZodType<CellValue> {
  return TYPES[field.type].value(field.options);
}

/** The JS value bound for a cell: arrays and strings as they are, JSON documents as text, numbers as text. */
export function toParam(field: FieldDefinition, value: CellValue): unknown {
  if (value === null) return null;
  switch (TYPES[field.type].family) {
    case 'json':
      return JSON.stringify(value);
    case 'number':
      return String(value);
    default:
      return value;
  }
}

/** Names may address cells in requests, so they must not be mistaken for field ids. */
export const FieldName = z
  .string()
  .min(1)
  .max(64)
  .refine((name) => name.trim() === name, 'must not start or end with whitespace')
  .refine((name) => !/[\u0000-\u001f\u007f]/.test(name), 'must not contain control characters')
  .refine((name) => !isId(name), 'must not look like a field id (a ULID)');

/** One field in a create-table request: a union discriminated by `type`, so each type's options are checked. */
export const FieldInput = z.discriminatedUnion(
  'type',
  FIELD_TYPES.map((type) =>
    z.strictObject({
      name: FieldName,
      type: z.literal(type),
      required:
        type === 'autoNumber'
          ? z.literal(false, { error: 'autoNumber values are generated; it cannot be required' }).optional()
          : z.boolean().optional(),
      // select and multiSelect have no sensible default: their choices must be declared.
      options: type === 'select' || type === 'multiSelect' ? FIELD_OPTIONS[type] : FIELD_OPTIONS[type].optional(),
    }),
  ) as unknown as [z.ZodObject, ...z.ZodObject[]],
  { error: `type must be one of ${FIELD_TYPES.join(', ')}` },
);

export type FieldInput = {
  name: string;
  type: FieldType;
  required?: boolean | undefined;
  options?: Record<string, unknown> | undefined;
};

/** Options with their defaults applied, as stored in the catalog. */
export function resolvedOptions(
  type: FieldType,
  options: Record<string, unknown> | undefined,
): Record<string, unknown> {
  return FIELD_OPTIONS[type].parse(options ?? {}) as Record<string, unknown>;
}
