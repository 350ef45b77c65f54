-- How a unique rule is enforced: 'btree' (a unique index on the columns, which foreign keys can reference) or
-- 'hash' (an exclusion constraint over a hash index, for keys too wide for a btree entry). Existing rules are btree.
ALTER TABLE unique_rules ADD COLUMN enforcement varchar(8) NOT NULL DEFAULT 'btree';

-- Counts a batch's net new rows against its table's limit (a delta of zero or less always fits), or raises
-- SQLSTATE WDS01 like wds_claim_row. Sent with COMMIT, so the counter row's lock is held for the commit alone.
CREATE FUNCTION wds_claim_rows(p_table_id bpchar, p_delta bigint, p_limit bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE data_tables SET row_count = row_count + p_delta WHERE id = p_table_id AND (p_delta <= 0 OR row_count + p_delta <= p_limit);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'table % holds its maximum of % rows', p_table_id, p_limit USING ERRCODE = 'WDS01';
  END IF;
END
$$;
