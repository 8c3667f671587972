-- Text search reads no pending list (persistence/pgvector's and ltmpg's text search). A
-- GIN index with fastupdate, PostgreSQL's default, puts new entries in a pending list
-- (up to gin_pending_list_limit, 4 MB by default) until a vacuum or autovacuum moves
-- them into the index, and every search reads the whole list: after a bulk load or
-- between vacuums of a busy table, each text search of any stream scanned up to 4 MB of
-- other streams' entries (a 100,000-message load left 174 pages: 5 ms a search). The
-- text indexes take fastupdate off, as PostgreSQL advises where consistent response
-- time matters more than insert speed (a message's entries go into the index as it is
-- stored), and their pending lists are emptied.
--
-- fathom_vectors exists only where pgvector is installed (0004_vectors.sql), and its
-- text index is 0016's or, without btree_gin, 0013's; persistence/pgvector's Open runs
-- this again after 0016 while one of them has fastupdate on.
DO $migration$
DECLARE
    idx regclass;
BEGIN
    FOR idx IN
        SELECT i.indexrelid::regclass FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid
            JOIN pg_am a ON a.oid = c.relam
        WHERE i.indrelid IN (SELECT t FROM (VALUES (to_regclass('fathom_vectors')), (to_regclass('fathom_memories'))) AS v (t) WHERE t IS NOT NULL)
            AND a.amname = 'gin' AND NOT coalesce(c.reloptions @> ARRAY['fastupdate=off'], false)
    LOOP
        EXECUTE format('ALTER INDEX %s SET (fastupdate = off)', idx);
        PERFORM gin_clean_pending_list(idx);
    END LOOP;
END
$migration$;
