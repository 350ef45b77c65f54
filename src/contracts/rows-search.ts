import { z } from 'zod';
import { isStorableText } from '../data/field-types.ts';
import { MAX_SEARCH_LENGTH, MAX_SEARCH_WORDS, searchWords } from '../data/search.ts';

/** Search text of GET …/rows, POST …/rows/query and `rows(search:)`, and POST …/rows/similar (issue 28). */
export const SearchText = z
  .string()
  .min(1)
  .max(MAX_SEARCH_LENGTH)
  .refine(isStorableText, 'must not contain U+0000 or an unpaired surrogate')
  .refine((text) => text.trim().length > 0, 'must contain a word')
  .refine((text) => searchWords(text).length <= MAX_SEARCH_WORDS, `must have at most ${MAX_SEARCH_WORDS} words`)
  .describe('rows whose text, long text, e-mail, URL and select fields contain every word (case and accents ignored)');

export const MAX_SIMILAR_LIMIT = 100;

export const SimilarRowsBody = z.strictObject({
  fieldId: z
    .string()
    .min(1)
    .max(64)
    .describe('a text-like field (text, longText, email, url, select), by id or exact name'),
  value: z.string().min(1).max(1000).refine(isStorableText, 'must not contain U+0000 or an unpaired surrogate'),
  limit: z.int().min(1).max(MAX_SIMILAR_LIMIT).optional().describe('default 10'),
  threshold: z.number().min(0).max(1).optional().describe('lowest trigram similarity answered, default 0.3'),
});
export type SimilarRowsBody = z.infer<typeof SimilarRowsBody>;

export const SimilarRowResponse = <Row extends z.ZodType>(row: Row) =>
  z.strictObject({ row, score: z.number().min(0).max(1) });
export const SimilarRowsResponse = <Row extends z.ZodType>(row: Row) =>
  z.strictObject({ data: z.array(SimilarRowResponse(row)).max(MAX_SIMILAR_LIMIT) });
