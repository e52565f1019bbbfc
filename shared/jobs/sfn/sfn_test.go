package sfn

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/jobs"
)

// fakeSFN checks what the real service checks of a StartExecution call and records it.
type fakeSFN struct {
	mu    sync.Mutex
	calls []map[string]any
}

func (f *fakeSFN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Amz-Target") != "AWSStepFunctions.StartExecution" ||
		r.Header.Get("Content-Type") != "application/x-amz-json-1.0" ||
		r.Header.Get("Authorization") == "" {
		http.Error(w, `{"__type":"UnknownOperationException"}`, http.StatusBadRequest)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var in map[string]any
	if err := json.Unmarshal(b, &in); err != nil {
		http.Error(w, `{"__type":"SerializationException"}`, http.StatusBadRequest)
		return
	}
	if name, _ := in["name"].(string); !regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`).MatchString(name) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"__type":"InvalidName","message":"bad name"}`)
		return
	}
	f.mu.Lock()
	f.calls = append(f.calls, in)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	io.WriteString(w, `{"executionArn":"arn:aws:states:us-east-1:123456789012:execution:jobs:x","startDate":1.7E9}`)
}

func TestStartExecution(t *testing.T) {
	t.Parallel()
	fake := &fakeSFN{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	client := sfn.New(sfn.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	arn := "arn:aws:states:us-east-1:123456789012:stateMachine:jobs"
	s := NewStarter(client, arn, func(k string) bool { return k == "broadcasts.fan.out/v2" })
	require.NoError(t, s.Start(context.Background(), "broadcasts.fan.out/v2", map[string]string{"broadcast_id": "bc_1"}))
	require.Len(t, fake.calls, 1)
	call := fake.calls[0]
	assert.Equal(t, arn, call["stateMachineArn"])
	assert.Regexp(t, `^broadcasts-fan-out-v2-[0-9a-z]{26}$`, call["name"])
	var st jobs.State
	require.NoError(t, json.Unmarshal([]byte(call["input"].(string)), &st))
	assert.Equal(t, jobs.State{Kind: "broadcasts.fan.out/v2", Payload: json.RawMessage(`{"broadcast_id":"bc_1"}`)}, st)

	assert.ErrorIs(t, s.Start(context.Background(), "unknown", nil), jobs.ErrUnknownKind)
	assert.Len(t, fake.calls, 1, "unknown kinds never reach AWS")
	assert.LessOrEqual(t, len(executionName(string(make([]byte, 200)))), 80)
}
