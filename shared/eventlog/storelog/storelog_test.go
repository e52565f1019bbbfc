package storelog

import (
	"testing"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestConformanceOnSQLiteStore(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	eventlogtest.Run(t, func(*testing.T) eventlog.Log { return New(st) })
}
