import type { JobHandler } from './handler.ts';
import { importRows } from './import-rows.ts';
import { previewImportRows } from './import-preview.ts';

/** Every job kind a worker runs. */
export const JOB_HANDLERS: readonly JobHandler[] = [previewImportRows, importRows];
