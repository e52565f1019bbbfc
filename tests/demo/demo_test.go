package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// make demo works as its README promises: a newcomer's "hello", then "coffee", are answered
// on each of Telegram, WhatsApp and VK, through the real local API and its runtime.
func TestDemoAnswersOnEveryChannel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	// The demo builds ./functions/local from the repository root.
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.NoError(t, os.Chdir(filepath.Join(wd, "..", "..")))
	t.Cleanup(func() { _ = os.Chdir(wd) })

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	in := strings.NewReader("hello\ncoffee\nwhatsapp hello\nwhatsapp tea\nvk hello\nvk coffee\n")
	var out bytes.Buffer
	require.NoError(t, run(ctx, filepath.Join(t.TempDir(), "data"), addr, in, &out))
	for _, want := range []string{
		"bot (telegram): What would you like?  [Coffee] [Tea]", "bot (telegram): One coffee coming.",
		"bot (whatsapp): What would you like?  [Coffee] [Tea]", "bot (whatsapp): Tea it is.",
		"bot (vk): What would you like?", "bot (vk): One coffee coming.",
	} {
		assert.Contains(t, out.String(), want)
	}
}
