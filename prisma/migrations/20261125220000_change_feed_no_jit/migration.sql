-- Issue 27: the row-change trigger's statement has correlated look-ups for updates and deletes, whose estimated cost
-- (millions, for a 1,000-row batch) crosses jit_above_cost: PostgreSQL then JIT-compiled it on every batch, 1.2-1.8 s
-- for a statement that runs in ~75 ms (a 1,000-create batch went from 0.14 s to 2.7 s). The statement is planned
-- each time (EXECUTE) and is short; JIT never pays for itself here.
ALTER FUNCTION "wds_record_row_changes"() SET jit = off;
ALTER FUNCTION "wds_record_table_changes"() SET jit = off;
