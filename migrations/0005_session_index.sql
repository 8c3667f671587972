-- The session index (persistence.SessionIndex): one row per session with its status and
-- the time it next needs a live activation, written by the append that changes them (one
-- statement with the event batch, so in the same transaction), plus the lease the
-- activation that owns the session renews. Each node's reactivator asks for the rows
-- whose due time has passed and whose lease has lapsed; the gateway lists sessions by
-- status from it.
--
-- due_at is NULL for sessions that need nobody (terminal, or waiting on a human without
-- a deadline). Lease times are the server's clock (now()); due_at is the node's.

CREATE TABLE fathom_sessions (
    session_id    text COLLATE "C" PRIMARY KEY,
    status        text        NOT NULL CHECK (status IN ('running', 'awaiting_human', 'interrupted', 'completed', 'failed', 'cancelled')),
    due_at        timestamptz,
    seq           bigint      NOT NULL,
    updated_at    timestamptz NOT NULL,
    lease_owner   text,
    lease_expires timestamptz
);

CREATE INDEX fathom_sessions_due ON fathom_sessions (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX fathom_sessions_status ON fathom_sessions (status, session_id);
