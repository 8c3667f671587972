// Package buildinfo says which build of Fathom is running: the release version (set at
// link time), the VCS revision the Go toolchain stamped, and the journal format the
// build writes. Members advertise it in their cluster membership, on /readyz and on
// GET /v1/cluster; `fathom version` prints it.
package buildinfo

import (
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/fathom-agents/fathom/persistence"
)

// Version is the release version, set at build time with
// -ldflags "-X github.com/fathom-agents/fathom/internal/buildinfo.Version=v0.3.0"
// ("dev" otherwise).
var Version = "dev"

// Format is the journal format this build writes and the newest it reads.
const Format = persistence.Format

var revision = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value[:min(12, len(s.Value))]
			}
		}
	}
	return ""
})

// Revision is the VCS revision the binary was built from, cut to 12 characters ("" when
// the toolchain stamped none, as for test binaries).
func Revision() string { return revision() }

// String is the version as members advertise it: Version, and the revision in
// parentheses when known ("v0.3.0 (1a2b3c4d5e6f)").
func String() string {
	if r := Revision(); r != "" {
		return Version + " (" + r + ")"
	}
	return Version
}

// Meta keys a member advertises in its cluster membership (Consul service meta).
const (
	// MetaVersion is String().
	MetaVersion = "version"
	// MetaFormat is Format in decimal.
	MetaFormat = "journal_format"
	// MetaStarted is when the member started, RFC 3339 with nanoseconds, UTC.
	MetaStarted = "started"
)

// FormatString is Format in decimal, as MetaFormat carries it.
func FormatString() string { return strconv.Itoa(Format) }
