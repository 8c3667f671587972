package sandbox

import (
	"testing"
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
)

func TestAccumulator(t *testing.T) {
	a := NewAccumulator("e1", 6)
	h := func(tp fsp.Type, id string) fsp.Header { return fsp.NewHeader(tp, id, time.Now()) }
	a.Apply(&fsp.Ack{Header: h(fsp.TypeAck, "e1")})
	a.Apply(&fsp.StatusUpdate{Header: h(fsp.TypeStatus, "e1"), Status: fsp.StatusRunning})
	a.Apply(&fsp.Output{Header: h(fsp.TypeStdout, "e1"), Data: "abcd"})
	a.Apply(&fsp.Output{Header: h(fsp.TypeStdout, "other"), Data: "zzz"})
	a.Apply(&fsp.Output{Header: h(fsp.TypeStdout, "e1"), Data: "efgh"})
	a.Apply(&fsp.Output{Header: h(fsp.TypeStderr, "e1"), Data: ""})
	if !a.Acked || a.IsTerminal() || a.Finished {
		t.Fatalf("mid-run: %+v", a)
	}
	a.Apply(&fsp.StatusUpdate{Header: h(fsp.TypeStatus, "e1"), Status: fsp.StatusCompleted})
	if !a.IsTerminal() || a.Finished {
		t.Fatalf("after the terminal status: %+v", a)
	}
	a.Apply(&fsp.Result{Header: h(fsp.TypeResult, "e1"), DurationMS: 7})
	r := a.Result()
	if !a.Finished || r.Stdout != "abcdef" || !r.Truncated || r.ExitCode != nil || r.DurationMS != 7 || r.Status != fsp.StatusCompleted {
		t.Fatalf("result %+v", r)
	}
}
