import { isUtf8 } from 'node:buffer';
import express, { type RequestHandler } from 'express';
import { DomainError } from '../../kernel/errors.ts';
import { exceedsDepth, MAX_JSON_DEPTH } from '../../kernel/input-hygiene.ts';

/** A body nested deeper than MAX_JSON_DEPTH is refused before anything walks it (validators and fingerprints recurse). */
const refuseDeepBody: RequestHandler = (req, _res, next) => {
  if (exceedsDepth(req.body, MAX_JSON_DEPTH)) {
    next(
      new DomainError(
        'BAD_REQUEST',
        `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`,
        {
          details: { maxDepth: MAX_JSON_DEPTH },
        },
      ),
    );
    return;
  }
  next();
};

/**
 * JSON bodies up to `limit` bytes, which must be valid UTF-8 (RFC 8259 §8.1) and nest at most MAX_JSON_DEPTH
 * levels. body-parser would otherwise decode stray bytes as U+FFFD, and an import of a Latin-1 file would be
 * accepted with its text silently changed.
 */
export function jsonBody(limit: number): RequestHandler[] {
  return [
    express.json({
      limit,
      type: 'application/json',
      verify: (_req, _res, buffer) => {
        if (!isUtf8(buffer))
          throw new DomainError(
            'BAD_REQUEST',
            'The request body is not valid UTF-8; send JSON encoded as UTF-8 (re-encode the file’s text first).',
          );
      },
    }),
    refuseDeepBody,
  ];
}
