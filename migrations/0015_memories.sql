-- Long-term memory (persistence/ltm/ltmpg): facts a session saves with the remember
-- tool for later sessions of the same user. Items are keyed by tenant, user and id, so
-- every statement names the tenant and the user and an item of another user is never
-- reached. The embedding is a real[] (cosine similarity over a user's items is an exact
-- scan, and needs no pgvector extension); the text's terms (persistence.Tokenize) are a
-- tsvector column with a GIN index, ranked by ts_rank_cd as fathom_vectors' are.
CREATE TABLE IF NOT EXISTS fathom_memories (
    tenant     text COLLATE "C" NOT NULL,
    user_id    text COLLATE "C" NOT NULL,
    id         text COLLATE "C" NOT NULL,
    agent      text COLLATE "C" NOT NULL DEFAULT '',
    body       text NOT NULL,
    meta       jsonb,
    embedding  real[] NOT NULL,
    tsv        tsvector NOT NULL DEFAULT '',
    session_id text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    expires_at timestamptz,
    PRIMARY KEY (tenant, user_id, id)
);
CREATE INDEX IF NOT EXISTS fathom_memories_newest ON fathom_memories (tenant, user_id, updated_at DESC, id);
CREATE INDEX IF NOT EXISTS fathom_memories_tsv ON fathom_memories USING gin (tsv);
CREATE INDEX IF NOT EXISTS fathom_memories_expires ON fathom_memories (expires_at) WHERE expires_at IS NOT NULL;
