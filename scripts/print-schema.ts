import { writeFileSync } from 'node:fs';
import { printedSchema } from '../src/graph/schema.ts';

/** Writes schema.graphql, the printed and sorted Pothos schema that codegen and reviewers read. */
writeFileSync(new URL('../schema.graphql', import.meta.url), printedSchema());
