import type { JobKind } from '../../jobs/engine/kinds.ts';
import type { Capability, OAuthScope } from '../../kernel/authority.ts';
import type { OrgAuthority } from '../../kernel/caller.ts';
import { requireCapability, requireScope } from '../server/guards.ts';
import { requireFreshStrongAuth } from '../server/step-up.ts';
import type { Context } from '../server/context.ts';

/**
 * What starting a job of each kind needs: the org capability, the OAuth scope and whether a browser session must
 * have stepped up. The mutations that start a job and `retryJob` read this one table, so a retry is a new start
 * (issue 26 §1): a demoted admin, a non-admin key of the creator or a token holding only `jobs:retry` cannot re-run
 * what they could not start. No kind needs step-up today; the column is here so that adding it to a start adds it
 * to the retry too.
 */
export interface StartAuthority {
  capability: Capability;
  scope: OAuthScope;
  stepUp: boolean;
}

const of = (capability: Capability, scope: OAuthScope, stepUp = false): StartAuthority => ({
  capability,
  scope,
  stepUp,
});

export const START_AUTHORITY: Readonly<Record<JobKind, StartAuthority>> = {
  previewImportRows: of('write', 'rows:write'),
  importRows: of('write', 'rows:write'),
  createField: of('manage', 'schema:manage'),
  updateField: of('manage', 'schema:manage'),
  deleteField: of('manage', 'schema:manage'),
  reorderFields: of('manage', 'schema:manage'),
  applySchemaChange: of('manage', 'schema:manage'),
  createUniqueRule: of('manage', 'schema:manage'),
  createForeignKey: of('manage', 'schema:manage'),
  deleteUniqueRule: of('manage', 'schema:manage'),
  // Purges are scheduled by deleting a database or table; they are never retried (refusePurgeControl).
  deleteDatabase: of('manage', 'databases:manage'),
  deleteTable: of('manage', 'tables:manage'),
  // Saving a shared view queues it, but it builds or drops an index: schema work.
  updateTable: of('manage', 'schema:manage'),
  exportRows: of('read', 'exports:read'),
  exportView: of('read', 'exports:read'),
  exportDatabase: of('read', 'exports:read'),
  runDatabaseBackup: of('write', 'backups:manage'),
  previewDatabaseRestore: of('admin', 'backups:manage'),
  restoreDatabaseBackup: of('admin', 'backups:manage'),
  saveBackupSchedule: of('admin', 'backups:manage'),
  testBackupDestination: of('admin', 'backups:manage'),
};

/** The auth scopes of a mutation that starts `kind` (builder.ts's `org` and `oauth` scopes). */
export function startScopes(
  kind: JobKind,
  orgId: unknown,
): { org: { orgId: string; capability: Capability }; oauth: OAuthScope } {
  const { capability, scope } = START_AUTHORITY[kind];
  return { org: { orgId: String(orgId), capability }, oauth: scope };
}

/** Every check starting `kind` makes, with the caller's authority as read for this request. */
export function requireStartAuthority(context: Context, orgId: string, kind: string): OrgAuthority {
  const start = START_AUTHORITY[kind as JobKind];
  if (!start) throw new Error(`No start authority is declared for the job kind ${kind}.`);
  const authority = requireCapability(context, orgId, start.capability);
  requireScope(context, start.scope);
  if (start.stepUp) requireFreshStrongAuth(context);
  return authority;
}
