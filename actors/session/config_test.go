package session

import (
	"reflect"
	"testing"

	"github.com/fathom-agents/fathom/actors/session/core"
)

// TestConfigSplit: the shell's settings are Config's own and the decision settings
// core.Config's, none in both (a shell field would hide the core's of the same name),
// and the defaults of both validate.
func TestConfigSplit(t *testing.T) {
	shell, dec := reflect.TypeOf(Config{}), reflect.TypeOf(core.Config{})
	for i := range shell.NumField() {
		f := shell.Field(i)
		if f.Anonymous {
			continue
		}
		if _, ok := dec.FieldByName(f.Name); ok {
			t.Errorf("%s is both a shell setting (session.Config) and a decision setting (core.Config)", f.Name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	c := DefaultConfig()
	c.PipelineDepth = -1
	if err := c.Validate(); err == nil {
		t.Fatal("a negative pipeline depth validated")
	}
}
