-- Journal format 2 (persistence.Format): every stored record carries a CRC-32C checksum
-- (persistence.RecordChecksum over stream id, seq, type and data), verified on every
-- read. crcs holds one checksum per event of the batch, as a bigint (an unsigned 32-bit
-- value); a snapshot's covers the type "snapshot". Rows written before this migration
-- have NULL there and are read without a check.
--
-- fathom_format holds the journal format of the newest binary that opened the journal:
-- a binary refuses a journal whose format is newer than the one it reads. Open raises it
-- to the binary's own format (this migration records format 1, the one before it).

ALTER TABLE fathom_event_batches
    ADD COLUMN crcs bigint[],
    ADD CONSTRAINT fathom_event_batches_crcs CHECK (crcs IS NULL OR cardinality(crcs) = cardinality(types));

ALTER TABLE fathom_snapshots ADD COLUMN crc bigint;

CREATE TABLE fathom_format (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    format    int     NOT NULL CHECK (format > 0)
);

INSERT INTO fathom_format (format) VALUES (1);
