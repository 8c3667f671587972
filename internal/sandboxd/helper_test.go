package sandboxd

import (
	"fmt"
	"os"
	"testing"

	"github.com/fathom-agents/fathom/messages/fsp"
)

// churnEnv, set in an execution's environment, makes this test binary's exec helper run
// goroutines that allocate without pause, as a busy runtime would, while it applies the
// limits and execs the program.
const churnEnv = "FATHOM_TEST_HELPER_CHURN"

var churnSink [4][]byte

func init() {
	if len(os.Args) < 2 || os.Args[1] != helperExecArg || os.Getenv(churnEnv) == "" {
		return
	}
	for i := range churnSink {
		go func() {
			for {
				churnSink[i] = make([]byte, 256<<10)
			}
		}()
	}
}

// The program's output is its own: nothing of the helper's Go runtime reaches it, even
// when other goroutines of the helper allocate while the helper sets limits its heap
// cannot grow under (before the fix, such a goroutine's "fatal error: runtime: out of
// memory" was cut short by execve and prefixed the program's stderr).
func TestSandboxHelperRuntimeStaysQuiet(t *testing.T) {
	accountingModes(t, func(t *testing.T, c *client) {
		for i := range 25 {
			id := fmt.Sprintf("quiet-%d", i)
			c.execute(id, fsp.LangShell, "echo no >&2; exit 3", func(m *fsp.Execute) {
				m.Limits.MemoryMB = 32
				m.Env = map[string]string{churnEnv: "1"}
			})
			r := c.collect(id)
			if r.stderr != "no\n" || r.result == nil || r.result.ExitCode == nil || *r.result.ExitCode != 3 {
				t.Fatalf("run %d: frames %s exit %s stderr %q, want exit 3 and stderr %q", i, r.kinds(), exitOf(r), r.stderr, "no\n")
			}
		}
	})
}
