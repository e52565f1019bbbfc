package smtp

import (
	"net/smtp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServer(t *testing.T) {
	t.Parallel()
	s := New(t)
	s.Reject("gone@example.com")
	msg := "From: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nbody\r\n"
	require.NoError(t, smtp.SendMail(s.Addr, nil, "a@example.com", []string{"b@example.com"}, []byte(msg)))
	err := smtp.SendMail(s.Addr, nil, "a@example.com", []string{"gone@example.com"}, []byte(msg))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "550")
	got := s.Messages()
	require.Len(t, got, 1)
	assert.Equal(t, []string{"b@example.com"}, got[0].To)
	assert.True(t, strings.Contains(string(got[0].Data), "Subject: hi"))
}
