import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import {
  copyHistoryIn,
  copyRowsIn,
  dropSchemaIfExists,
  EXACT_TEXT_SETTINGS,
  remapHistoryFields,
  rewriteIdentifiers,
  setSequenceState,
} from '../../../data/backup.ts';
import { createDatabaseSchema, createTable } from '../../../data/ddl.ts';
import type { FieldDefinition, FieldType } from '../../../data/field-types.ts';
import { schemaOf } from '../../../data/identifiers.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { SUSPEND_CHANGE_RECORDING } from '../../../catalog/changes.ts';
import type { BackupDestination } from './destination.ts';
import { historyFileOf, rowsFileOf } from './archive-format.ts';
import { mapped, type IdMap } from './remap.ts';
import type { VerifiedBackup } from './verify.ts';

/**
 * Builds a backup's content in a staging schema that no catalog row points at, in one transaction: killed
 * half-way, PostgreSQL rolls the whole build back and nothing is left to see. The swap (restore.ts) then makes it
 * the database's content in one more transaction. Constraints come after the rows, as pg_restore does them.
 */

function fieldsOf(verified: VerifiedBackup, tableId: string, ids: IdMap): FieldDefinition[] {
  return (verified.catalog.parts.fields ?? [])
    .filter((field) => field.table_id === tableId)
    .sort((a, b) => Number(a.position) - Number(b.position))
    .map((field) => ({
      id: mapped(ids, String(field.id)),
      name: String(field.name),
      type: field.type as FieldType,
      required: Boolean(field.required),
      options: field.options as Record<string, unknown>,
      position: Number(field.position),
    }));
}

async function copyInto(
  client: pg.PoolClient,
  destination: BackupDestination,
  verified: VerifiedBackup,
  path: string,
  sql: string,
): Promise<void> {
  const source = await destination.read(`${verified.row.location}/${path}`);
  if (!source)
    throw new DomainError('ARTIFACT_UNVERIFIED', `The backup object ${path} disappeared during the restore.`, {
      details: { path },
    });
  await pipeline(source as Readable, createGunzip(), client.query(copyFrom(sql)));
}

export async function buildStaging(
  pool: pg.Pool,
  destination: BackupDestination,
  verified: VerifiedBackup,
  stagingId: string,
  ids: IdMap,
  beforeTable: () => void,
): Promise<void> {
  const client = await pool.connect();
  const databaseId = verified.catalog.database.id;
  // Rewrites DDL that PostgreSQL printed for the backed-up schema so that it names the staging schema's objects.
  const ddlIds = new Map([...ids, [databaseId, stagingId]]);
  try {
    await client.query(['BEGIN', ...EXACT_TEXT_SETTINGS, SUSPEND_CHANGE_RECORDING].join('; '));
    await client.query(dropSchemaIfExists(stagingId).sql);
    for (const statement of createDatabaseSchema(stagingId)) await client.query(statement.sql, statement.params);
    for (const table of verified.manifest.tables) {
      beforeTable();
      const tableId = mapped(ids, table.id);
      for (const statement of createTable(stagingId, tableId, fieldsOf(verified, table.id, ids)))
        await client.query(statement.sql);
      await copyInto(
        client,
        destination,
        verified,
        rowsFileOf(table.id),
        copyRowsIn(
          stagingId,
          tableId,
          table.fieldIds.map((id) => mapped(ids, id)),
        ),
      );
      await copyInto(client, destination, verified, historyFileOf(table.id), copyHistoryIn(stagingId, tableId));
      if (ids.size > 0) {
        const remap = remapHistoryFields(
          stagingId,
          tableId,
          table.fieldIds,
          table.fieldIds.map((id) => mapped(ids, id)),
        );
        await client.query(remap.sql, remap.params as unknown[]);
      }
    }
    for (const sequence of verified.catalog.sequences) {
      const statement = setSequenceState(
        stagingId,
        mapped(ids, sequence.fieldId),
        sequence.lastValue,
        sequence.isCalled,
      );
      await client.query(statement.sql, statement.params as unknown[]);
    }
    // In the order the backup listed them: unique indexes before the foreign keys that reference them.
    for (const constraint of verified.catalog.constraints) {
      const ddl = rewriteIdentifiers(constraint.definition, ddlIds);
      if (constraint.kind !== 'exclusion' && constraint.kind !== 'foreignKey') await client.query(ddl);
      else {
        const table = `${schemaOf(stagingId)}.${rewriteIdentifiers(`"${constraint.tableName}"`, ddlIds)}`;
        await client.query(
          `ALTER TABLE ${table} ADD CONSTRAINT ${rewriteIdentifiers(`"${constraint.name}"`, ddlIds)} ${ddl}`,
        );
      }
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
