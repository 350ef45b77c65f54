import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../kernel/formats.ts';
import { ResourceName } from './resources.ts';

/** The databases domain's contract: what REST, GraphQL and OpenAPI read for its operations. No side effects. */

/** POST /v1/orgs/{orgId}/databases and `createDatabase(input:)`. */
export const CreateDatabaseBody = z.strictObject({ name: ResourceName });
export type CreateDatabaseBody = z.infer<typeof CreateDatabaseBody>;

/** PATCH …/databases/{databaseId} and `updateDatabase(input:)`. */
export const UpdateDatabaseBody = z.strictObject({ expectedVersion: VersionString, name: ResourceName });
export type UpdateDatabaseBody = z.infer<typeof UpdateDatabaseBody>;

export const DatabaseResponse = z.strictObject({
  id: Id,
  orgId: Id,
  name: z.string().min(1).max(120),
  state: z.enum(['active']),
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
