import { readFileSync } from 'node:fs';
import { generate } from '@graphql-codegen/cli';
import { describe, expect, it } from 'vitest';
import config from '../codegen.ts';

/**
 * Generated code is committed, so a reviewer reads what runs; these tests fail when it is stale. schema.graphql is
 * checked against the printed Pothos schema in test/graphql.test.ts (`npm run schema:print`).
 */
describe('src/generated/documents.ts', () => {
  it('is what `npm run codegen` prints from schema.graphql and src/http/rest/operations/*.graphql', async () => {
    const [output] = await generate({ ...config, silent: true }, false);
    expect(output?.filename).toBe('src/generated/documents.ts');
    expect(readFileSync(new URL('../src/generated/documents.ts', import.meta.url), 'utf8')).toBe(output?.content);
  }, 60_000);
});
