package awsfake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Account is the account id in the ARNs the fakes answer with.
const Account = "123456789012"

// Parameter is one Parameter Store parameter of the fake.
type Parameter struct {
	Type  string // "SecureString" (the default), "String" or "StringList"
	Value string
}

// ParameterStore starts a fake SSM endpoint serving GetParameter over params (by name), as
// Parameter Store answers it: a parameter it does not hold is 400 ParameterNotFound, a
// SecureString's value is plaintext only with WithDecryption true (else an opaque
// ciphertext, as the service sends), and a body with other fields is refused.
func ParameterStore(t testing.TB, params map[string]Parameter) *Server {
	t.Helper()
	s := New(t, SSM)
	s.Handle("GetParameter", func(body json.RawMessage) (any, *Error) {
		var in struct {
			Name           string
			WithDecryption *bool
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || in.Name == "" {
			t.Errorf("awsfake ssm: GetParameter body %s: %v", body, err)
			return nil, &Error{Status: 400, Type: "ValidationException", Message: "malformed GetParameter request"}
		}
		p, ok := params[in.Name]
		if !ok {
			return nil, &Error{Status: 400, Type: "ParameterNotFound", Message: fmt.Sprintf("parameter %s not found", in.Name)}
		}
		if p.Type == "" {
			p.Type = "SecureString"
		}
		value := p.Value
		if p.Type == "SecureString" && (in.WithDecryption == nil || !*in.WithDecryption) {
			value = base64.StdEncoding.EncodeToString([]byte("ciphertext of " + in.Name))
		}
		return map[string]any{"Parameter": map[string]any{
			"Name": in.Name, "Type": p.Type, "Value": value, "Version": 1, "DataType": "text",
			"ARN": "arn:aws:ssm:" + Region + ":" + Account + ":parameter/" + strings.TrimPrefix(in.Name, "/"),
		}}, nil
	})
	return s
}
