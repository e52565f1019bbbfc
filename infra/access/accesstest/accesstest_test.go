package accesstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	assert.NoError(t, Check(map[string]string{"dynamodb:GetItem": "Get a/b"}, "authorizer"))
	err := Check(map[string]string{"dynamodb:GetItem": "Get a/b", "dynamodb:UpdateItem": "Transact: Add x/y"}, "authorizer")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dynamodb:UpdateItem (needed by Transact: Add x/y)")
	assert.NotContains(t, err.Error(), "GetItem")
	assert.NoError(t, Check(map[string]string{"dynamodb:UpdateItem": "Add"}, "authorizer", "jobs"), "either Lambda may hold it")
	assert.Error(t, Check(nil, "nobody"))
}
