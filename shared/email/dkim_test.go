package email

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGenerateKeyAndDNSRecord(t *testing.T) {
	t.Parallel()
	key := testKey()
	assert.Equal(t, 2048, key.N.BitLen())

	rec, err := DNSRecord(key.Public())
	require.NoError(t, err)
	const prefix = "v=DKIM1; k=rsa; p="
	require.True(t, strings.HasPrefix(rec, prefix), rec)
	der, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(rec, prefix))
	require.NoError(t, err)
	pub, err := x509.ParsePKIXPublicKey(der)
	require.NoError(t, err, "p= is a DER SubjectPublicKeyInfo")
	assert.True(t, key.PublicKey.Equal(pub))

	_, err = DNSRecord("not a key")
	assert.Error(t, err)
}

func TestSignVerifiesAndDetectsTampering(t *testing.T) {
	t.Parallel()
	raw, err := Build(sampleMessage(), time.Now())
	require.NoError(t, err)
	signed, err := Sign(raw, *testSigner())
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(signed, []byte("DKIM-Signature:")), "signature is prepended")
	require.True(t, bytes.HasSuffix(signed, raw), "message is unchanged after the signature")

	v := verifyDKIM(t, signed)
	assert.Equal(t, testDKIMDomain, v.Domain)
	var keys []string
	for _, k := range v.HeaderKeys {
		keys = append(keys, strings.ToLower(k))
	}
	assert.Equal(t, []string{"from", "to", "reply-to", "subject", "date", "message-id", "mime-version",
		"content-type", "list-unsubscribe", "list-unsubscribe-post"}, keys)
	sigHeader := string(signed[:bytes.Index(signed, []byte("\r\n\r\n"))])
	assert.Contains(t, sigHeader, "c=relaxed/relaxed")
	assert.Contains(t, sigHeader, "a=rsa-sha256")

	tamper := map[string][2]string{
		"body":             {"friends", "fiends"},
		"subject":          {"Subject: =?utf-8?", "Subject: =?UTF-8?"},
		"list-unsubscribe": {"u/abc123>", "u/abc124>"},
	}
	for name, tc := range tamper {
		changed := bytes.Replace(signed, []byte(tc[0]), []byte(tc[1]), 1)
		require.NotEqual(t, signed, changed, "%s: tampering changed nothing", name)
		v, err := dkimVerification(changed)
		require.NoError(t, err)
		assert.Error(t, v.Err, "%s: a tampered message must not verify", name)
	}

	// Relaxed canonicalization: a relay rewrapping header whitespace does not break it.
	rewrapped := bytes.Replace(signed, []byte("\r\nMIME-Version: 1.0"), []byte("\r\nMIME-Version:    1.0"), 1)
	require.NotEqual(t, signed, rewrapped)
	verifyDKIM(t, rewrapped)
}

func TestSignEd25519(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rec, err := DNSRecord(pub)
	require.NoError(t, err)
	assert.Equal(t, "v=DKIM1; k=ed25519; p="+base64.StdEncoding.EncodeToString(pub), rec)

	raw, err := Build(sampleMessage(), time.Now())
	require.NoError(t, err)
	signed, err := Sign(raw, Signer{Domain: "example.com", Selector: "ed", Key: priv})
	require.NoError(t, err)
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(signed), &dkim.VerifyOptions{
		LookupTXT: func(string) ([]string, error) { return []string{rec}, nil },
	})
	require.NoError(t, err)
	require.Len(t, verifs, 1)
	assert.NoError(t, verifs[0].Err)
}

func TestSignRefusesIncompleteSigner(t *testing.T) {
	t.Parallel()
	raw, err := Build(sampleMessage(), time.Now())
	require.NoError(t, err)
	for _, s := range []Signer{
		{Selector: "s1", Key: testKey()},
		{Domain: "example.com", Key: testKey()},
		{Domain: "example.com", Selector: "s1"},
	} {
		_, err := Sign(raw, s)
		assert.Error(t, err)
	}
	_, err = Sign([]byte("Subject: no from\r\n\r\nbody\r\n"), *testSigner())
	assert.ErrorContains(t, err, "no From")
}
