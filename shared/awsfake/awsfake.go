// Package awsfake is a fake AWS JSON-protocol endpoint on 127.0.0.1 for tests of the SDK
// clients in shared/. It checks what the real service checks before it would answer: a
// POST to "/", the protocol's Content-Type, an X-Amz-Target naming a known operation, a
// SigV4 signature that verifies with the test credentials for the service's signing name,
// and a JSON object body. Tests register one function per operation and read back the
// bodies the SDK sent.
package awsfake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Protocol describes how a service speaks AWS JSON.
type Protocol struct {
	// SigningName is the service in the SigV4 credential scope.
	SigningName string
	// TargetPrefix precedes the operation in X-Amz-Target ("AmazonSQS.SendMessageBatch").
	TargetPrefix string
	// ContentType is application/x-amz-json-1.0 or -1.1 (application/json for REST).
	ContentType string
	// REST, for a service that speaks REST-JSON (the operation in the method and path, the
	// body a JSON object), maps "METHOD /path/prefix/" to the operation's name.
	REST map[string]string
}

// The protocols of the services the platform talks to.
var (
	SQS         = Protocol{SigningName: "sqs", TargetPrefix: "AmazonSQS", ContentType: "application/x-amz-json-1.0"}
	EventBridge = Protocol{SigningName: "events", TargetPrefix: "AWSEvents", ContentType: "application/x-amz-json-1.1"}
	KMS         = Protocol{SigningName: "kms", TargetPrefix: "TrentService", ContentType: "application/x-amz-json-1.1"}
	// SSM is Systems Manager (Parameter Store: GetParameter).
	SSM = Protocol{SigningName: "ssm", TargetPrefix: "AmazonSSM", ContentType: "application/x-amz-json-1.1"}
	// Scheduler is EventBridge Scheduler (REST-JSON: CreateSchedule is POST /schedules/{Name}).
	Scheduler = Protocol{SigningName: "scheduler", ContentType: "application/json",
		REST: map[string]string{"POST /schedules/": "CreateSchedule"}}
)

// Test credentials and region the fake verifies signatures with.
const (
	AccessKeyID     = "AKIDFAKEFAKEFAKE"
	SecretAccessKey = "fake-secret-access-key"
	Region          = "us-east-1"
)

// Error is an AWS error response.
type Error struct {
	Status  int
	Type    string // e.g. "ThrottlingException", sent as __type
	Message string
}

// Op answers one operation: a JSON-marshalable response, or an error.
type Op func(body json.RawMessage) (any, *Error)

// Call is one request the fake accepted.
type Call struct {
	Op   string
	Body json.RawMessage
	// Path is the request's path (a REST operation names its resource there).
	Path string
}

// Server is a fake endpoint for one service.
type Server struct {
	// URL is the base endpoint to give the SDK.
	URL string

	t     testing.TB
	proto Protocol

	mu    sync.Mutex
	ops   map[string]Op
	calls []Call
}

// New starts a fake for proto on 127.0.0.1, closed when the test ends.
func New(t testing.TB, proto Protocol) *Server {
	t.Helper()
	s := &Server{t: t, proto: proto, ops: make(map[string]Op)}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Handle sets the function that answers op (the name after the target prefix).
func (s *Server) Handle(op string, fn Op) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops[op] = fn
}

// Paths returns the paths of the accepted requests for op, in order.
func (s *Server) Paths(op string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if c.Op == op {
			out = append(out, c.Path)
		}
	}
	return out
}

// Calls returns the bodies of the accepted requests for op, in order.
func (s *Server) Calls(op string) []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []json.RawMessage
	for _, c := range s.calls {
		if c.Op == op {
			out = append(out, c.Body)
		}
	}
	return out
}

// Config returns an SDK configuration aimed at the fake: static test credentials, the test
// region, BaseEndpoint at the fake, and one attempt per call so that tests count exactly
// the calls the code under test makes (its own retries, not the SDK's).
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:           Region,
		Credentials:      credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		BaseEndpoint:     aws.String(s.URL),
		RetryMaxAttempts: 1,
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.fail(w, http.StatusBadRequest, "SerializationException", "read body: "+err.Error())
		return
	}
	op, ok := s.operation(r)
	if !ok {
		s.fail(w, http.StatusNotFound, "UnknownOperationException", r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Amz-Target"))
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != s.proto.ContentType {
		s.fail(w, http.StatusBadRequest, "SerializationException", fmt.Sprintf("Content-Type %q, want %q", ct, s.proto.ContentType))
		return
	}
	s.mu.Lock()
	fn := s.ops[op]
	s.mu.Unlock()
	if !ok || fn == nil {
		s.fail(w, http.StatusBadRequest, "UnknownOperationException", "X-Amz-Target "+r.Header.Get("X-Amz-Target"))
		return
	}
	if err := s.verifySignature(r, body); err != nil {
		s.fail(w, http.StatusForbidden, "SignatureDoesNotMatch", err.Error())
		return
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		s.fail(w, http.StatusBadRequest, "SerializationException", "body is not a JSON object: "+err.Error())
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Op: op, Body: body, Path: r.URL.Path})
	s.mu.Unlock()

	resp, aerr := fn(body)
	if aerr != nil {
		s.writeError(w, aerr)
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		s.t.Errorf("awsfake: marshal %s response: %v", op, err)
		s.writeError(w, &Error{Status: 500, Type: "InternalFailure", Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", s.proto.ContentType)
	w.Header().Set("X-Amzn-RequestId", "fake-request-id")
	_, _ = w.Write(b)
}

// operation names the operation r calls: by its path (REST) or its X-Amz-Target.
func (s *Server) operation(r *http.Request) (string, bool) {
	if s.proto.REST != nil {
		for route, op := range s.proto.REST {
			method, prefix, _ := strings.Cut(route, " ")
			if r.Method == method && strings.HasPrefix(r.URL.Path, prefix) && len(r.URL.Path) > len(prefix) {
				return op, true
			}
		}
		return "", false
	}
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return "", false
	}
	return strings.CutPrefix(r.Header.Get("X-Amz-Target"), s.proto.TargetPrefix+".")
}

// verifySignature re-signs the request's signed headers and body with the test credentials
// and compares, as the service would; it also pins the credential scope's region and
// service, which catches a client built for the wrong service.
func (s *Server) verifySignature(r *http.Request, body []byte) error {
	auth := r.Header.Get("Authorization")
	wantScope := fmt.Sprintf("/%s/%s/aws4_request", Region, s.proto.SigningName)
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+AccessKeyID+"/") || !strings.Contains(auth, wantScope) {
		return fmt.Errorf("authorization %q lacks credential scope %s", auth, wantScope)
	}
	_, signed, ok := strings.Cut(auth, "SignedHeaders=")
	if !ok {
		return fmt.Errorf("authorization without SignedHeaders")
	}
	signed, _, _ = strings.Cut(signed, ",")
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %w", err)
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return fmt.Errorf("X-Amz-Content-Sha256 does not match the body")
	}

	req, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for _, h := range strings.Split(signed, ";") {
		switch h {
		case "host":
			req.Host = r.Host
		case "content-length":
			req.ContentLength = int64(len(body))
		default:
			req.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	creds := aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, s.proto.SigningName, Region, when); err != nil {
		return err
	}
	if got := req.Header.Get("Authorization"); got != auth {
		return fmt.Errorf("signature mismatch: sent %q, expected %q", auth, got)
	}
	return nil
}

// fail answers a request the real service would refuse, and fails the test: the client
// under test sent something malformed.
func (s *Server) fail(w http.ResponseWriter, status int, typ, msg string) {
	s.t.Errorf("awsfake %s: refused request: %s: %s", s.proto.SigningName, typ, msg)
	s.writeError(w, &Error{Status: status, Type: typ, Message: msg})
}

func (s *Server) writeError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", s.proto.ContentType)
	w.Header().Set("X-Amzn-ErrorType", e.Type)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": e.Type, "message": e.Message})
}
