package onboarding

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the onboarding Lambda (infra/access).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "onboarding")) }
