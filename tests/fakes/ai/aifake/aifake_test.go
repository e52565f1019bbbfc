package aifake_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/tests/fakes/ai/aifake"
)

func TestGenerate(t *testing.T) {
	t.Parallel()
	a := aifake.Generate(" a  b\nc ", 10, "sys tem", " a  b\nc ")
	assert.Equal(t, "echo:  a  b\nc ", a.Text)
	assert.Equal(t, a.Text, strings.Join(a.Pieces, ""))
	assert.Len(t, a.Pieces, 4)
	assert.Equal(t, 5, a.InputTokens)
	assert.Equal(t, 4, a.OutputTokens)
	assert.False(t, a.Truncated)

	a = aifake.Generate("one two three", 2, "one two three")
	assert.Equal(t, "echo: one", a.Text)
	assert.True(t, a.Truncated)
	assert.Equal(t, 2, a.OutputTokens)
}

func TestReplyNext(t *testing.T) {
	t.Parallel()
	var c aifake.Controls
	c.ReplyNext(`{"summary": "x"}`, "two words")
	a := c.Generate("hello", 10, "hello")
	assert.Equal(t, `{"summary": "x"}`, a.Text)
	assert.Equal(t, 2, a.OutputTokens)
	assert.Equal(t, 1, a.InputTokens)
	assert.Equal(t, "two", c.Generate("hello", 1).Text)
	assert.Equal(t, "echo: hello", c.Generate("hello", 10).Text)
}
