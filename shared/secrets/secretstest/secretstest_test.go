package secretstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Seal and Open are recorded as the KMS actions of the sealer's purpose, for the Lambda the
// context names, and not at all for a test's own setup; the values still open.
func TestRecords(t *testing.T) {
	s := New("purpose-a", 7)
	sealed, err := s.Seal(sqlitetest.As(t.Context(), "lambda-a"), []byte("x"), []byte("rec/1"))
	require.NoError(t, err)
	got, err := s.Open(t.Context(), sealed, []byte("rec/1"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
	_, err = s.Open(sqlitetest.Unrecorded(t.Context()), sealed, []byte("rec/1"))
	require.NoError(t, err)
	_, err = New("purpose-a", 8).Open(sqlitetest.As(t.Context(), "lambda-c"), sealed, []byte("rec/1"))
	require.Error(t, err, "another key opens nothing")

	uses := Uses()
	assert.Equal(t, map[Use]string{{Action: ActionSeal, Purpose: "purpose-a"}: "Seal rec/1"}, uses["lambda-a"])
	assert.Equal(t, map[Use]string{{Action: ActionOpen, Purpose: "purpose-a"}: "Open rec/1"}, uses[""])
	assert.Contains(t, uses, "lambda-c", "a failed open was still asked of KMS")
	assert.NotContains(t, uses, "-")

	assert.Same(t, s, Wrap(s, "purpose-b"), "a recording sealer keeps its purpose")
	assert.Nil(t, Wrap(nil, "purpose-b"))
	assert.Equal(t, "purpose-b", Wrap(s.Sealer, "purpose-b").(*Sealer).Purpose)
}
