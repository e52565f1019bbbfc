package playbooks

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the playbooks Lambda (infra/access).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "playbooks")) }
