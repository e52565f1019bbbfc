package emaildomains

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/emaildomains/internal/mimemail/mimemailtest"
	"github.com/botplatform/api/infra/access"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/sns/snstest"
)

// fakeBucket is an S3 endpoint holding one bucket's objects, speaking S3's REST API in
// path style as the SDK calls it: GET and DELETE of /<bucket>/<key>, a 404 NoSuchKey for
// a missing object, and, while failing is set, 500 InternalError. It logs each call as
// the IAM action S3 authorizes it with.
type fakeBucket struct {
	name string
	srv  *httptest.Server

	mu      sync.Mutex
	objects map[string][]byte
	calls   []string
	failing bool
}

func newFakeBucket(t *testing.T, name string) *fakeBucket {
	b := &fakeBucket{name: name, objects: map[string][]byte{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *fakeBucket) serve(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	b.mu.Lock()
	defer b.mu.Unlock()
	s3Error := func(code int, name string) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(code)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>r1</RequestId></Error>`, name, name)
	}
	switch r.Method {
	case http.MethodGet:
		b.calls = append(b.calls, "s3:GetObject "+key)
	case http.MethodDelete:
		b.calls = append(b.calls, "s3:DeleteObject "+key)
	default:
		s3Error(http.StatusMethodNotAllowed, "MethodNotAllowed")
		return
	}
	switch {
	case b.failing:
		s3Error(http.StatusInternalServerError, "InternalError")
	case bucket != b.name:
		s3Error(http.StatusNotFound, "NoSuchBucket")
	case r.Method == http.MethodDelete:
		delete(b.objects, key)
		w.WriteHeader(http.StatusNoContent)
	case b.objects[key] == nil:
		s3Error(http.StatusNotFound, "NoSuchKey")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(len(b.objects[key])))
		_, _ = w.Write(b.objects[key])
	}
}

func (b *fakeBucket) put(key string, body []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = body
}

func (b *fakeBucket) has(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.objects[key] != nil
}

func (b *fakeBucket) fail(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing = on
}

func (b *fakeBucket) log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// receivedMail is a ReceivedMail over the real S3 client, at the fake.
func (b *fakeBucket) receivedMail() *ReceivedMail {
	return &ReceivedMail{Bucket: b.name, Client: s3.New(s3.Options{
		Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		BaseEndpoint: aws.String(b.srv.URL), UsePathStyle: true, HTTPClient: b.srv.Client(),
		DisableLogOutputChecksumValidationSkipped: true,
		RetryMaxAttempts: 1,
	})}
}

// sesStoredReceipt is the notification of an SES receipt rule's S3 action: no content,
// the bucket and key where SES stored the message.
func sesStoredReceipt(t *testing.T, id string, recipients []string, bucket, key string) string {
	t.Helper()
	return receiptOf(t, id, recipients, "PASS", "PASS", "PASS", map[string]string{"type": "S3", "topicArn": testTopic,
		"bucketName": bucket, "objectKeyPrefix": "inbound/", "objectKey": key}, "")
}

// Mail over SES's 150 KB reaches the deployment through the receipt rule's S3 action: the
// notification names the object, which is read, received as any SES delivery, and then
// deleted. A redelivery finds it gone; a message over 10 MiB, or one in another bucket, is
// left alone; a bucket that fails for now is 503, so that SNS delivers again.
func TestSESInboundThroughS3(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	bucket := newFakeBucket(t, "botplatform-prod-inbound")
	in := newInbound(t, func(c *Config) {
		c.SNS = snsVerifier(fake, testTopic)
		c.ReceivedMail = bucket.receivedMail()
	})
	post := func(body string) httpapitest.Reply {
		return in.s.DoAs(t, "", "POST", "/esp/ses/inbound", fake.Sign(t, receipt("sns-"+fmt.Sprint(len(body)), body), "2"),
			"Content-Type", "text/plain; charset=UTF-8", "X-Amz-Sns-Message-Type", "Notification")
	}

	// About 1 MB: far over what SES puts in a notification.
	big := mimemailtest.SampleMail("someone@elsewhere.example", "big@sender.example")
	big = bytes.Replace(big, []byte("\r\n\r\n"), []byte("\r\nX-Padding: yes\r\n\r\n"+strings.Repeat("A long body line of a large message.\r\n", 28000)), 1)
	require.Greater(t, len(big), 1<<20)
	bucket.put("inbound/obj1", big)
	note := sesStoredReceipt(t, "ses-big-1", []string{"support@example.com"}, bucket.name, "inbound/obj1")
	r := post(note)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"])
	list := in.messages(t)
	require.Len(t, list, 1)
	assert.Equal(t, "ses-big-1", list[0]["provider_message_id"])
	assert.Equal(t, float64(len(big)), list[0]["size"])
	assert.False(t, bucket.has("inbound/obj1"), "deleted once received")
	assert.Equal(t, []string{"s3:GetObject inbound/obj1", "s3:DeleteObject inbound/obj1"}, bucket.log())

	r = post(note)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 0.0, r.JSON["stored"], "a redelivery finds the object gone")
	assert.Len(t, in.messages(t), 1)

	// A bucket that fails for now: 503, the object stays, SNS's next delivery takes it.
	bucket.put("inbound/obj2", mimemailtest.SampleMail("someone@elsewhere.example", "later@sender.example"))
	later := sesStoredReceipt(t, "ses-later-1", []string{"support@example.com"}, bucket.name, "inbound/obj2")
	bucket.fail(true)
	r = post(later)
	assert.Equal(t, http.StatusServiceUnavailable, r.Code, r.Body)
	assert.Equal(t, "provider_unavailable", r.Problem())
	bucket.fail(false)
	assert.True(t, bucket.has("inbound/obj2"))
	r = post(later)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 1.0, r.JSON["stored"])
	assert.False(t, bucket.has("inbound/obj2"))

	// Over 10 MiB: not received, left to the bucket's lifecycle.
	huge := append(mimemailtest.SampleMail("someone@elsewhere.example", "huge@sender.example"), bytes.Repeat([]byte("x"), MaxRawBytes)...)
	bucket.put("inbound/obj3", huge)
	r = post(sesStoredReceipt(t, "ses-huge-1", []string{"support@example.com"}, bucket.name, "inbound/obj3"))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 0.0, r.JSON["stored"])
	assert.True(t, bucket.has("inbound/obj3"))

	// Another bucket is never read.
	before := len(bucket.log())
	r = post(sesStoredReceipt(t, "ses-other-1", []string{"support@example.com"}, "someone-elses-bucket", "inbound/obj1"))
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 0.0, r.JSON["stored"])
	assert.Len(t, bucket.log(), before, "no call for another bucket")
	assert.Len(t, in.messages(t), 2)
	assert.Contains(t, in.f.logs.String(), "larger than")

	// What the code called S3 with is what the emaildomains Lambda is granted on the
	// inbound bucket (infra/access), with ListBucket so that a missing object is a 404.
	row := access.Access()["emaildomains"]
	for _, c := range append(bucket.log(), "s3:ListBucket") {
		a, _, _ := strings.Cut(c, " ")
		assert.True(t, slices.ContainsFunc(row, func(g access.Grant) bool {
			return g.On == access.InboundMailBucket && slices.Contains(g.Actions, a)
		}), "the emaildomains Lambda is not granted %s on the inbound bucket", a)
	}
}

// Without an inbound bucket (locally, or inbound not set up on AWS), an S3 action's
// notification is logged and acknowledged.
func TestSESInboundThroughS3NotConfigured(t *testing.T) {
	t.Parallel()
	fake := snstest.NewServer(t, t0)
	in := newInbound(t, func(c *Config) { c.SNS = snsVerifier(fake, testTopic) })
	note := fake.Sign(t, receipt("sns-1", sesStoredReceipt(t, "ses-1", []string{"support@example.com"}, "b", "inbound/k")), "2")
	r := in.s.DoAs(t, "", "POST", "/esp/ses/inbound", note, "Content-Type", "text/plain; charset=UTF-8", "X-Amz-Sns-Message-Type", "Notification")
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, 0.0, r.JSON["stored"])
	assert.Contains(t, in.f.logs.String(), "INBOUND_MAIL_BUCKET")
}
