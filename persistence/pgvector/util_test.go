package pgvector_test

import "strconv"

func strconvF(x float32) string { return strconv.FormatFloat(float64(x), 'g', -1, 32) }
