package dns

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServer(t *testing.T) {
	t.Parallel()
	s := New(t)
	long := strings.Repeat("k", 400)
	s.TXT("sel._domainkey.Example.com", "v=DKIM1; p="+long)
	s.MX("bounce.example.com", "feedback.example.net", 10)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", s.Addr)
	}}
	txt, err := r.LookupTXT(t.Context(), "sel._domainkey.example.com")
	require.NoError(t, err)
	assert.Equal(t, []string{"v=DKIM1; p=" + long}, txt, "strings of one record are joined")
	mx, err := r.LookupMX(t.Context(), "bounce.example.com")
	require.NoError(t, err)
	require.Len(t, mx, 1)
	assert.Equal(t, "feedback.example.net.", mx[0].Host)
	_, err = r.LookupTXT(t.Context(), "missing.example.com")
	var de *net.DNSError
	require.ErrorAs(t, err, &de)
	assert.True(t, de.IsNotFound)
	s.Clear("bounce.example.com")
	_, err = r.LookupMX(t.Context(), "bounce.example.com")
	assert.Error(t, err)
}
