import { resolveField } from '../../data/filter.ts';
import { rowRead, type RowJsonRecord, type RowRead } from '../../data/rows.ts';
import { similarRows, TRIGRAM_OPERATOR_THRESHOLD } from '../../data/search.ts';
import { validationFailed } from '../../kernel/errors.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';
import { SimilarRowsBody } from '../../contracts/rows-search.ts';
import { builder } from '../server/builder.ts';
import { heavyRead } from '../server/query-limits.ts';
import { dataPlane, type Context } from '../server/context.ts';
import { addressOf, tableAddressArgs } from '../tables/address.ts';
import { rowFromTable } from './row-origin.ts';
import { Row } from './rows.ts';
import { currentSchema } from '../tables/schema-endpoint.ts';

/**
 * POST …/rows/similar and `similarRows` (issue 28): the rows whose field reads most like a value, by trigram
 * similarity of the folded texts (case and accents ignored), with their scores: "Acme Corp." finds "ACME
 * Corporation". The check a steward runs before creating a supplier. Search itself rides on the row reads
 * (`search` of GET …/rows, src/graph/rows/row-filter.ts).
 */
export type SimilarRowShape = { row: RowRead; score: number };

const SIMILAR_TYPES = ['text', 'longText', 'email', 'url', 'select'];
const DEFAULT_SIMILAR_LIMIT = 10;

export async function similarInTable(
  context: Context,
  schema: TableSchema,
  body: SimilarRowsBody,
): Promise<{ data: SimilarRowShape[] }> {
  const field = resolveField(schema.fields, body.fieldId);
  if (!field)
    throw validationFailed([
      {
        path: ['fieldId'],
        message: `must be the id or name of a field of this table; ${JSON.stringify(body.fieldId)} is neither`,
      },
    ]);
  if (!SIMILAR_TYPES.includes(field.type)) {
    throw validationFailed([
      {
        path: ['fieldId'],
        message: `similarity compares text: use a ${SIMILAR_TYPES.join(', ')} field, not a ${field.type} field`,
        fieldId: field.id,
      },
    ]);
  }
  const statement = similarRows(schema, {
    field,
    value: body.value,
    threshold: body.threshold ?? TRIGRAM_OPERATOR_THRESHOLD,
    limit: body.limit ?? DEFAULT_SIMILAR_LIMIT,
    shown: schema.fields,
  });
  const records = await dataPlane(context).query<RowJsonRecord & { score: number }>(statement.sql, statement.params);
  return {
    data: records.map((record) => ({
      row: rowFromTable(schema, rowRead(record)),
      score: record.score,
    })),
  };
}

const SimilarRow = builder.objectRef<SimilarRowShape>('SimilarRow').implement({
  description:
    'A row and how similar its field is to the value: 1 is identical (once case and accents are ignored), 0 shares nothing.',
  fields: (t) => ({
    row: t.field({ type: Row, resolve: (result) => result.row }),
    score: t.float({ resolve: (result) => result.score }),
  }),
});

const SimilarRows = builder.objectRef<{ data: SimilarRowShape[] }>('SimilarRows').implement({
  description: 'The most similar rows, best first (then by row id).',
  fields: (t) => ({ data: t.field({ type: [SimilarRow], resolve: (result) => result.data }) }),
});

const SimilarRowsInput = builder
  .inputType('SimilarRowsInput', {
    fields: (t) => ({
      fieldId: t.string({ required: true }),
      value: t.string({ required: true }),
      limit: t.int({ description: '1..100, default 10' }),
      threshold: t.float({ description: 'lowest similarity answered, 0..1, default 0.3' }),
    }),
  })
  .validate(SimilarRowsBody);

builder.queryFields((t) => ({
  similarRows: t.field({
    type: SimilarRows,
    description:
      'Rows whose text field is most similar to a value (trigram similarity, case and accents ignored), with scores.',
    args: { ...tableAddressArgs, input: t.arg({ type: SimilarRowsInput, required: true }) },
    extensions: heavyRead(),
    authScopes: (_root, { orgId }) => ({ org: { orgId: String(orgId), capability: 'read' }, oauth: 'rows:read' }),
    resolve: async (_root, { input, ...args }, context) =>
      similarInTable(context, await currentSchema(context, addressOf(args)), input),
  }),
}));
