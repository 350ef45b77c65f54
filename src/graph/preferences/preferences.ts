import type { TransactionClient } from '../../db/prisma.ts';
import { builder } from '../server/builder.ts';
import { idempotent } from '../../idempotency/run.ts';
import {
  DATE_FORMATS,
  LOCALES,
  PreferencesPatch,
  THEMES,
  TIME_FORMATS,
  TIMEZONES,
} from '../../contracts/preferences.ts';

export const DEFAULT_PREFERENCES = {
  timezone: 'UTC',
  locale: 'en-US',
  dateFormat: 'year-month-day',
  timeFormat: '24-hour',
  theme: 'system',
} as const;

export interface PreferencesShape {
  [key: string]: string;
  timezone: string;
  locale: string;
  dateFormat: string;
  timeFormat: string;
  theme: string;
}

export const Preferences = builder.objectRef<PreferencesShape>('Preferences').implement({
  description: 'Display preferences of the calling user (spec 2.14).',
  fields: (t) => ({
    timezone: t.exposeString('timezone'),
    locale: t.exposeString('locale'),
    dateFormat: t.exposeString('dateFormat'),
    timeFormat: t.exposeString('timeFormat'),
    theme: t.exposeString('theme'),
  }),
});

interface PreferenceOptionsShape {
  timezones: string[];
  locales: string[];
  dateFormats: string[];
  timeFormats: string[];
  themes: string[];
}

const PreferenceOptions = builder.objectRef<PreferenceOptionsShape>('PreferenceOptions').implement({
  description: 'The values each preference accepts (spec 2.15).',
  fields: (t) => ({
    timezones: t.exposeStringList('timezones'),
    locales: t.exposeStringList('locales'),
    dateFormats: t.exposeStringList('dateFormats'),
    timeFormats: t.exposeStringList('timeFormats'),
    themes: t.exposeStringList('themes'),
  }),
});

const UpdatePreferencesInput = builder
  .inputType('UpdatePreferencesInput', {
    fields: (t) => ({
      timezone: t.string({ required: false }),
      locale: t.string({ required: false }),
      dateFormat: t.string({ required: false }),
      timeFormat: t.string({ required: false }),
      theme: t.string({ required: false }),
    }),
  })
  .validate(PreferencesPatch);

const selectPreferences = { timezone: true, locale: true, dateFormat: true, timeFormat: true, theme: true } as const;

async function readPreferences(db: TransactionClient, userId: string): Promise<PreferencesShape> {
  const stored = await db.preference.findUnique({ where: { userId }, select: selectPreferences });
  return stored ?? { ...DEFAULT_PREFERENCES };
}

async function writePreferences(
  tx: TransactionClient,
  userId: string,
  patch: PreferencesPatch,
): Promise<PreferencesShape> {
  const changes = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
  return tx.preference.upsert({
    where: { userId },
    create: { ...DEFAULT_PREFERENCES, ...changes, userId },
    update: { ...changes, version: { increment: 1 } },
    select: selectPreferences,
  });
}

builder.queryFields((t) => ({
  myPreferences: t.withAuth({ personal: true }).field({
    type: Preferences,
    description: 'The caller’s display preferences; defaults until the caller changes one.',
    resolve: (_root, _args, context) => readPreferences(context.prisma, context.caller.userId),
  }),
  preferenceOptions: t.field({
    type: PreferenceOptions,
    description: 'Every value the preferences accept.',
    authScopes: { authenticated: true },
    resolve: () => ({
      timezones: [...TIMEZONES],
      locales: [...LOCALES],
      dateFormats: [...DATE_FORMATS],
      timeFormats: [...TIME_FORMATS],
      themes: [...THEMES],
    }),
  }),
}));

builder.mutationFields((t) => ({
  updateMyPreferences: t.withAuth({ personal: true, oauth: 'profile:manage' }).field({
    type: Preferences,
    description: 'Changes some of the caller’s preferences; members left out keep their value.',
    args: {
      idempotencyKey: t.arg.string({ required: true }),
      input: t.arg({ type: UpdatePreferencesInput, required: true }),
    },
    resolve: (_root, { idempotencyKey, input: patch }, context) => {
      return idempotent(context, { operation: 'updateMyPreferences', key: idempotencyKey, input: patch }, (tx) =>
        writePreferences(tx, context.caller.userId, patch),
      );
    },
  }),
}));
