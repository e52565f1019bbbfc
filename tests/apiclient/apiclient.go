// Package apiclient is the small JSON client the programs beside the tests (make demo, make
// bench) call the local API with: one copy of the request, the bearer token, the status
// check and the decoding.
package apiclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Client calls the API under Base with a bearer token.
type Client struct {
	HTTP  *http.Client
	Base  string
	Token string
}

// Call sends body (when not nil) as JSON to Base+path and decodes the answer into out (when
// not nil); a status of 300 or more is an error that carries the answer.
func (c *Client) Call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+c.Token)
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	res, err := c.HTTP.Do(r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		return fmt.Errorf("%s %s: status %d: %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}
