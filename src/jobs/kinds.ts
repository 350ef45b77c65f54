import type { ActivityCategory } from '../graph/activity.ts';

/** Every kind of durable job and the activity category its events go to (spec §6 operation names). */
export const JOB_CATEGORIES = {
  previewImportRows: 'imports',
  importRows: 'imports',
  createField: 'schema',
  updateField: 'schema',
  deleteField: 'schema',
  reorderFields: 'schema',
  applySchemaChange: 'schema',
  createUniqueRule: 'schema',
  createForeignKey: 'schema',
} as const satisfies Record<string, ActivityCategory>;

export type JobKind = keyof typeof JOB_CATEGORIES;
export const JOB_KINDS = Object.keys(JOB_CATEGORIES) as JobKind[];
