-- Fathom event journal: one ordered stream of events per stream id (a session, a
-- sub-agent) and snapshots. The primary key (stream_id, seq) is the optimistic
-- concurrency fence: a stream's head is its highest seq.

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
