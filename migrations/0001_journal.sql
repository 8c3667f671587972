-- Fathom event journal: one ordered stream of events per stream id (a session, a
-- sub-agent), its per-stream head for optimistic concurrency, and snapshots.

CREATE TABLE IF NOT EXISTS fathom_streams (
    stream_id  text COLLATE "C" PRIMARY KEY,
    last_seq   bigint      NOT NULL CHECK (last_seq >= 0),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS fathom_events (
    stream_id text COLLATE "C" NOT NULL,
    seq       bigint      NOT NULL CHECK (seq > 0),
    type      text        NOT NULL,
    data      bytea       NOT NULL,
    at        timestamptz NOT NULL,
    PRIMARY KEY (stream_id, seq)
);

CREATE TABLE IF NOT EXISTS fathom_snapshots (
    stream_id text COLLATE "C" NOT NULL,
    seq       bigint      NOT NULL CHECK (seq >= 0),
    data      bytea       NOT NULL,
    at        timestamptz NOT NULL,
    PRIMARY KEY (stream_id, seq)
);
