-- Vector store of persistence/pgvector: one embedding per recorded message, per stream.
--
-- Every journal applies every migration, and a journal must keep working on a server
-- without pgvector. So this migration creates the extension and the table only when the
-- extension is installed on the server and we may create it; otherwise it does nothing
-- (and is still recorded as applied). persistence/pgvector's Open runs this same file
-- again (it is idempotent) and fails with a clear error when the extension is still
-- missing, so installing pgvector later needs no manual step.
--
-- The embedding column has no fixed dimension: the store's dimension comes from its
-- configuration, and Open creates the HNSW index for it as a partial expression index,
--   CREATE INDEX fathom_vectors_hnsw_<dims> ON fathom_vectors
--     USING hnsw ((embedding::vector(<dims>)) vector_cosine_ops) WHERE dims = <dims>,
-- so a change of embedding model (and dimension) needs no schema change.
DO $migration$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        RAISE NOTICE 'fathom: pgvector is not installed on this server; fathom_vectors not created';
        RETURN;
    END IF;
    BEGIN
        CREATE EXTENSION IF NOT EXISTS vector;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE NOTICE 'fathom: not allowed to CREATE EXTENSION vector; fathom_vectors not created';
        RETURN;
    END;
    EXECUTE $sql$
        CREATE TABLE IF NOT EXISTS fathom_vectors (
            stream_id text COLLATE "C" NOT NULL,
            seq       bigint NOT NULL CHECK (seq >= 0),
            dims      int    NOT NULL CHECK (dims > 0),
            embedding vector NOT NULL CHECK (vector_dims(embedding) = dims),
            meta      jsonb  NOT NULL DEFAULT '{}',
            PRIMARY KEY (stream_id, seq)
        )
    $sql$;
END
$migration$;
