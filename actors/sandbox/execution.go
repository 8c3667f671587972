package sandbox

import (
	"time"

	"github.com/fathom-agents/fathom/messages/fsp"
	"github.com/fathom-agents/fathom/tools"
)

// execution is one Execute call travelling through the pool: the caller waits on reply,
// which gets exactly one outcome. It is owned by one actor at a time (the pool while it
// waits for a connection, then the connection it was checked out to), so its fields
// need no lock.
type execution struct {
	id     string
	tool   string
	tenant string // whose execution it is (auth.TenantOf of the caller's context)
	frame  *fsp.Execute
	// limit is the execution's time limit; deadline is when the client gives up on it.
	limit    time.Duration
	deadline time.Time
	output   OutputFunc
	reply    chan outcome // buffered 1
	replied  bool
	// handbacks counts returns to the pool after failed health checks.
	handbacks int
}

type outcome struct {
	res *Result
	err *tools.ToolError
}

// finish delivers the outcome once; later calls are ignored.
func (e *execution) finish(res *Result, err *tools.ToolError) {
	if e.replied {
		return
	}
	e.replied = true
	e.reply <- outcome{res: res, err: err}
}
