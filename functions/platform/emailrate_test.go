package platform

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// EMAIL_RATE is the deployment's email rate: unset leaves the default (0), a number is
// taken as written, anything else fails the cold start.
func TestEmailRate(t *testing.T) {
	t.Parallel()
	r, err := emailRate("")
	require.NoError(t, err)
	assert.Zero(t, r)
	r, err = emailRate("250")
	require.NoError(t, err)
	assert.Equal(t, 250.0, r)
	r, err = emailRate("0.5")
	require.NoError(t, err)
	assert.Equal(t, 0.5, r)
	for _, bad := range []string{"fast", "0", "-14", "NaN", "+Inf", "14/s"} {
		_, err := emailRate(bad)
		assert.ErrorContains(t, err, EnvEmailRate, bad)
	}
}
