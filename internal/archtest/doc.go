// Package archtest enforces the import rules of docs/ARCHITECTURE.md ("The map") as a
// test: which parts of Fathom may import which. It has no code of its own; its test
// lists the module's import graph with `go list -deps` and checks every rule of the
// table in imports_test.go, failing with the offending import chain.
//
// Adding a rule is one line of that table.
package archtest
