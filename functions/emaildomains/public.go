package emaildomains

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/mail"
	"strings"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/sns"
)

// InboundSecretHeader carries the shared secret of local deliveries.
const InboundSecretHeader = "X-Inbound-Secret"

// Bounds of delivery bodies.
const (
	// maxJSONDelivery fits a MaxRawBytes message in base64 and the rest of the document.
	maxJSONDelivery = (MaxRawBytes+2)/3*4 + 64<<10
	// maxSNSDelivery: SNS messages are at most 256 KB; SES includes a message's content
	// in its SNS notification only up to 150 KB.
	maxSNSDelivery = httpapi.MaxBodyBytes
)

// LocalDelivery is the JSON form of POST /esp/local/inbound: the message as received, in
// base64, and optionally its envelope recipients (without them, the To and Cc headers'
// addresses are the recipients; Bcc recipients need them).
type LocalDelivery struct {
	Raw        string   `json:"raw"`
	Recipients []string `json:"recipients"`
}

// Validate checks what decoding cannot.
func (d *LocalDelivery) Validate() error {
	var p httpapi.Problems
	if d.Raw == "" {
		p.Add("raw", "is required: the RFC 5322 message in base64")
	}
	if len(d.Recipients) > maxRecipients {
		p.Add("recipients", "at most %d", maxRecipients)
	}
	for i, r := range d.Recipients {
		if a, err := mail.ParseAddress(r); err != nil || a.Address != r {
			p.Add("recipients", "recipient %d is not one email address", i)
			break
		}
	}
	return p.Err()
}

func errNotConfigured(provider string) error {
	return httpapi.Errorf(httpapi.KindForbidden, "inbound_not_configured", "this deployment takes no inbound mail from %s", provider)
}

// inbound serves POST /esp/{provider}/inbound.
func (h *Handlers) inbound(w http.ResponseWriter, r *http.Request) error {
	var (
		res Result
		err error
	)
	switch r.PathValue("provider") {
	case ProviderLocal:
		res, err = h.localInbound(w, r)
	case ProviderSES:
		return h.sesInbound(w, r)
	default:
		return httpapi.NotFound("inbound mail provider")
	}
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

// unauthentic answers a delivery that failed its check, logged without what it presented.
func (h *Handlers) unauthentic(r *http.Request, provider string, err error) error {
	h.svc.log.WarnContext(r.Context(), "inbound delivery failed authentication", "request_id", httpapi.RequestID(r.Context()),
		"provider", provider, "reason", err.Error())
	return httpapi.E(httpapi.KindUnauthenticated, "unauthentic_webhook", "the delivery failed the provider's authentication")
}

// localInbound takes a message from the deployment's own mail server or a test: the JSON
// form (LocalDelivery) or the message itself as message/rfc822, authenticated by the shared
// secret in X-Inbound-Secret.
func (h *Handlers) localInbound(w http.ResponseWriter, r *http.Request) (Result, error) {
	s := h.svc
	if s.secret == "" {
		return Result{}, errNotConfigured(ProviderLocal)
	}
	// Hashed first, so the comparison's time does not depend on the lengths either.
	got, want := sha256.Sum256([]byte(r.Header.Get(InboundSecretHeader))), sha256.Sum256([]byte(s.secret))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		return Result{}, h.unauthentic(r, ProviderLocal, errors.New("wrong or missing "+InboundSecretHeader))
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	d := delivery{provider: ProviderLocal}
	switch {
	case mt == "message/rfc822":
		raw, err := readBody(w, r, MaxRawBytes)
		if err != nil {
			return Result{}, err
		}
		d.raw = raw
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		body, err := readBody(w, r, maxJSONDelivery)
		if err != nil {
			return Result{}, err
		}
		var req LocalDelivery
		if err := httpapi.DecodeJSON(body, &req, ""); err != nil {
			return Result{}, err
		}
		if base64.StdEncoding.DecodedLen(len(req.Raw)) > MaxRawBytes+2 {
			return Result{}, errMessageTooLarge()
		}
		if d.raw, err = base64.StdEncoding.DecodeString(req.Raw); err != nil {
			var p httpapi.Problems
			p.Add("raw", "is not base64 (RFC 4648, with padding)")
			return Result{}, p.Err()
		}
		d.recipients = req.Recipients
	default:
		return Result{}, httpapi.E(httpapi.KindUnsupportedMediaType, "unsupported_media_type",
			"inbound mail is application/json ({\"raw\": \"<base64 message>\"}) or message/rfc822")
	}
	return s.receive(r.Context(), d)
}

// readBody reads the whole body, at most limit bytes (413 message_too_large beyond).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errMessageTooLarge()
	}
	if err != nil {
		return nil, httpapi.E(httpapi.KindInvalid, "invalid_body", "the body could not be read").Wrap(err)
	}
	return body, nil
}

// sesNotification is the part of an SES receipt notification (SNS action) used here.
type sesNotification struct {
	NotificationType string `json:"notificationType"`
	Mail             struct {
		MessageID string `json:"messageId"`
	} `json:"mail"`
	Receipt struct {
		Recipients   []string   `json:"recipients"`
		SpamVerdict  sesVerdict `json:"spamVerdict"`
		VirusVerdict sesVerdict `json:"virusVerdict"`
		SPFVerdict   sesVerdict `json:"spfVerdict"`
		DKIMVerdict  sesVerdict `json:"dkimVerdict"`
		DMARCVerdict sesVerdict `json:"dmarcVerdict"`
		Action       struct {
			Type     string `json:"type"`
			Encoding string `json:"encoding"`
			// An S3 action's: where SES stored the message.
			BucketName string `json:"bucketName"`
			ObjectKey  string `json:"objectKey"`
		} `json:"action"`
	} `json:"receipt"`
	Content string `json:"content"`
}

type sesVerdict struct {
	Status string `json:"status"`
}

// sesInbound takes SES receipt notifications through SNS: the SNS signature is verified,
// subscriptions of an accepted topic are confirmed, and a notification's message is
// received with SES's recipients and verdicts.
func (h *Handlers) sesInbound(w http.ResponseWriter, r *http.Request) error {
	s := h.svc
	if s.sns == nil {
		return errNotConfigured(ProviderSES)
	}
	body, err := readBody(w, r, maxSNSDelivery)
	if err != nil {
		return err
	}
	msg, err := s.sns.Verify(r.Context(), body)
	switch {
	case errors.Is(err, sns.ErrNotConfigured):
		return errNotConfigured(ProviderSES)
	case errors.Is(err, sns.ErrUnavailable):
		// The signing certificate could not be fetched: SNS delivers a 5xx again.
		s.log.WarnContext(r.Context(), "SNS delivery not verified for now", "request_id", httpapi.RequestID(r.Context()),
			"provider", ProviderSES, "error", err)
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the delivery cannot be verified right now; retry").Wrap(err)
	case err != nil:
		return h.unauthentic(r, ProviderSES, err)
	}
	log := s.log.With("request_id", httpapi.RequestID(r.Context()), "provider", ProviderSES, "topic", msg.TopicARN, "sns_message_id", msg.MessageID)
	switch msg.Type {
	case sns.TypeSubscriptionConfirmation:
		err := s.sns.Confirm(r.Context(), msg)
		if errors.Is(err, sns.ErrUnauthentic) {
			return h.unauthentic(r, ProviderSES, err)
		}
		if err != nil {
			log.ErrorContext(r.Context(), "SNS subscription not confirmed", "error", err)
			return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the subscription could not be confirmed; retry").Wrap(err)
		}
		log.InfoContext(r.Context(), "SNS subscription confirmed")
		return httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"confirmed": true})
	case sns.TypeUnsubscribeConfirmation:
		log.WarnContext(r.Context(), "SNS subscription ended")
		return httpapi.WriteJSON(w, http.StatusOK, Result{})
	}
	var n sesNotification
	if err := json.Unmarshal([]byte(msg.Message), &n); err != nil || n.NotificationType != "Received" {
		// Not a receipt (a topic shared with other notifications): nothing to take.
		log.WarnContext(r.Context(), "SNS notification that is no SES receipt ignored", "notification_type", n.NotificationType)
		return httpapi.WriteJSON(w, http.StatusOK, Result{})
	}
	d := delivery{provider: ProviderSES, providerID: n.Mail.MessageID, recipients: n.Receipt.Recipients,
		verdicts: &Verdicts{Spam: n.Receipt.SpamVerdict.Status, Virus: n.Receipt.VirusVerdict.Status, SPF: n.Receipt.SPFVerdict.Status,
			DKIM: n.Receipt.DKIMVerdict.Status, DMARC: n.Receipt.DMARCVerdict.Status}}
	a := n.Receipt.Action
	switch {
	case n.Content == "" && strings.EqualFold(a.Type, "S3"):
		return h.sesStored(w, r, log, d, a.BucketName, a.ObjectKey)
	case n.Content == "":
		// An SNS action's notification of a message over 150 KB: SES leaves the content out.
		log.ErrorContext(r.Context(), "SES receipt without the message content ignored (receive through an S3 action for messages over 150 KB)",
			"ses_message_id", n.Mail.MessageID)
		return httpapi.WriteJSON(w, http.StatusOK, Result{})
	case strings.EqualFold(a.Encoding, "UTF8"):
		d.raw = []byte(n.Content)
	default:
		if d.raw, err = base64.StdEncoding.DecodeString(n.Content); err != nil {
			log.ErrorContext(r.Context(), "SES receipt content is not base64", "ses_message_id", n.Mail.MessageID)
			return httpapi.E(httpapi.KindUnprocessable, "invalid_message", "the receipt's content is not base64")
		}
	}
	res, err := s.receive(r.Context(), d)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}

// sesStored receives a message an SES receipt rule's S3 action stored in bucket under key:
// read from the deployment's inbound bucket (ReceivedMail), received as any SES delivery,
// then deleted. A notification whose message is gone (an earlier delivery of it took it),
// larger than MaxRawBytes, or in another bucket is logged and acknowledged; a bucket that
// cannot be read now is 503 provider_unavailable, and SNS delivers the notification again.
func (h *Handlers) sesStored(w http.ResponseWriter, r *http.Request, log *slog.Logger, d delivery, bucket, key string) error {
	s := h.svc
	ctx := r.Context()
	log = log.With("ses_message_id", d.providerID, "bucket", bucket, "object_key", key)
	if s.received == nil {
		log.ErrorContext(ctx, "SES receipt stored in S3 ignored: this deployment reads no inbound bucket (INBOUND_MAIL_BUCKET)")
		return httpapi.WriteJSON(w, http.StatusOK, Result{})
	}
	raw, err := s.received.take(ctx, bucket, key)
	switch {
	case errors.Is(err, errMailGone):
		log.InfoContext(ctx, "SES receipt whose stored message is gone ignored (taken by an earlier delivery, or expired)")
		return httpapi.WriteJSON(w, http.StatusOK, Result{})
	case errors.Is(err, errMailTooLarge), errors.Is(err, errNotOurBucket):
		log.ErrorContext(ctx, "SES receipt stored in S3 not received: "+err.Error()+"; the object is left to expire")
		return httpapi.WriteJSON(w, http.StatusOK, Result{})
	case err != nil:
		log.WarnContext(ctx, "SES receipt stored in S3 not readable for now", "error", err)
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the stored message cannot be read right now; retry").Wrap(err)
	}
	d.raw = raw
	res, err := s.receive(ctx, d)
	if err != nil {
		return err // kept in the bucket: SNS delivers the notification again
	}
	if err := s.received.discard(ctx, bucket, key); err != nil {
		// Received: a later delivery finds it a duplicate, and the bucket's lifecycle
		// expires the object.
		log.WarnContext(ctx, "SES receipt stored in S3 received but not deleted", "error", err)
	}
	return httpapi.WriteJSON(w, http.StatusOK, res)
}
