-- Tenant quotas (internal/quota): each tenant's model usage per UTC day, for its
-- max_tokens_per_day and max_cost_usd_per_day, and an index counting its sessions by
-- status, for its max_running_sessions.
--
-- The indexed append adds its batch's tokens and cost (persistence.SessionFacts) to the
-- row of the session's tenant and the server's UTC date in the same statement as the
-- events and the session's index row, so the usage counts exactly the stored answers.
-- Usage from before this migration is not counted.

CREATE TABLE fathom_tenant_usage (
    tenant   text             NOT NULL,
    day      date             NOT NULL,
    tokens   bigint           NOT NULL DEFAULT 0,
    cost_usd double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, day)
);

CREATE INDEX fathom_sessions_tenant_status ON fathom_sessions (tenant, status);
