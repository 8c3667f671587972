-- Text search beside the vectors (persistence/pgvector, hybrid retrieval): each stored
-- message's terms (persistence.Tokenize, which keeps identifiers such as order ids,
-- error codes and file names whole) are a tsvector column of its vector's row, so the
-- tenant and stream keys, and deletes, cover the text as they cover the embedding. A
-- GIN index serves the @@ matches that ts_rank_cd ranks.
--
-- fathom_vectors exists only where pgvector is installed (0004_vectors.sql), so this
-- migration does nothing without it; persistence/pgvector's Open runs it again after
-- 0004 and 0011 (it is idempotent). Rows stored before it have an empty tsvector: they
-- are found by their vectors only until they are stored again.
DO $migration$
BEGIN
    IF to_regclass('fathom_vectors') IS NULL THEN
        RETURN;
    END IF;
    ALTER TABLE fathom_vectors ADD COLUMN IF NOT EXISTS tsv tsvector NOT NULL DEFAULT '';
    CREATE INDEX IF NOT EXISTS fathom_vectors_tsv ON fathom_vectors USING gin (tsv);
END
$migration$;
