// Package awsshape boots the real Lambda binaries the way AWS runs them, against AWS's own
// DynamoDB Local and fake KMS, EventBridge, SQS and SSM endpoints on 127.0.0.1: the
// authorizer authenticates a token, its answer travels in the API Gateway context to the bots
// Lambda, whose mutation is audited through EventBridge to the audit sink Lambda; the
// webhooks Lambda reads its WhatsApp secrets from SSM and queues a signed delivery. It needs DynamoDB
// Local: tests/emulators/dynamodb-test.sh (make test) runs it inside a private network
// namespace; plain `go test` skips it.
package awsshape

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	kmssealer "github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/store/dynamo"
	whatsappfake "github.com/botplatform/api/tests/fakes/whatsapp"
	"github.com/botplatform/api/tests/lambdaruntime"
)

// world is one DynamoDB table with a seeded account, the fakes, and the Lambdas' environment.
type world struct {
	t        *testing.T
	table    string
	store    *dynamo.Store
	auth     *auth.Service
	account  auth.Account
	owner    auth.User
	token    string
	bot      bots.Bot
	bus      *awsfake.Server
	kms      *awsfake.Server
	env      []string
	binaries string
}

func setup(t *testing.T) *world {
	t.Helper()
	endpoint := os.Getenv("DYNAMODB_ENDPOINT")
	if endpoint == "" {
		t.Skip("DYNAMODB_ENDPOINT is not set: run tests/emulators/dynamodb-test.sh (make test) to boot the Lambdas against DynamoDB Local")
	}
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{
		Region:                          "us-east-1",
		BaseEndpoint:                    aws.String(endpoint),
		Credentials:                     credentials.NewStaticCredentialsProvider("test", "test", ""),
		DisableValidateResponseChecksum: true,
	})
	w := &world{t: t, table: fmt.Sprintf("boot-%016x", rand.Uint64())}
	require.NoError(t, dynamo.CreateTable(ctx, client, w.table))
	w.store = dynamo.New(client, w.table)
	w.auth = auth.NewService(w.store, time.Now, nil)
	var err error
	w.account, w.owner, err = w.auth.CreateAccount(ctx, "Boot")
	require.NoError(t, err)
	_, w.token, err = w.auth.IssuePAT(ctx, w.account.ID, w.owner.ID, "boot", auth.Scopes{"bots:read", "bots:write"}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	w.bot, err = bots.NewService(w.store, w.auth, time.Now).Create(ctx, w.account.ID, "Boot bot", nil)
	require.NoError(t, err)

	w.kms = awsfake.New(t, awsfake.KMS)
	w.kms.Handle("GenerateMac", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct{ KeyId, MacAlgorithm string }
		json.Unmarshal(body, &in)
		if in.KeyId != "alias/boot-cursors" || in.MacAlgorithm != "HMAC_SHA_256" {
			return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: "wrong key or algorithm"}
		}
		return map[string]any{"KeyId": in.KeyId, "MacAlgorithm": in.MacAlgorithm,
			"Mac": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))}, nil
	})
	w.bus = awsfake.New(t, awsfake.EventBridge)
	w.bus.Handle("PutEvents", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct{ Entries []json.RawMessage }
		json.Unmarshal(body, &in)
		ids := make([]map[string]string, len(in.Entries))
		for i := range ids {
			ids[i] = map[string]string{"EventId": fmt.Sprintf("ev-%d", i)}
		}
		return map[string]any{"FailedEntryCount": 0, "Entries": ids}, nil
	})
	w.env = []string{
		"AWS_ACCESS_KEY_ID=" + awsfake.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + awsfake.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint,
		"AWS_ENDPOINT_URL_KMS=" + w.kms.URL,
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + w.bus.URL,
		"TABLE_NAME=" + w.table,
		"AUDIT_BUS_NAME=botplatform-boot",
		"CURSOR_KEY_ID=alias/boot-cursors",
		"LOG_LEVEL=debug",
	}
	return w
}

// boot starts functions/<name>/lambda: prebuilt in LAMBDA_BIN_DIR by the emulator script
// (the namespace it runs in has no network for the toolchain), else built here.
func (w *world) boot(name string) (*lambdaruntime.Runtime, *lambdaruntime.Process) {
	t := w.t
	t.Helper()
	bin := filepath.Join(os.Getenv("LAMBDA_BIN_DIR"), name)
	if os.Getenv("LAMBDA_BIN_DIR") == "" {
		var err error
		bin, err = lambdaruntime.Build("../..", t.TempDir(), name)
		require.NoError(t, err)
	}
	rt, err := lambdaruntime.Start()
	require.NoError(t, err)
	t.Cleanup(func() { rt.Close() })
	p, err := rt.Launch(bin, w.env...)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop()
		logs := p.Logs()
		assert.NotContains(t, logs, w.token, "%s logged a token", name)
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs)
		}
	})
	return rt, p
}

func (w *world) invoke(rt *lambdaruntime.Runtime, payload []byte, out any) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := rt.Invoke(ctx, payload)
	require.NoError(w.t, err)
	require.False(w.t, res.Error, "function error: %s", res.Payload)
	require.NoError(w.t, json.Unmarshal(res.Payload, out), "%s", res.Payload)
}

func sample(t *testing.T, name string, vars map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "samples", name))
	require.NoError(t, err)
	for k, v := range vars {
		b = bytes.ReplaceAll(b, []byte("{{"+k+"}}"), []byte(v))
	}
	require.NotContains(t, string(b), "{{", "unfilled placeholder in %s", name)
	return b
}

// jsonString escapes s for splicing into a JSON string in a sample.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// The whole request path of the AWS shape, from the real binaries.
func TestAuthorizerToFamilyToAuditSink(t *testing.T) {
	w := setup(t)
	authz, _ := w.boot("authorizer")
	family, _ := w.boot("bots")
	sink, _ := w.boot("auditsink")

	// 1. The authorizer authenticates the token and returns the principal.
	var answer events.APIGatewayV2CustomAuthorizerSimpleResponse
	w.invoke(authz, sample(t, "authorizer-request.json", map[string]string{"TOKEN": w.token, "BOT_ID": w.bot.ID}), &answer)
	require.True(t, answer.IsAuthorized)
	principal, ok := answer.Context["principal"].(string)
	require.True(t, ok, "context: %v", answer.Context)
	assert.NotContains(t, principal, w.token)

	// A bad token is refused with a reason the family Lambda turns into 401.
	var refused events.APIGatewayV2CustomAuthorizerSimpleResponse
	w.invoke(authz, sample(t, "authorizer-request.json", map[string]string{"TOKEN": auth.NewToken(auth.KindPAT), "BOT_ID": w.bot.ID}), &refused)
	assert.Equal(t, "unknown_token", refused.Context["auth_error"])

	vars := map[string]string{"TOKEN": w.token, "BOT_ID": w.bot.ID, "PRINCIPAL_JSON": jsonString(principal)}

	// 2. The bots Lambda serves the bot to that principal, reading DynamoDB.
	var res events.APIGatewayV2HTTPResponse
	w.invoke(family, sample(t, "apigw-get-bot.json", vars), &res)
	require.Equal(t, 200, res.StatusCode, res.Body)
	var got bots.Bot
	require.NoError(t, json.Unmarshal([]byte(res.Body), &got))
	assert.Equal(t, w.bot.ID, got.ID)
	assert.Equal(t, "sample-get-bot", res.Headers["X-Request-Id"])
	assert.Empty(t, w.bus.Calls("PutEvents"), "reads are not audited")

	// 3. A revisioned PATCH: DynamoDB's condition enforces expected_revision.
	w.invoke(family, sample(t, "apigw-patch-bot.json", vars), &res)
	require.Equal(t, 200, res.StatusCode, res.Body)
	assert.Contains(t, res.Body, `"revision":2`)
	w.invoke(family, sample(t, "apigw-patch-bot.json", vars), &res)
	require.Equal(t, 409, res.StatusCode, res.Body)
	assert.Contains(t, res.Body, `"stale_revision"`)

	// The refused principal from the authorizer gets the API's 401.
	refusedVars := map[string]string{"TOKEN": "x", "BOT_ID": w.bot.ID, "PRINCIPAL_JSON": ""}
	unauth := bytes.Replace(sample(t, "apigw-get-bot.json", refusedVars), []byte(`"principal": ""`), []byte(`"auth_error": "unknown_token"`), 1)
	w.invoke(family, unauth, &res)
	assert.Equal(t, 401, res.StatusCode, res.Body)
	assert.Equal(t, "application/problem+json", res.Headers["Content-Type"])

	// 4. Each mutation went to EventBridge once, before its response.
	calls := w.bus.Calls("PutEvents")
	require.Len(t, calls, 2)
	var put struct {
		Entries []struct{ Source, DetailType, Detail, EventBusName string }
	}
	require.NoError(t, json.Unmarshal(calls[0], &put))
	require.Len(t, put.Entries, 1)
	entry := put.Entries[0]
	assert.Equal(t, "botplatform.api", entry.Source)
	assert.Equal(t, "audit.event", entry.DetailType)
	assert.Equal(t, "botplatform-boot", entry.EventBusName)
	assert.NotContains(t, entry.Detail, w.token)
	var ev audit.Event
	require.NoError(t, json.Unmarshal([]byte(entry.Detail), &ev))
	assert.Equal(t, "PATCH /api/bots/{botID}", ev.Route)
	assert.Equal(t, 200, ev.Status)
	assert.Equal(t, w.bot.ID, ev.BotID)
	assert.Equal(t, "sample-patch-bot", ev.RequestID)

	// 5. The rule delivers it to the audit sink Lambda, which stores it in the trail.
	delivery, err := json.Marshal(events.EventBridgeEvent{
		Version: "0", ID: "delivery-1", DetailType: entry.DetailType, Source: entry.Source,
		AccountID: "123456789012", Time: time.Now(), Region: "us-east-1", Resources: []string{},
		Detail: json.RawMessage(entry.Detail),
	})
	require.NoError(t, err)
	var none any
	w.invoke(sink, delivery, &none)
	w.invoke(sink, delivery, &none) // EventBridge delivers at least once
	trail, _, err := audit.NewLog(w.store).List(context.Background(), w.account.ID, w.bot.ID, 10, "")
	require.NoError(t, err)
	require.Len(t, trail, 1, "a redelivered event is stored once")
	assert.Equal(t, ev, trail[0])
	assert.True(t, strings.HasPrefix(trail[0].ID, "evt_"))
}

// The jobs Lambda answers both of its callers from the real binary: an SQS batch whose
// messages nobody handles fails every record (they retry, then reach the DLQ), and a Step
// Functions state of an unknown kind fails the step.
func TestJobsLambdaBoots(t *testing.T) {
	w := setup(t)
	w.env = append(w.env, "JOBS_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/boot-jobs")
	rt, _ := w.boot("jobs")
	var batch events.SQSEventResponse
	msgs := sample(t, "sqs-work-messages.json", nil)
	var sent events.SQSEvent
	require.NoError(t, json.Unmarshal(msgs, &sent))
	w.invoke(rt, msgs, &batch)
	assert.Len(t, batch.BatchItemFailures, len(sent.Records))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := rt.Invoke(ctx, sample(t, "sfn-job-step.json", map[string]string{"KIND": "no.such.kind"}))
	require.NoError(t, err)
	assert.True(t, res.Error, "Step Functions sees a failed task: %s", res.Payload)
	assert.Contains(t, string(res.Payload), "unknown job kind")
}

// The jobs Lambda relays the outbox when its schedule invokes it (the scheduler's payload,
// events/samples/scheduler-outbox-sweep.json): an item staged on DynamoDB more than the
// grace ago, whose request could not send it, is sent to SQS and cleared; while SQS refuses,
// the invocation fails (the Lambda's error alarm) and the item stays.
func TestJobsLambdaSweepsTheOutbox(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	var down atomic.Bool
	down.Store(true)
	q := awsfake.New(t, awsfake.SQS)
	q.Handle("SendMessageBatch", func(body json.RawMessage) (any, *awsfake.Error) {
		if down.Load() {
			return nil, &awsfake.Error{Status: 400, Type: "AWS.SimpleQueueService.NonExistentQueue", Message: "queue down"}
		}
		var in struct {
			Entries []struct{ Id, MessageBody string }
		}
		json.Unmarshal(body, &in)
		type ok struct{ Id, MessageId, MD5OfMessageBody string }
		out := struct {
			Successful []ok
			Failed     []any
		}{Failed: []any{}}
		for _, e := range in.Entries {
			sum := md5.Sum([]byte(e.MessageBody))
			out.Successful = append(out.Successful, ok{e.Id, "m-" + e.Id, hex.EncodeToString(sum[:])})
		}
		return out, nil
	})

	// A request staged it a minute ago, with its change, and died before sending it.
	box, err := outbox.New(w.store, nil, outbox.Config{Now: func() time.Time { return time.Now().Add(-time.Minute) }})
	require.NoError(t, err)
	m, err := queue.New("boot.job", map[string]string{"bot_id": w.bot.ID})
	require.NoError(t, err)
	writes, _, err := box.Stage(m)
	require.NoError(t, err)
	require.NoError(t, w.store.Transact(ctx, writes))

	w.env = append(w.env, "AWS_ENDPOINT_URL_SQS="+q.URL, "JOBS_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/boot-jobs")
	rt, _ := w.boot("jobs")
	sweep := sample(t, "scheduler-outbox-sweep.json", nil)
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := rt.Invoke(ictx, sweep)
	require.NoError(t, err)
	assert.True(t, res.Error, "a sweep that leaves items fails the invocation: %s", res.Payload)
	assert.Contains(t, string(res.Payload), "1 item(s) not delivered")

	down.Store(false)
	var out outbox.Result
	w.invoke(rt, sweep, &out)
	assert.Equal(t, outbox.Result{Delivered: 1}, out)
	batches := q.Calls("SendMessageBatch")
	require.NotEmpty(t, batches)
	assert.Contains(t, string(batches[len(batches)-1]), w.bot.ID)
	assert.Contains(t, string(batches[len(batches)-1]), "boot.job")
	w.invoke(rt, sweep, &out)
	assert.Equal(t, outbox.Result{}, out, "cleared: sent once")
}

// dataKeys makes the fake KMS issue and open data keys, as KMS does for the envelope
// sealer (shared/secrets/kms): the test process seals a channel's credentials with it and
// the Lambda opens them.
func (w *world) dataKeys(keyID string) {
	var mu sync.Mutex
	issued := map[string][]byte{} // encrypted data key -> plaintext
	w.kms.Handle("GenerateDataKey", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct{ KeyId, KeySpec string }
		json.Unmarshal(body, &in)
		if in.KeyId != keyID || in.KeySpec != "AES_256" {
			return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: "wrong key or spec"}
		}
		pt, edk := make([]byte, 32), make([]byte, 48)
		crand.Read(pt)
		crand.Read(edk)
		mu.Lock()
		defer mu.Unlock()
		issued[string(edk)] = pt
		return map[string]any{"KeyId": in.KeyId, "Plaintext": pt, "CiphertextBlob": edk}, nil
	})
	w.kms.Handle("Decrypt", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct {
			CiphertextBlob []byte
			KeyId          string
		}
		json.Unmarshal(body, &in)
		mu.Lock()
		defer mu.Unlock()
		pt, ok := issued[string(in.CiphertextBlob)]
		if !ok || in.KeyId != keyID {
			return nil, &awsfake.Error{Status: 400, Type: "InvalidCiphertextException", Message: "not ours"}
		}
		return map[string]any{"KeyId": in.KeyId, "Plaintext": pt, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
	})
}

// jobsQueue is a fake SQS jobs queue accepting every batch.
func jobsQueue(t *testing.T) *awsfake.Server {
	q := awsfake.New(t, awsfake.SQS)
	q.Handle("SendMessageBatch", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct {
			QueueUrl string
			Entries  []struct{ Id, MessageBody string }
		}
		json.Unmarshal(body, &in)
		type ok struct{ Id, MessageId, MD5OfMessageBody string }
		out := struct {
			Successful []ok
			Failed     []any
		}{Failed: []any{}}
		for _, e := range in.Entries {
			sum := md5.Sum([]byte(e.MessageBody))
			out.Successful = append(out.Successful, ok{e.Id, "m-" + e.Id, hex.EncodeToString(sum[:])})
		}
		return out, nil
	})
	return q
}

// The webhooks Lambda on AWS takes its WhatsApp secrets from SSM SecureString parameters at
// cold start (the fake checks the real request: AWS JSON 1.1, AmazonSSM.GetParameter with
// decryption, signed for ssm): it answers Meta's subscription check with the verify token,
// queues a delivery signed with the app secret for a connected number once, and refuses a
// forged one. A parameter that does not exist stops the cold start with a clear message.
func TestWebhooksLambdaTakesWhatsAppSecretsFromSSM(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	const (
		secretsKey       = "alias/boot-secrets"
		appSecretParam   = "/botplatform/boot/whatsapp-app-secret"
		verifyTokenParam = "/botplatform/boot/whatsapp-verify-token"
		verifyToken      = "boot-verify-token-8c1f"
	)
	params := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		appSecretParam:   {Value: whatsappfake.AppSecret},
		verifyTokenParam: {Value: verifyToken},
	})
	w.dataKeys(secretsKey)
	queue := jobsQueue(t)

	// A WhatsApp channel of the bot, connected as the channels Lambda connects one.
	provider := whatsappfake.New(t)
	sealer, err := kmssealer.New(awskms.NewFromConfig(w.kms.Config()), kmssealer.Config{KeyID: secretsKey})
	require.NoError(t, err)
	chans := channels.NewService(w.store, sealer, []channel.Adapter{whatsapp.New(whatsapp.Config{BaseURL: provider.URL()})}, time.Now, "")
	ch, err := chans.Connect(ctx, w.account.ID, w.bot.ID, channel.WhatsApp, "Shop", &whatsapp.Credentials{
		AccessToken: whatsappfake.AccessToken, PhoneNumberID: whatsappfake.PhoneNumberID, BusinessAccountID: whatsappfake.BusinessAccountID})
	require.NoError(t, err)

	base := w.env
	w.env = append(slices.Clone(base),
		"AWS_ENDPOINT_URL_SSM="+params.URL, "AWS_ENDPOINT_URL_SQS="+queue.URL,
		"SECRETS_KEY_ID="+secretsKey, "JOBS_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/boot-jobs",
		"WHATSAPP_APP_SECRET_PARAMETER="+appSecretParam, "WHATSAPP_VERIFY_TOKEN_PARAMETER="+verifyTokenParam)
	rt, p := w.boot("webhooks")

	// Meta's subscription check.
	var res events.APIGatewayV2HTTPResponse
	w.invoke(rt, sample(t, "apigw-whatsapp-verify.json", map[string]string{"VERIFY_TOKEN": verifyToken}), &res)
	require.Equal(t, 200, res.StatusCode, res.Body)
	assert.Equal(t, "1158201444", res.Body)
	w.invoke(rt, sample(t, "apigw-whatsapp-verify.json", map[string]string{"VERIFY_TOKEN": "guessed"}), &res)
	assert.Equal(t, 403, res.StatusCode, res.Body)

	// The secrets were read once each, at cold start, decrypted.
	calls := params.Calls("GetParameter")
	require.Len(t, calls, 2)
	for i, name := range []string{appSecretParam, verifyTokenParam} {
		assert.JSONEq(t, `{"Name":"`+name+`","WithDecryption":true}`, string(calls[i]))
	}

	// A delivery signed with the app secret is queued for the runtime, once.
	delivery := func(signature string) []byte {
		return sample(t, "apigw-whatsapp-webhook.json", map[string]string{"SIGNATURE": signature})
	}
	var ev events.APIGatewayV2HTTPRequest
	require.NoError(t, json.Unmarshal(delivery("x"), &ev))
	w.invoke(rt, delivery(whatsappfake.Sign([]byte(ev.Body))), &res)
	require.Equal(t, 200, res.StatusCode, res.Body)
	batches := queue.Calls("SendMessageBatch")
	require.Len(t, batches, 1)
	assert.Contains(t, string(batches[0]), ch.ID)
	assert.Contains(t, string(batches[0]), "/start")
	w.invoke(rt, delivery(whatsappfake.Sign([]byte(ev.Body))), &res) // Meta redelivers
	require.Equal(t, 200, res.StatusCode, res.Body)
	assert.Len(t, queue.Calls("SendMessageBatch"), 1, "a redelivery is not queued again")

	// One signed with another secret is not.
	forged := hmac.New(sha256.New, []byte("not-the-app-secret"))
	forged.Write([]byte(ev.Body))
	w.invoke(rt, delivery("sha256="+hex.EncodeToString(forged.Sum(nil))), &res)
	assert.Equal(t, 401, res.StatusCode, res.Body)
	assert.Contains(t, res.Body, "unauthentic_webhook")
	assert.Len(t, queue.Calls("SendMessageBatch"), 1)

	logs := p.Logs()
	assert.Contains(t, logs, appSecretParam, "the cold start names where the secrets came from")
	assert.NotContains(t, logs, whatsappfake.AppSecret)
	assert.NotContains(t, logs, verifyToken)

	// A parameter that does not exist: the cold start fails, naming it.
	w.env = append(slices.Clone(base),
		"AWS_ENDPOINT_URL_SSM="+params.URL, "SECRETS_KEY_ID="+secretsKey,
		"JOBS_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/boot-jobs",
		"WHATSAPP_APP_SECRET_PARAMETER=/botplatform/boot/missing")
	_, failed := w.boot("webhooks")
	deadline := time.Now().Add(20 * time.Second)
	for exited, _ := failed.Exited(); !exited; exited, _ = failed.Exited() {
		require.True(t, time.Now().Before(deadline), "the cold start did not fail: %s", failed.Logs())
		time.Sleep(50 * time.Millisecond)
	}
	assert.Contains(t, failed.Logs(), `SSM parameter \"/botplatform/boot/missing\", which does not exist`)
	assert.Contains(t, failed.Logs(), "WHATSAPP_APP_SECRET_PARAMETER")
}
