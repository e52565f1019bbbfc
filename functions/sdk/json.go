package sdk

import (
	"bytes"
	"encoding/json"
)

// jsonMarshal is json.Marshal without HTML escaping, as httpapi.WriteJSON writes.
func jsonMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
