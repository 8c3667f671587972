-- Tenant quotas (internal/quota): each tenant's artifact bytes per UTC day, for its
-- max_artifact_bytes. The indexed append adds its batch's artifact_written sizes
-- (persistence.SessionFacts.ArtifactBytes) to the row of the session's tenant and the
-- server's UTC date, with its tokens and cost (0009_tenant_quotas.sql). Artifacts
-- written before this migration are not counted.

ALTER TABLE fathom_tenant_usage ADD COLUMN artifact_bytes bigint NOT NULL DEFAULT 0;
