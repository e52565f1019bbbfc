package email

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// otherSender is a Sender that cannot sign.
type otherSender struct{}

func (otherSender) Send(context.Context, Message) (Receipt, error) { return Receipt{}, nil }

// Signing copies the platform's senders with the signer, leaving the original as it was;
// another Sender cannot sign, and is fine only without a signer.
func TestSigning(t *testing.T) {
	t.Parallel()
	k := testSigner()
	for _, s := range []Sender{&SES{ConfigurationSet: "set"}, &SMTP{Addr: "127.0.0.1:25"}, &Sink{Dir: t.TempDir()}} {
		signed, ok := Signing(s, k)
		require.True(t, ok, "%T", s)
		assert.NotSame(t, s, signed, "%T: a copy", s)
		switch x := signed.(type) {
		case *SES:
			assert.Same(t, k, x.DKIM)
			assert.Equal(t, "set", x.ConfigurationSet)
			assert.Nil(t, s.(*SES).DKIM, "the original is unchanged")
		case *SMTP:
			assert.Same(t, k, x.DKIM)
			assert.Equal(t, "127.0.0.1:25", x.Addr)
			assert.Nil(t, s.(*SMTP).DKIM)
		case *Sink:
			assert.Same(t, k, x.DKIM)
			assert.Nil(t, s.(*Sink).DKIM)
		}
	}
	_, ok := Signing(otherSender{}, k)
	assert.False(t, ok, "it cannot sign")
	same, ok := Signing(otherSender{}, nil)
	assert.True(t, ok, "nothing to sign with")
	assert.Equal(t, otherSender{}, same)
}
