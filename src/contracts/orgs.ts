import { z } from 'zod';
import { Id, Timestamp, VersionString } from '../kernel/formats.ts';

/** The orgs domain's contract: what REST, GraphQL and OpenAPI read for its operations. No side effects. */

export const OrgName = z.string().trim().min(1).max(120);

/** PATCH /v1/orgs/{orgId} and `updateOrg(input:)`. */
export const UpdateOrgBody = z.strictObject({ expectedVersion: VersionString, name: OrgName });
export type UpdateOrgBody = z.infer<typeof UpdateOrgBody>;

export const OrgResponse = z.strictObject({
  id: Id,
  name: z.string().min(1).max(120),
  version: VersionString,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
