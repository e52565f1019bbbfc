package broadcasts

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the broadcasts Lambda
// (infra/access), and so must exactly the uses of the secrets key they make
// (accesstest.KMSComplete): a test send through the family's wiring opens the channel's
// sealed credentials.
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "broadcasts", accesstest.KMSComplete())) }
