-- Tenancy: whose session each index row is. tenant is session_started's tenant (a
-- fork's: session_forked's), owner the subject of the principal that started (or
-- forked) it. GET /v1/sessions filters on them in the query itself, so a principal's
-- pages and cursors only ever walk its own tenant's rows.
--
-- Rows from before tenancy belong to the default tenant and have no owner.

ALTER TABLE fathom_sessions
    ADD COLUMN tenant text NOT NULL DEFAULT 'default',
    ADD COLUMN owner  text NOT NULL DEFAULT '';

CREATE INDEX fathom_sessions_tenant ON fathom_sessions (tenant, created_at DESC, session_id DESC);
