package eventlogtest

import (
	"testing"

	"github.com/botplatform/api/shared/eventlog"
)

func TestMemoryConforms(t *testing.T) {
	Run(t, func(*testing.T) eventlog.Log { return NewMemory() })
}
