package webhooks

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the webhooks Lambda (infra/access),
// and so must exactly the uses of the secrets key they make (accesstest.KMSComplete): the
// delivery verified through the family's wiring opens the channel's sealed webhook secret.
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "webhooks", accesstest.KMSComplete())) }
