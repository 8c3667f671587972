package ltmpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/fathom-agents/fathom/internal/testenv"
	"github.com/fathom-agents/fathom/persistence/ltm"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmpg"
	"github.com/fathom-agents/fathom/persistence/ltm/ltmtest"
)

func TestConformance(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ltmtest.Run(t, func(t *testing.T, dims int) ltm.Store {
		s, err := ltmpg.Open(context.Background(), dsn, dims)
		if err != nil {
			t.Fatal(err)
		}
		// Each subtest starts empty.
		if _, err := s.PurgeExpired(context.Background(), farFuture); err != nil {
			t.Fatal(err)
		}
		for _, ns := range []ltm.Namespace{ltmtest.U, ltmtest.OtherUser, ltmtest.OtherTenant} {
			if _, err := s.DeleteUser(context.Background(), ns.Tenant, ns.User); err != nil {
				t.Fatal(err)
			}
		}
		return s
	})
}

var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
