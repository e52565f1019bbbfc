package copilot

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the copilot Lambda (infra/access),
// and so must exactly the uses of the secrets key they make (accesstest.KMSComplete): a
// proposal through the family's wiring opens the account's own provider key (BYOK).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "copilot", accesstest.KMSComplete())) }
