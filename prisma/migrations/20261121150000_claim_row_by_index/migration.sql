-- wds_claim_row took the table id as text, and `char(26) = text` compares as text: the counter row was found by a
-- sequential scan of data_tables on every row create. Same function, its parameter typed like the column.
DROP FUNCTION wds_claim_row(text, bigint);

CREATE FUNCTION wds_claim_row(p_table_id bpchar, p_limit bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE data_tables SET row_count = row_count + 1 WHERE id = p_table_id AND row_count < p_limit;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'table % holds its maximum of % rows', p_table_id, p_limit USING ERRCODE = 'WDS01';
  END IF;
END
$$;
