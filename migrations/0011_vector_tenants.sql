-- Tenancy in the vector store (persistence/pgvector): each vector's tenant is a column of
-- its key, so a session id (stream) of one tenant never reaches another tenant's vectors,
-- and every query names the tenant.
--
-- fathom_vectors exists only where pgvector is installed (0004_vectors.sql), so this
-- migration does nothing without it; persistence/pgvector's Open runs it again after
-- 0004 (it is idempotent), which covers a server where pgvector was installed later.
--
-- Existing vectors take their session's tenant from the session index; vectors of a
-- stream without an index row keep the tenant '' ("from before tenancy"), which the
-- store still finds for the stream under any tenant (and deletes with it), as artifacts
-- from before tenancy are found (persistence/artifact).
DO $migration$
BEGIN
    IF to_regclass('fathom_vectors') IS NULL THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'fathom_vectors'::regclass AND attname = 'tenant' AND NOT attisdropped) THEN
        RETURN;
    END IF;
    ALTER TABLE fathom_vectors ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT '';
    UPDATE fathom_vectors v SET tenant = s.tenant FROM fathom_sessions s WHERE s.session_id = v.stream_id;
    ALTER TABLE fathom_vectors DROP CONSTRAINT fathom_vectors_pkey;
    ALTER TABLE fathom_vectors ADD PRIMARY KEY (tenant, stream_id, seq);
END
$migration$;
