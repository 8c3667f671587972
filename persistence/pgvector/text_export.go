package pgvector

import "github.com/jackc/pgx/v5/pgtype"

// TextVector is the tsvector the store indexes for text (persistence.Tokenize's terms
// with positions; whole identifiers weighted A): other PostgreSQL stores of text use
// it so their ranking is the same (persistence/ltm/ltmpg).
func TextVector(text string) pgtype.TSVector { return textVector(text) }

// TextQuery is the tsquery text of query's terms, ORed ("" when it has none).
func TextQuery(query string) string { return textQuery(query) }
