-- The size of a JSON document as row writes measure it: the UTF-8 bytes of its compact text (JSON.stringify), not of
-- jsonb's printed form, which puts a space after every ':' and ','. Schema changes use it to check json `maxBytes`.
CREATE FUNCTION wds_json_bytes(p_value jsonb) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_total bigint;
BEGIN
  CASE jsonb_typeof(p_value)
    WHEN 'object' THEN
      SELECT 2 + coalesce(sum(octet_length(to_jsonb(key)::text) + 1 + wds_json_bytes(value)) + count(*) - 1, 0)
        INTO v_total FROM jsonb_each(p_value);
    WHEN 'array' THEN
      SELECT 2 + coalesce(sum(wds_json_bytes(value)) + count(*) - 1, 0)
        INTO v_total FROM jsonb_array_elements(p_value);
    ELSE
      v_total := octet_length(p_value::text);
  END CASE;
  RETURN v_total;
END
$$;
