package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fathom-agents/fathom/internal/config"
)

// TestA2AAgentsFromConfig: an a2a_agents entry becomes a Go-function agent; one without
// a description takes its agent card's, and an unreachable one fails the start naming it.
func TestA2AAgentsFromConfig(t *testing.T) {
	t.Parallel()
	card := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/agent-card.json" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"name":"travel","description":"Books trips","supportedInterfaces":[]}`))
	}))
	defer card.Close()
	agents, err := a2aAgents([]config.A2AAgent{{Name: "travel", URL: card.URL}, {Name: "billing", URL: "http://127.0.0.1:1", Description: "Bills"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(agents) != 2 || agents[0].Description != "Books trips" || agents[0].Run == nil || agents[1].Description != "Bills" {
		t.Fatalf("agents %+v", agents)
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if _, err := a2aAgents([]config.A2AAgent{{Name: "gone", URL: down.URL}}); err == nil || !strings.Contains(err.Error(), "a2a_agents[0] (gone)") {
		t.Fatalf("an unreachable agent: %v", err)
	}
}
