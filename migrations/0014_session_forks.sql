-- The session a fork was forked from (session_forked's source_session_id; '' for a
-- session that is no fork), kept by the indexed append of the fork's first batch:
-- GET /v1/sessions?forked_from= lists a session's forks.

ALTER TABLE fathom_sessions ADD COLUMN forked_from text NOT NULL DEFAULT '';
CREATE INDEX fathom_sessions_forked_from ON fathom_sessions (forked_from, created_at DESC) WHERE forked_from <> '';
