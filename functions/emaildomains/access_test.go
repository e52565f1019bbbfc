package emaildomains

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the emaildomains Lambda
// (infra/access), and so must exactly the uses of the secrets key they make
// (accesstest.KMSComplete).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "emaildomains", accesstest.KMSComplete())) }
