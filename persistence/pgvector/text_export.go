package pgvector

import "github.com/jackc/pgx/v5/pgtype"

// TextVector is the tsvector the store indexes for text (persistence.Tokenize's terms
// with positions; whole identifiers weighted A): other PostgreSQL stores of text use
// it so their ranking is the same (persistence/ltm/ltmpg).
func TextVector(text string) pgtype.TSVector { return textVector(text) }

// TextQuery is the tsquery text of query's terms, ORed ("" when it has none).
func TextQuery(query string) string { return textQuery(query) }

// TextTerms are query's distinct terms, each a quoted tsquery operand (TextQuery ORs
// them).
func TextTerms(query string) []string { return textTerms(query) }

// TextRankSQL is the SQL expression of ts_rank_cd(col, TextQuery, 1) for a row whose
// tsvector column col matches at least one of n terms, terms naming the tsquery[] of
// TextTerms: the row is ranked against the OR of only the terms it holds, the same
// score at a fraction of ts_rank_cd's cost for a long query (see SearchText).
func TextRankSQL(col, terms string, n int) string { return textRankSQL(col, terms, n) }
