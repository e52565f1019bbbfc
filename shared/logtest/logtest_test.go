package logtest

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Concurrent loggers' lines all land, whole.
func TestLoggerKeepsEveryLine(t *testing.T) {
	t.Parallel()
	log, buf := Logger()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { log.Info("sent", "n", 1) })
	}
	wg.Wait()
	assert.Equal(t, 20, strings.Count(buf.String(), " level=INFO msg=sent n=1\n"))
}
