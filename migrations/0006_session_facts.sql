-- The session index's facts for GET /v1/sessions's filters and columns: who started the
-- session (session_started.user_id), its goal (cut to 1,000 bytes), when its first
-- event was stored, and its model cost so far (the sum of llm_responded.cost_usd). The
-- indexed append writes them from its own batch (persistence.FactsFunc): user and goal
-- with the session_started batch, the cost added by every batch.
--
-- Rows from before this migration get their update time as the creation time and no
-- user, goal or cost.

ALTER TABLE fathom_sessions
    ADD COLUMN user_id    text             NOT NULL DEFAULT '',
    ADD COLUMN goal       text             NOT NULL DEFAULT '',
    ADD COLUMN created_at timestamptz,
    ADD COLUMN cost_usd   double precision NOT NULL DEFAULT 0;

UPDATE fathom_sessions SET created_at = updated_at WHERE created_at IS NULL;
ALTER TABLE fathom_sessions ALTER COLUMN created_at SET NOT NULL;

CREATE INDEX fathom_sessions_created ON fathom_sessions (created_at DESC, session_id DESC);
CREATE INDEX fathom_sessions_user ON fathom_sessions (user_id, created_at DESC, session_id DESC) WHERE user_id <> '';
