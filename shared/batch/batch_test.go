package batch_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/shared/batch"
)

func TestError(t *testing.T) {
	t.Parallel()
	e := &batch.Error{What: "message(s) not sent", Err: context.DeadlineExceeded, Failures: []batch.Failure{
		{Index: 1, Code: "InternalError", Message: "boom"},
		{Index: 4, ID: "evt_1", Code: "Throttled", Message: "slow down"},
		{Index: 5}, {Index: 9},
	}}
	assert.Equal(t, "4 message(s) not sent; #1: InternalError: boom; #4 (evt_1): Throttled: slow down; #5: : ; and 1 more", e.Error())
	assert.ErrorIs(t, e, context.DeadlineExceeded)
	var target *batch.Error
	assert.True(t, errors.As(error(e), &target))
	assert.True(t, e.Failed(4))
	assert.False(t, e.Failed(2))
}
