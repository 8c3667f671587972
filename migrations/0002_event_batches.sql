-- One row per append instead of one row per event. A session step appends several
-- events at once (llm_responded, step_completed, step_started, llm_requested); storing
-- them as one row makes the step's commit cost what a single-row insert costs (one heap
-- tuple, one index entry) instead of growing with the number of events.
--
-- A row holds the events first_seq..last_seq of one stream, in order, as parallel
-- arrays. The primary key (stream_id, first_seq) is the optimistic concurrency fence:
-- two writers appending after the same head both try first_seq = head + 1 and one of
-- them fails with a unique violation.
--
-- fathom_events stays, as a view with one row per event, for operators' SQL.

CREATE TABLE fathom_event_batches (
    stream_id text          COLLATE "C" NOT NULL,
    first_seq bigint        NOT NULL CHECK (first_seq > 0),
    last_seq  bigint        NOT NULL,
    types     text[]        NOT NULL,
    data      bytea[]       NOT NULL,
    ats       timestamptz[] NOT NULL,
    PRIMARY KEY (stream_id, first_seq),
    CHECK (last_seq = first_seq + cardinality(types) - 1),
    CHECK (cardinality(types) > 0 AND cardinality(data) = cardinality(types) AND cardinality(ats) = cardinality(types))
);

INSERT INTO fathom_event_batches (stream_id, first_seq, last_seq, types, data, ats)
SELECT stream_id, seq, seq, ARRAY[type], ARRAY[data], ARRAY[at] FROM fathom_events;

DROP TABLE fathom_events;

CREATE VIEW fathom_events AS
SELECT b.stream_id, b.first_seq + e.ord - 1 AS seq, e.type, e.data, e.at
FROM fathom_event_batches b,
     unnest(b.types, b.data, b.ats) WITH ORDINALITY AS e(type, data, at, ord);
