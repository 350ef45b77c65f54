import { PreferenceOptionsResponse, PreferencesPatch, PreferencesResponse } from '../../../contracts/preferences.ts';
import {
  GetMyPreferencesDocument,
  GetPreferenceOptionsDocument,
  UpdateMyPreferencesDocument,
} from '../../../generated/documents.ts';
import { defineRoute } from '../route.ts';

export const preferenceRoutes = [
  defineRoute({
    method: 'GET',
    path: '/v1/me/preferences',
    summary: 'Get preferences (endpoint 15)',
    tags: ['preferences'],
    operation: GetMyPreferencesDocument,
    response: PreferencesResponse,
  }),
  defineRoute({
    method: 'PATCH',
    path: '/v1/me/preferences',
    summary: 'Update some preferences; members left out keep their value',
    tags: ['preferences'],
    operation: UpdateMyPreferencesDocument,
    body: PreferencesPatch,
    response: PreferencesResponse,
  }),
  defineRoute({
    method: 'GET',
    path: '/v1/preferences/options',
    summary: 'Get preference options (endpoint 16)',
    tags: ['preferences'],
    operation: GetPreferenceOptionsDocument,
    response: PreferenceOptionsResponse,
  }),
];
