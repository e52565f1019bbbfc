package crmfake

import (
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Consent opens authURL as the consenting user's browser does and returns the query of the
// redirect the authorization server answers (code and state, or error); an answer that is
// not a redirect is returned as an error with its status.
func Consent(authURL string) (url.Values, error) {
	c := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Get(authURL)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusFound && res.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("authorization page answered %d, not a redirect", res.StatusCode)
	}
	to, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		return nil, err
	}
	return to.Query(), nil
}
