-- Tombstones of deleted sessions: whose each was (its tenant and owner) and who deleted
-- it, when. DELETE /v1/sessions/{id} and the retention janitor write one in the same
-- transaction that removes the session's events, snapshots and index row (the audit
-- trail outlives the session). A later session of the same id that is deleted again
-- replaces the row.

CREATE TABLE fathom_tombstones (
    session_id text        PRIMARY KEY,
    tenant     text        NOT NULL,
    owner      text        NOT NULL,
    deleted_by text        NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
