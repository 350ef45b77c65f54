import { monotonicFactory } from 'ulid';

/** Spec 2.1: a 26-character ULID, uppercase Crockford base32, first character 0-7. */
export const ID_PATTERN = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

const nextUlid = monotonicFactory();

export function newId(): string {
  return nextUlid();
}

export function isId(value: string): boolean {
  return ID_PATTERN.test(value);
}
