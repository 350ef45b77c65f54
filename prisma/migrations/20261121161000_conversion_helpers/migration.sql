-- Field conversions (issue 5) read dates and timestamps from text in exactly the forms the API accepts, and must
-- never raise: they run inside a trigger on user writes while a conversion is backfilling. NULL = cannot convert.

CREATE FUNCTION wds_try_date(p_text text) RETURNS date
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_result date;
BEGIN
  IF p_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' OR p_text LIKE '0000%' THEN
    RETURN NULL;
  END IF;
  v_result := p_text::date;
  IF to_char(v_result, 'YYYY-MM-DD') <> p_text THEN
    RETURN NULL;
  END IF;
  RETURN v_result;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$$;

CREATE FUNCTION wds_try_timestamptz(p_text text) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_result timestamptz;
BEGIN
  IF p_text !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[.][0-9]{3}Z$' OR p_text LIKE '0000%' THEN
    RETURN NULL;
  END IF;
  v_result := (p_text::timestamp AT TIME ZONE 'UTC');
  IF to_char(v_result AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') <> p_text THEN
    RETURN NULL;
  END IF;
  RETURN v_result;
EXCEPTION WHEN others THEN
  RETURN NULL;
END
$$;
