package emaildomains

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// ReceivedMail is the S3 bucket an SES receipt rule's S3 action stores inbound mail in, for
// messages of any size up to MaxRawBytes (SES puts a message in an SNS notification only up
// to 150 KB). The SES inbound route reads a message there when its notification names it,
// and deletes it once received (docs/email.md, "Inbound mail").
type ReceivedMail struct {
	// Client reads and deletes the objects. Its role needs s3:GetObject and s3:DeleteObject
	// on the objects, and s3:ListBucket on the bucket so that a missing object is a 404,
	// not a 403.
	Client *s3.Client
	// Bucket is the one bucket read from: a notification that names another is ignored.
	Bucket string
}

var (
	// errMailGone: the object is not there (taken by an earlier delivery of the same
	// notification, or expired).
	errMailGone = errors.New("the stored message is gone")
	// errMailTooLarge: the object is larger than MaxRawBytes.
	errMailTooLarge = fmt.Errorf("the stored message is larger than %d bytes", MaxRawBytes)
	// errNotOurBucket: the notification names no object of the deployment's bucket (another
	// bucket, or no key).
	errNotOurBucket = errors.New("the notification names no object of the deployment's inbound bucket")
)

// take reads the message stored under key in bucket, at most MaxRawBytes of it.
func (m *ReceivedMail) take(ctx context.Context, bucket, key string) ([]byte, error) {
	if bucket != m.Bucket || key == "" {
		return nil, errNotOurBucket
	}
	out, err := m.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	var missing *types.NoSuchKey
	if errors.As(err, &missing) {
		return nil, errMailGone
	}
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > MaxRawBytes {
		return nil, errMailTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(out.Body, MaxRawBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRawBytes {
		return nil, errMailTooLarge
	}
	return b, nil
}

// discard deletes the message stored under key once it is received.
func (m *ReceivedMail) discard(ctx context.Context, bucket, key string) error {
	_, err := m.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
	return err
}
