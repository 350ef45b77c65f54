import { recogniseFailure } from '../../data/failures.ts';
import { DomainError } from '../../kernel/errors.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';

/** A database refusal of a row write, as the domain error that tells the client which rule it broke. */
export function failureToDomainError(schema: TableSchema, error: unknown): DomainError | null {
  const failure = recogniseFailure(error);
  if (!failure) return null;
  const namesOf = (fieldIds: readonly string[]) => fieldIds.map((id) => schema.fieldsById.get(id)?.name ?? id);
  switch (failure.kind) {
    case 'unique': {
      const rule = schema.uniqueRules.find((candidate) => candidate.id === failure.ruleId);
      const fieldIds = rule?.fieldIds ?? [];
      return new DomainError(
        'UNIQUE_CONFLICT',
        `Another row already has these values in ${namesOf(fieldIds).join(', ')}.`,
        {
          details: { ruleId: failure.ruleId, fieldIds, fieldNames: namesOf(fieldIds) },
        },
      );
    }
    case 'foreignKey': {
      const key = schema.foreignKeys.find((candidate) => candidate.id === failure.foreignKeyId);
      if (!key) {
        // The violated key belongs to another table: this row is still referenced from there.
        return new DomainError('FOREIGN_KEY_CONFLICT', 'Rows of another table still reference this row.', {
          details: { foreignKeyId: failure.foreignKeyId },
        });
      }
      return new DomainError(
        'FOREIGN_KEY_CONFLICT',
        `No row of ${key.referencedTableName} has these values in ${key.referencedFieldNames.join(', ')}.`,
        {
          details: {
            foreignKeyId: key.id,
            fieldIds: key.fieldIds,
            fieldNames: namesOf(key.fieldIds),
            referencedTableId: key.referencedTableId,
          },
        },
      );
    }
    case 'sequenceExhausted': {
      const fieldIds = schema.fields.filter((field) => field.type === 'autoNumber').map((field) => field.id);
      return new DomainError(
        'AUTO_INCREMENT_EXHAUSTED',
        'An autoNumber field has used up its range; no more rows can be numbered.',
        {
          details: { fieldIds, fieldNames: namesOf(fieldIds) },
        },
      );
    }
    case 'tableFull':
      return null; // the caller knows the limit it asked for (rows.ts)
    case 'schemaChanged':
      return new DomainError(
        'SCHEMA_VERSION_CONFLICT',
        'The table’s schema changed while the row was being written; read its schema again and retry.',
        {
          details: { expectedSchemaVersion: schema.schemaVersion },
        },
      );
  }
}
