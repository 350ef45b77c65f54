import { z } from 'zod';
import { VersionString } from '../kernel/formats.ts';

/** What the named, versioned resources of an org (databases, tables) share in their contracts. No side effects. */

/** The name of a database or table: trimmed, 1..120 characters, unique in its parent ignoring case. */
export const ResourceName = z.string().trim().min(1).max(120);

/** DELETE of a versioned resource: refused unless it is still at `expectedVersion` (409 ROW_VERSION_CONFLICT). */
export const DeleteBody = z.strictObject({ expectedVersion: VersionString });
export type DeleteBody = z.infer<typeof DeleteBody>;
