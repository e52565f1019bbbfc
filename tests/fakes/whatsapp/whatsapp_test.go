package whatsapp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// call makes one raw request to the fake and decodes its JSON answer.
func call(t *testing.T, method, url, auth string, body []byte, headers map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range headers {
		req.Header[k] = []string{v}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// The fake checks what the Graph API checks, in the Graph API's error shape.
func TestFakeChecks(t *testing.T) {
	t.Parallel()
	s := New(t)
	bearer := "Bearer " + AccessToken
	if st, m := call(t, "GET", s.URL()+"/"+PhoneNumberID, "", nil, nil); st != 400 || errCode(m) != 2500 {
		t.Errorf("no token: %d %v", st, m)
	}
	if st, m := call(t, "GET", s.URL()+"/"+PhoneNumberID, "Bearer nope", nil, nil); st != 401 || errCode(m) != 190 {
		t.Errorf("bad token: %d %v", st, m)
	}
	st, m := call(t, "GET", s.URL()+"/"+PhoneNumberID, bearer, nil, nil)
	if st != 200 || m["display_phone_number"] != DisplayPhoneNumber {
		t.Errorf("phone: %d %v", st, m)
	}
	_, m = call(t, "GET", s.URL()+"/42", bearer, nil, nil)
	if e, _ := m["error"].(map[string]any); e["error_subcode"] != float64(33) || e["fbtrace_id"] == "" {
		t.Errorf("unknown object: %v", e)
	}

	// The resumable upload protocol: the session's offset, length and type are checked.
	st, m = call(t, "POST", s.URL()+"/"+AppID+"/uploads?file_length=12&file_type=image/png", bearer, nil, nil)
	if st != 200 || !strings.HasPrefix(m["id"].(string), "upload:") || !strings.Contains(m["id"].(string), "?sig=") {
		t.Fatalf("session: %d %v", st, m)
	}
	session := s.URL() + "/" + m["id"].(string)
	png := []byte("\x89PNG\r\n\x1a\nabcd")
	for name, tc := range map[string]struct {
		offset string
		body   []byte
	}{"wrong offset": {"4", png}, "no offset": {"", png}, "short": {"0", png[:5]}} {
		h := map[string]string{}
		if tc.offset != "" {
			h["file_offset"] = tc.offset
		}
		if st, m := call(t, "POST", session, "OAuth "+AccessToken, tc.body, h); st != 400 || errCode(m) != 100 {
			t.Errorf("%s: %d %v", name, st, m)
		}
	}
	if st, _ := call(t, "POST", strings.Replace(session, "?sig=", "?sig=x", 1), "OAuth "+AccessToken, png, map[string]string{"file_offset": "0"}); st != 400 {
		t.Errorf("wrong signature: %d", st)
	}
	st, m = call(t, "POST", session, "OAuth "+AccessToken, png, map[string]string{"file_offset": "0"})
	if st != 200 || m["h"] == "" {
		t.Errorf("upload: %d %v", st, m)
	}
	if st, m := call(t, "GET", session, "OAuth "+AccessToken, nil, nil); st != 200 || m["file_offset"] != float64(12) {
		t.Errorf("offset after upload: %d %v", st, m)
	}
	if st, m := call(t, "POST", s.URL()+"/"+AppID+"/uploads?file_length=3&file_type=image/gif", bearer, nil, nil); st != 400 || errCode(m) != 100 {
		t.Errorf("gif: %d %v", st, m)
	}
	if len(s.Uploads()) != 1 {
		t.Errorf("uploads: %v", s.Uploads())
	}

	// Messages: required fields and limits.
	send := func(body string) (int, map[string]any) {
		return call(t, "POST", s.URL()+"/"+PhoneNumberID+"/messages", bearer, []byte(body), map[string]string{"Content-Type": "application/json"})
	}
	if st, m := send(`{"to":"4915112345678","type":"text","text":{"body":"x"}}`); st != 400 || errCode(m) != 100 {
		t.Errorf("no messaging_product: %d %v", st, m)
	}
	if st, m := send(`{"messaging_product":"whatsapp","to":"4915112345678","type":"text","text":{"body":"` + strings.Repeat("x", 4097) + `"}}`); st != 400 {
		t.Errorf("long text: %d %v", st, m)
	}
	if st, m := send(`{"messaging_product":"whatsapp","to":"4915112345678","type":"sticker","sticker":{"link":"https://x"}}`); st != 400 || errCode(m) != 131051 {
		t.Errorf("sticker: %d %v", st, m)
	}
	if st, m := send(`{"messaging_product":"whatsapp","to":"4915112345678","type":"text","text":{"body":"hi"}}`); st != 200 {
		t.Errorf("text: %d %v", st, m)
	}
	if got := s.Messages(); len(got) != 1 || got[0].To != "4915112345678" {
		t.Errorf("recorded: %v", got)
	}

	// Template parameters: present, one line.
	s.AddTemplate("order_update", "en_US", "UTILITY", "APPROVED", `[{"type":"BODY","text":"Hi {{1}}"}]`)
	tpl := func(param string) string {
		return `{"messaging_product":"whatsapp","to":"4915112345678","type":"template","template":{"name":"order_update","language":{"code":"en_US"},` +
			`"components":[{"type":"body","parameters":[{"type":"text","text":` + param + `}]}]}}`
	}
	for param, code := range map[string]float64{`""`: 131008, `"a\nb"`: 132018, `"a\tb"`: 132018, `"a     b"`: 132018} {
		if st, m := send(tpl(param)); st != 400 || errCode(m) != code {
			t.Errorf("template parameter %s: %d %v", param, st, m)
		}
	}
	if st, m := send(tpl(`"Ann"`)); st != 200 {
		t.Errorf("template: %d %v", st, m)
	}
}
