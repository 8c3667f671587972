-- Text search within one stream (persistence/pgvector, hybrid retrieval) without
-- reading every stream's matches: a retrieval asks for one session's messages, but the
-- GIN index of 0013 indexes terms across all streams, so a common term's posting list
-- (every stream's rows holding it) was read and intersected with the stream's rows. A
-- GIN index on (stream_id, tsv), which needs btree_gin for the text column, keeps each
-- stream's terms apart. Where btree_gin cannot be created (no privilege on a managed
-- server), 0013's index stays and search is correct, only slower on large tables.
--
-- fathom_vectors exists only where pgvector is installed (0004_vectors.sql), so this
-- migration does nothing without it; persistence/pgvector's Open runs it again after 0013.
DO $migration$
BEGIN
    IF to_regclass('fathom_vectors') IS NULL THEN
        RETURN;
    END IF;
    BEGIN
        CREATE EXTENSION IF NOT EXISTS btree_gin;
    EXCEPTION WHEN insufficient_privilege OR undefined_file THEN
        RAISE NOTICE 'fathom: btree_gin unavailable (%); text search uses the index of 0013', SQLERRM;
        RETURN;
    END;
    CREATE INDEX IF NOT EXISTS fathom_vectors_stream_tsv ON fathom_vectors USING gin (stream_id, tsv);
    DROP INDEX IF EXISTS fathom_vectors_tsv;
END
$migration$;
