-- Search (issue 28): pg_trgm for substring and similarity matching, unaccent for accent-insensitive matching.
-- Both ship with PostgreSQL's contrib (and with the embedded server) and are trusted extensions.
CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public;

-- The one text folding that search, similarity and their indexes share: lower case without accents.
-- unaccent() is STABLE (its dictionary could be changed), so an index cannot use it; this wrapper is IMMUTABLE,
-- names its dictionary and function by schema (an index expression is evaluated under an empty search_path by
-- autovacuum and restores), and lives in public beside the extensions so that every workspace schema shares it.
CREATE OR REPLACE FUNCTION public.wds_fold(value text) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN lower(public.unaccent('public.unaccent'::regdictionary, value));

-- What an index over rows is: a btree over sort keys (issue 14), a trigram index over one field's folded text
-- (POST …/rows/similar) or over the folded text of several fields (search).
ALTER TABLE "table_indexes" ADD COLUMN "method" VARCHAR(16) NOT NULL DEFAULT 'btree';

-- A multiSelect's choices as one text for search documents: array_to_string is STABLE (for arrays of any type);
-- over text[] it cannot change, so this wrapper may be IMMUTABLE and appear in an index.
CREATE OR REPLACE FUNCTION public.wds_join(value text[]) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN array_to_string(value, ' ');
