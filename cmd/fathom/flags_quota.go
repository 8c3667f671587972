package main

import (
	"flag"
	"os"
	"strconv"

	"github.com/fathom-agents/fathom/internal/config"
	"github.com/fathom-agents/fathom/internal/quota"
	"github.com/fathom-agents/fathom/llm/resilient"
)

// envLLMMaxConcurrent names the environment variable of --llm-max-concurrent.
const envLLMMaxConcurrent = "FATHOM_LLM_MAX_CONCURRENT"

// quotaFlags configure the model endpoint's concurrent calls: --llm-max-concurrent,
// else env FATHOM_LLM_MAX_CONCURRENT, else the configuration file's
// llm_max_concurrent, else 0 (unlimited). The tenants' weights and calls per minute
// come from the file's tenant_defaults and tenants.
type quotaFlags struct {
	n int
	// set is true when the flag or the environment gave n.
	set bool
	// envErr is a FATHOM_LLM_MAX_CONCURRENT that does not parse; reported unless the flag
	// is given.
	envErr error
}

func (f *quotaFlags) register(fs *flag.FlagSet) {
	if v := os.Getenv(envLLMMaxConcurrent); v != "" {
		if n, err := strconv.ParseUint(v, 10, 31); err != nil {
			f.envErr = usageError("bad %s %q: want a whole number of calls", envLLMMaxConcurrent, v)
		} else {
			f.n, f.set = int(n), true
		}
	}
	fs.Var((*quotaValue)(f), "llm-max-concurrent",
		"LLM calls in flight to the model endpoint at once, shared between tenants by weight (the config file's tenants); excess calls wait in their tenant's queue; 0 = unlimited (env "+envLLMMaxConcurrent+", config key llm_max_concurrent)")
}

// apply sets rc's concurrent-call limit and tenants from the flag, the environment or
// file (nil: none).
func (f *quotaFlags) apply(rc *resilient.Config, file *config.File) error {
	if f.envErr != nil {
		return f.envErr
	}
	rc.MaxConcurrent = f.n
	if !f.set && file != nil && file.LLMMaxConcurrentSet {
		rc.MaxConcurrent = file.LLMMaxConcurrent
	}
	if file != nil {
		rc.Tenants = resilientTenants(file)
	}
	return nil
}

// fileQuotas are the file's tenants' limits the session grains enforce (internal/quota).
func fileQuotas(file *config.File) quota.Config {
	if file == nil {
		return quota.Config{}
	}
	return quota.Config{Default: file.TenantDefaults, Named: file.Tenants}
}

// resilientTenants are the file's tenants as the model client's limiter takes them.
func resilientTenants(file *config.File) resilient.Tenants {
	conv := func(l config.TenantLimits) resilient.TenantLimits {
		return resilient.TenantLimits{Weight: l.Weight, CallsPerMinute: l.LLMCallsPerMinute}
	}
	t := resilient.Tenants{Default: conv(file.TenantDefaults)}
	if len(file.Tenants) > 0 {
		t.Named = make(map[string]resilient.TenantLimits, len(file.Tenants))
		for name, l := range file.Tenants {
			t.Named[name] = conv(l)
		}
	}
	return t
}

// quotaValue is --llm-max-concurrent's flag.Value: setting it overrides the environment
// (a bad value there included) and the file.
type quotaValue quotaFlags

func (v *quotaValue) String() string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(v.n)
}

func (v *quotaValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return err
	}
	v.n, v.set, v.envErr = int(n), true, nil
	return nil
}
