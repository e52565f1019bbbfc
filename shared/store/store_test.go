package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRevisionOrAbsent(t *testing.T) {
	t.Parallel()
	assert.Equal(t, MustNotExist, RevisionOrAbsent(0), "read as absent")
	assert.Equal(t, RevisionIs(7), RevisionOrAbsent(7))
	assert.True(t, RevisionOrAbsent(0).Holds(nil))
	assert.False(t, RevisionOrAbsent(0).Holds(&Item{Revision: 1}))
	assert.True(t, RevisionOrAbsent(3).Holds(&Item{Revision: 3}))
	assert.False(t, RevisionOrAbsent(3).Holds(nil))
}
