/** Plain formats and vocabularies of the spec, shared by every layer; no GraphQL here. */
import { z } from 'zod';
import { ID_PATTERN } from './ids.ts';

/** Spec 2.1 formats as zod schemas, shared by GraphQL inputs, REST declarations and the OpenAPI document. */
export const Id = z.string().regex(ID_PATTERN, 'must be a 26-character ULID');
export const VersionString = z.string().regex(/^[1-9][0-9]{0,18}$/, 'must be a decimal version string');
/** An e-mail address as users and invitations store it: lowercased. */
export const Email = z
  .email()
  .max(254)
  .transform((email) => email.toLowerCase());
export const SchemaVersion = z.number().int().min(1).max(2_147_483_647);

/** Spec 2.1 Timestamp: UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`, exactly three fractional digits, year not 0000. */
export const TIMESTAMP_PATTERN = /^(?!0000)\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const TIMESTAMP_MESSAGE = 'must be a UTC timestamp YYYY-MM-DDTHH:MM:SS.mmmZ';
/** The pattern admits month 13, February 30 or hour 24; those would reach PostgreSQL and fail there (a 500). */
export function isRealInstant(value: string): boolean {
  if (!TIMESTAMP_PATTERN.test(value)) return true; // the pattern has reported it already
  const time = Date.parse(value);
  return !Number.isNaN(time) && new Date(time).toISOString() === value;
}
export const Timestamp = z
  .string()
  .regex(TIMESTAMP_PATTERN, TIMESTAMP_MESSAGE)
  .refine(isRealInstant, TIMESTAMP_MESSAGE);

const MAX_STORED_VERSION = 9_223_372_036_854_775_807n; // PostgreSQL bigint

/**
 * The stored form of an `expectedVersion`. The spec allows 19 digits, more than a bigint holds; such a value is
 * well-formed but can match no row, so callers treat `null` as a version conflict rather than query with it.
 */
export function storedVersion(expected: string): bigint | null {
  const version = BigInt(expected);
  return version <= MAX_STORED_VERSION ? version : null;
}

/** A JSON value as payloads, journals, results and stored responses carry it. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** Spec 2.10 activity categories. */
export const ACTIVITY_CATEGORIES = [
  'records',
  'schema',
  'imports',
  'exports',
  'backups',
  'restores',
  'webhooks',
] as const;
export type ActivityCategory = (typeof ACTIVITY_CATEGORIES)[number];
