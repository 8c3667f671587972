package llm

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
)

func TestIsRetryable(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"429":        {&APIError{StatusCode: 429}, true},
		"503":        {fmt.Errorf("chat: %w", &APIError{StatusCode: 503}), true},
		"400":        {&APIError{StatusCode: 400}, false},
		"401":        {&APIError{StatusCode: 401}, false},
		"deadline":   {context.DeadlineExceeded, true},
		"canceled":   {fmt.Errorf("x: %w", context.Canceled), false},
		"refused":    {fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		"cut stream": {io.ErrUnexpectedEOF, true},
		"closed":     {fmt.Errorf("chat: %w", &url.Error{Op: "Post", URL: "http://x", Err: io.EOF}), true},
		"body EOF":   {fmt.Errorf("decode: %w", io.EOF), false},
		"other":      {fmt.Errorf("boom"), false},
		"nil":        {nil, false},
	}
	for name, c := range cases {
		if got := IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable = %v, want %v", name, got, c.want)
		}
	}
}
