package awsfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// StepFunctions is AWS Step Functions (AWS JSON 1.0, AWSStepFunctions.StartExecution),
// signed for "states".
var StepFunctions = Protocol{SigningName: "states", TargetPrefix: "AWSStepFunctions", ContentType: "application/x-amz-json-1.0"}

// Execution is one execution a StateMachines fake started.
type Execution struct {
	StateMachineArn string
	Name            string
	// Input is the execution's input as sent: a JSON document ("{}" when none was given,
	// as the service defaults it).
	Input string
	// ARN is the execution ARN the fake answered with.
	ARN string
}

// StateMachinesServer is a fake Step Functions endpoint: a Server that records the
// executions it started. Nothing runs them: the test reads them (Executions) and plays the
// state machine itself.
type StateMachinesServer struct {
	*Server

	mu    sync.Mutex
	execs []Execution
}

// Executions returns the executions started so far, in order (refused calls are not
// among them; Calls("StartExecution") has every request).
func (s *StateMachinesServer) Executions() []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Execution(nil), s.execs...)
}

// stateMachineARN is the form of a state machine's ARN; its last part is the name.
var stateMachineARN = regexp.MustCompile(`^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:([A-Za-z0-9_-]{1,80})$`)

// maxInput is the service's limit on an execution's input (256 KiB of UTF-8).
const maxInput = 256 * 1024

// StateMachines starts a fake Step Functions endpoint whose StartExecution starts executions
// of the state machines arns, as the service answers it: a malformed ARN is 400
// InvalidArn, a state machine it does not hold StateMachineDoesNotExist, a name longer
// than 80 characters or with characters the service refuses InvalidName, an input that is
// not JSON (or over 256 KiB) InvalidExecutionInput, and a name already used on the state
// machine ExecutionAlreadyExists unless the input is the same (a Standard workflow's
// idempotent start, which answers the first execution again and starts none). A body with
// fields StartExecution does not have is refused.
func StateMachines(t testing.TB, arns ...string) *StateMachinesServer {
	t.Helper()
	s := &StateMachinesServer{Server: New(t, StepFunctions)}
	for _, arn := range arns {
		if !stateMachineARN.MatchString(arn) {
			t.Fatalf("awsfake sfn: %q is not a state machine ARN", arn)
		}
	}
	s.Handle("StartExecution", func(body json.RawMessage) (any, *Error) {
		var in struct {
			StateMachineArn string  `json:"stateMachineArn"`
			Name            *string `json:"name"`
			Input           *string `json:"input"`
			TraceHeader     *string `json:"traceHeader"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			t.Errorf("awsfake sfn: StartExecution body %s: %v", body, err)
			return nil, &Error{Status: 400, Type: "ValidationException", Message: "malformed StartExecution request"}
		}
		m := stateMachineARN.FindStringSubmatch(in.StateMachineArn)
		if m == nil {
			return nil, &Error{Status: 400, Type: "InvalidArn", Message: "Invalid Arn: '" + in.StateMachineArn + "'"}
		}
		known := false
		for _, arn := range arns {
			known = known || arn == in.StateMachineArn
		}
		if !known {
			return nil, &Error{Status: 400, Type: "StateMachineDoesNotExist", Message: "State Machine Does Not Exist: '" + in.StateMachineArn + "'"}
		}
		name := fmt.Sprintf("%032x", time.Now().UnixNano()) // the service makes a UUID
		if in.Name != nil {
			name = *in.Name
		}
		if !validExecutionName(name) {
			return nil, &Error{Status: 400, Type: "InvalidName", Message: "Invalid Name: '" + name + "'"}
		}
		input := "{}"
		if in.Input != nil {
			input = *in.Input
		}
		if len(input) > maxInput || !json.Valid([]byte(input)) {
			return nil, &Error{Status: 400, Type: "InvalidExecutionInput", Message: "Invalid State Machine Execution Input: the input is not JSON or too large"}
		}
		arn := strings.Replace(in.StateMachineArn, ":stateMachine:", ":execution:", 1) + ":" + name

		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.execs {
			if e.ARN != arn {
				continue
			}
			if e.Input != input {
				return nil, &Error{Status: 400, Type: "ExecutionAlreadyExists", Message: "Execution Already Exists: '" + arn + "'"}
			}
			return startOutput(arn), nil
		}
		s.execs = append(s.execs, Execution{StateMachineArn: in.StateMachineArn, Name: name, Input: input, ARN: arn})
		return startOutput(arn), nil
	})
	return s
}

func startOutput(arn string) map[string]any {
	// startDate: AWS JSON sends timestamps as epoch seconds.
	return map[string]any{"executionArn": arn, "startDate": float64(time.Now().UnixMilli()) / 1000}
}

// validExecutionName holds a name to the service's rules: 1 to 80 characters, none of
// them whitespace, a control character or one of  < > { } [ ] ? * " # % \ ^ | ~ ` $ & , ; : /
func validExecutionName(name string) bool {
	if name == "" || len([]rune(name)) > 80 {
		return false
	}
	for _, c := range name {
		if c <= ' ' || c == 0x7f || (c >= 0x80 && c <= 0x9f) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", c) {
			return false
		}
	}
	return true
}
