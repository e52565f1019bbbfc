package emailcampaigns

import (
	"os"
	"testing"

	"github.com/botplatform/api/infra/access/accesstest"
)

// The store operations these tests make must be granted to the emailcampaigns Lambda, and
// those of the send job (sqlitetest.As "jobs") and of the tracking events (As
// "emailevents") to theirs (infra/access); so must exactly the uses of the secrets key they
// make (accesstest.KMSComplete): a test send through the family's wiring opens the sending
// domain's sealed DKIM key.
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "emailcampaigns", accesstest.KMSComplete())) }
