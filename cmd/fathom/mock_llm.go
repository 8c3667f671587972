package main

import (
	"context"
	"io"

	"github.com/fathom-agents/fathom/llm/mock"
)

// runMockLLM serves the scripted OpenAI-compatible model (see llm/mock).
func runMockLLM(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return mock.Run(ctx, args, stdout, stderr)
}
