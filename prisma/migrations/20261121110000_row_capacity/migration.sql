-- Counts a new row against its table's limit, or raises SQLSTATE WDS01 when the table is full.
-- Row creates send it in the same round trip as COMMIT (src/graph/idempotency.ts): raising, rather than returning
-- nothing, is what makes that safe, because an error turns the COMMIT that follows into a rollback.
CREATE FUNCTION wds_claim_row(p_table_id text, p_limit bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE data_tables SET row_count = row_count + 1 WHERE id = p_table_id AND row_count < p_limit;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'table % holds its maximum of % rows', p_table_id, p_limit USING ERRCODE = 'WDS01';
  END IF;
END
$$;
