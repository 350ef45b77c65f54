import type { JobHandler } from './handler.ts';
import { importRows } from './import-rows.ts';
import { previewImportRows } from './import-preview.ts';
import { schemaChangeHandlers } from './schema-change.ts';

/** Every job kind a worker runs. */
export const JOB_HANDLERS: readonly JobHandler[] = [previewImportRows, importRows, ...schemaChangeHandlers];
