import { z } from 'zod';
import { isKnownTimezone } from '../kernel/timezones.ts';

/** The preferences domain's contract (spec 2.14, 2.15): what REST, GraphQL and OpenAPI read. No side effects. */

/** Per-user display preferences and the values they may take. */
export const DATE_FORMATS = [
  'day-short-month-year',
  'short-month-day-year',
  'year-month-day',
  'day-month-year',
  'month-day-year',
] as const;
export const TIME_FORMATS = ['24-hour', '12-hour', '24-hour-seconds', '12-hour-seconds'] as const;
export const THEMES = ['system', 'light', 'dark'] as const;

/** IANA zones known to this runtime's ICU, plus `UTC` (the default, which ICU lists only as an alias). */
export const TIMEZONES: readonly string[] = ['UTC', ...Intl.supportedValuesOf('timeZone')];

/** The locales the product is offered in, kept to those the runtime can actually format. */
const OFFERED_LOCALES = [
  'en-US',
  'en-GB',
  'en-AU',
  'en-CA',
  'en-IN',
  'de-DE',
  'de-AT',
  'de-CH',
  'fr-FR',
  'fr-CA',
  'es-ES',
  'es-MX',
  'it-IT',
  'nl-NL',
  'pt-BR',
  'pt-PT',
  'sv-SE',
  'da-DK',
  'nb-NO',
  'fi-FI',
  'pl-PL',
  'cs-CZ',
  'tr-TR',
  'uk-UA',
  'ja-JP',
  'ko-KR',
  'zh-CN',
  'zh-TW',
];
export const LOCALES: readonly string[] = Intl.DateTimeFormat.supportedLocalesOf(OFFERED_LOCALES);

const timezoneSet = new Set(TIMEZONES);
const localeSet = new Set(LOCALES);

/** PATCH body: every member optional, none nullable, nothing else allowed. */
export const PreferencesPatch = z.strictObject({
  // The listed zones, plus any other name the runtime knows (Node 20 lists `Asia/Calcutta` but not `Asia/Kolkata`).
  timezone: z
    .string()
    .min(1)
    .max(100)
    .refine((zone) => timezoneSet.has(zone) || isKnownTimezone(zone), 'unknown timezone (see /v1/preferences/options)')
    .optional(),
  locale: z
    .string()
    .min(2)
    .max(64)
    .refine((locale) => localeSet.has(locale), 'unsupported locale (see /v1/preferences/options)')
    .optional(),
  dateFormat: z.enum(DATE_FORMATS).optional(),
  timeFormat: z.enum(TIME_FORMATS).optional(),
  theme: z.enum(THEMES).optional(),
});
export type PreferencesPatch = z.infer<typeof PreferencesPatch>;

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
