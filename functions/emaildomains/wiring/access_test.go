package wiring

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The inbound routes' actions run in the emaildomains Lambda (its inbound mail routes).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "emaildomains")) }
