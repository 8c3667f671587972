// Package archtest enforces the import rules of docs/ARCHITECTURE.md ("The map") as a
// test: which parts of Fathom may import which. It has no code of its own; its test
// lists the module's import graph with `go list -deps -test` and checks every rule of the
// table in imports_test.go, failing with the offending import chain. A rule holds for
// the packages' test files too ("gateway (tests) -> ..." in a chain); where a part's
// tests must cross it, the rule names the packages they may import and why.
//
// Adding a rule is one line of that table.
//
// map_test.go checks the map's parts table against `go list ./...`: every package of
// the module is named in one part, and every name is a package.
//
// tree_test.go checks scripts/check-tree.sh, the check `.ci/run` starts with: no tracked
// file over 1 MiB and no tracked compiled binary.
package archtest
