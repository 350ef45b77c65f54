import { z } from 'zod';
import { DATE_FORMATS, PreferencesPatch, THEMES, TIME_FORMATS } from '../../../graph/preferences/preferences.ts';
import {
  GetMyPreferencesDocument,
  GetPreferenceOptionsDocument,
  UpdateMyPreferencesDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

/** Spec 2.14. */
export const PreferencesResponse = z.strictObject({
  timezone: z.string().min(1).max(100),
  locale: z.string().min(2).max(64),
  dateFormat: z.enum(DATE_FORMATS),
  timeFormat: z.enum(TIME_FORMATS),
  theme: z.enum(THEMES),
});

/** Spec 2.15. */
export const PreferenceOptionsResponse = z.strictObject({
  timezones: z.array(z.string()),
  locales: z.array(z.string()),
  dateFormats: z.array(z.enum(DATE_FORMATS)),
  timeFormats: z.array(z.enum(TIME_FORMATS)),
  themes: z.array(z.enum(THEMES)),
});

const NoQuery = z.strictObject({});

export const preferenceRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/me/preferences',
    summary: 'Get preferences (endpoint 15)',
    tags: ['preferences'],
    operation: GetMyPreferencesDocument,
    query: NoQuery,
    idempotent: false,
    successStatus: 200,
    response: PreferencesResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/me/preferences',
    summary: 'Update some preferences; members left out keep their value',
    tags: ['preferences'],
    operation: UpdateMyPreferencesDocument,
    query: NoQuery,
    body: PreferencesPatch,
    idempotent: true,
    successStatus: 200,
    response: PreferencesResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/preferences/options',
    summary: 'Get preference options (endpoint 16)',
    tags: ['preferences'],
    operation: GetPreferenceOptionsDocument,
    query: NoQuery,
    idempotent: false,
    successStatus: 200,
    response: PreferenceOptionsResponse,
  }),
];
