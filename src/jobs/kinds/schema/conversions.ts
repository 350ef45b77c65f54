import type { FieldDefinition, FieldOptions, FieldType } from '../../../data/field-types.ts';

/**
 * Type conversion as SQL: an expression over the source column that yields the value in the target type, or NULL
 * when the value cannot convert (it never raises, so it is safe inside a trigger on user writes). Values are never
 * rounded or truncated: a value that does not fit the target exactly does not convert. Choice lists are `$n`
 * placeholders, quoted by the server before the expression is inlined into DDL (src/data/ddl.ts quoteLiterals).
 */
export interface ConversionSql {
  sql: string;
  literals: string[];
}

type Target = Pick<FieldDefinition, 'type' | 'options'>;

const TEXT_FAMILY = new Set<FieldType>(['text', 'longText', 'email', 'url', 'select']);
const MAX_SAFE = '9007199254740991';
const INTEGER_TEXT = `'^[+-]?[0-9]{1,16}$'`;
const NUMBER_TEXT = `'^[+-]?([0-9]{1,30}[.]?[0-9]{0,30}|[.][0-9]{1,30})([eE][+-]?[0-9]{1,3})?$'`;

/** The value's text as the API shows it (numbers without trailing zeros, dates and timestamps in spec format). */
function textForm(from: FieldDefinition, source: string): string | null {
  if (TEXT_FAMILY.has(from.type)) return source;
  switch (from.type) {
    case 'integer':
    case 'autoNumber':
    case 'boolean':
    case 'json':
      return `${source}::text`;
    case 'number':
      return `trim_scale(${source})::text`;
    case 'date':
      return `to_char(${source}, 'YYYY-MM-DD')`;
    case 'datetime':
      return `to_char(${source} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    case 'multiSelect':
      return `array_to_string(${source}, ', ')`;
    default:
      return null;
  }
}

function withinRange(value: string, options: { min?: number | undefined; max?: number | undefined }): string {
  const bounds = [`abs(${value}) <= ${MAX_SAFE}`];
  if (options.min !== undefined) bounds.push(`${value} >= ${Number(options.min)}`);
  if (options.max !== undefined) bounds.push(`${value} <= ${Number(options.max)}`);
  return bounds.join(' AND ');
}

/** A numeric value as the target integer, or NULL. */
function toInteger(from: FieldDefinition, source: string, options: FieldOptions<'integer'>): string | null {
  let numeric: string;
  let guard: string;
  if (from.type === 'integer' || from.type === 'autoNumber') [numeric, guard] = [`${source}::numeric`, 'true'];
  else if (from.type === 'number') [numeric, guard] = [source, `${source} = trunc(${source})`];
  else if (from.type === 'boolean') return `CASE WHEN ${source} THEN 1 ELSE 0 END::bigint`;
  else if (TEXT_FAMILY.has(from.type)) [numeric, guard] = [`${source}::numeric`, `${source} ~ ${INTEGER_TEXT}`];
  else return null;
  return `CASE WHEN ${guard} THEN (CASE WHEN ${withinRange(numeric, options)} THEN ${numeric}::bigint END) END`;
}

function toNumber(from: FieldDefinition, source: string, options: FieldOptions<'number'>): string | null {
  let numeric: string;
  let guard = 'true';
  if (from.type === 'integer' || from.type === 'autoNumber') numeric = `${source}::numeric`;
  else if (from.type === 'number') numeric = source;
  else if (TEXT_FAMILY.has(from.type)) [numeric, guard] = [`${source}::numeric`, `${source} ~ ${NUMBER_TEXT}`];
  else return null;
  const fits = [
    `scale(trim_scale(${numeric})) <= ${options.scale}`,
    `abs(${numeric}) < 1e${options.precision - options.scale}`,
    ...(options.min === undefined ? [] : [`${numeric} >= ${Number(options.min)}`]),
    ...(options.max === undefined ? [] : [`${numeric} <= ${Number(options.max)}`]),
  ].join(' AND ');
  return `CASE WHEN ${guard} THEN (CASE WHEN ${fits} THEN ${numeric}::numeric(${options.precision},${options.scale}) END) END`;
}

function toChoice(text: string, choices: readonly string[], literals: string[], asArray: boolean): string {
  const placeholders = choices.map((choice) => {
    literals.push(choice);
    return `$${literals.length}`;
  });
  const value = asArray ? `ARRAY[${text}]::text[]` : text;
  return `CASE WHEN ${text} IN (${placeholders.join(', ')}) THEN ${value} END`;
}

/** The conversion of `from` into `to`, or null when the pair is not supported. */
export function conversionSql(from: FieldDefinition, to: Target, source: string): ConversionSql | null {
  const literals: string[] = [];
  const text = textForm(from, source);
  let sql: string | null = null;
  switch (to.type) {
    case 'text':
    case 'longText': {
      const max = Number((to.options as FieldOptions<'text'>).maxLength);
      sql = text === null ? null : `CASE WHEN char_length(${text}) <= ${max} THEN ${text} END`;
      break;
    }
    case 'integer':
      sql = toInteger(from, source, to.options as FieldOptions<'integer'>);
      break;
    case 'number':
      sql = toNumber(from, source, to.options as FieldOptions<'number'>);
      break;
    case 'boolean':
      if (TEXT_FAMILY.has(from.type)) sql = `CASE lower(${source}) WHEN 'true' THEN true WHEN 'false' THEN false END`;
      else if (from.type === 'integer') sql = `CASE ${source} WHEN 1 THEN true WHEN 0 THEN false END`;
      break;
    case 'date':
      if (TEXT_FAMILY.has(from.type)) sql = `public.wds_try_date(${source})`;
      // Only a timestamp at midnight UTC is exactly a date; any other would lose its time of day.
      else if (from.type === 'datetime')
        sql = `CASE WHEN (${source} AT TIME ZONE 'UTC')::time = time '00:00' THEN (${source} AT TIME ZONE 'UTC')::date END`;
      break;
    case 'datetime':
      if (TEXT_FAMILY.has(from.type)) sql = `public.wds_try_timestamptz(${source})`;
      else if (from.type === 'date') sql = `(${source}::timestamp AT TIME ZONE 'UTC')`;
      break;
    case 'select':
      if (TEXT_FAMILY.has(from.type))
        sql = toChoice(source, (to.options as FieldOptions<'select'>).choices, literals, false);
      break;
    case 'multiSelect':
      if (TEXT_FAMILY.has(from.type))
        sql = toChoice(source, (to.options as FieldOptions<'multiSelect'>).choices, literals, true);
      break;
    case 'json': {
      const json =
        from.type === 'json'
          ? source
          : ['integer', 'boolean', 'multiSelect', 'autoNumber'].includes(from.type)
            ? `to_jsonb(${source})`
            : from.type === 'number'
              ? `to_jsonb(trim_scale(${source}))`
              : text === null
                ? null
                : `to_jsonb(${text})`;
      const max = Number((to.options as FieldOptions<'json'>).maxBytes);
      sql = json === null ? null : `CASE WHEN public.wds_json_bytes(${json}) <= ${max} THEN ${json} END`;
      break;
    }
    default:
      sql = null;
  }
  return sql === null ? null : { sql, literals };
}
