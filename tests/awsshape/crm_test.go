package awsshape

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/crm"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/infra/stack"
	"github.com/botplatform/api/shared/apigw"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/jobs"
	kmssealer "github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/store"
	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
	"github.com/botplatform/api/tests/lambdaruntime"
)

const (
	// crmSecretsKey is the KMS key of the deployment's credentials: the crm Lambda holds it
	// only under the CRM encryption context (CRM_SECRETS_KEY_ID), the jobs Lambda under both.
	crmSecretsKey = "alias/boot-secrets"
	// jobsMachine is the jobs state machine; jobsQueueURL the jobs queue.
	jobsMachine  = "arn:aws:states:us-east-1:123456789012:stateMachine:botplatform-boot-jobs"
	jobsQueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/boot-jobs"
)

// stackEnv is the environment the stack deploys the Lambda called name with under cfg
// (stack.EnvNames: one variable per resource infra/access grants it, and its provider
// settings), each variable's value taken from values, beside the world's AWS_* variables
// (credentials, the fakes' endpoints) and extra. A variable the stack gives the Lambda that
// values lacks fails the test: the boot runs with what AWS would give, no more, no less.
func (w *world) stackEnv(name string, cfg stack.Config, values map[string]string, extra ...string) []string {
	w.t.Helper()
	var env []string
	for _, kv := range w.env {
		if strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	for _, v := range stack.EnvNames(name, cfg) {
		value, ok := values[v]
		require.True(w.t, ok, "infra gives the %s Lambda %s, which the boot test has no value for", name, v)
		env = append(env, v+"="+value)
	}
	return append(env, extra...)
}

// envValues are the values of the world's variables (TABLE_NAME=...) by name.
func (w *world) envValues() map[string]string {
	out := map[string]string{}
	for _, kv := range w.env {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v
	}
	return out
}

// crmDataKeys makes the fake KMS issue and open data keys of keyID as KMS does for the CRM
// sealer, and as the crm and jobs Lambdas' grants allow: only under the CRM encryption
// context (access.CRMCredentials: another context is AccessDenied, as the IAM condition
// answers), and a data key opens only under the context it was issued with (the context is
// bound to the ciphertext).
func (w *world) crmDataKeys(keyID string) {
	want := kmssealer.Context(kmssealer.PurposeCRMCredentials)
	var mu sync.Mutex
	type issue struct {
		pt  []byte
		ctx map[string]string
	}
	issued := map[string]issue{} // encrypted data key -> plaintext and context
	w.kms.Handle("GenerateDataKey", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct {
			KeyId, KeySpec    string
			EncryptionContext map[string]string
		}
		json.Unmarshal(body, &in)
		if in.KeyId != keyID || in.KeySpec != "AES_256" {
			return nil, &awsfake.Error{Status: 400, Type: "ValidationException", Message: "wrong key or spec"}
		}
		if !maps.Equal(in.EncryptionContext, want) {
			return nil, &awsfake.Error{Status: 400, Type: "AccessDeniedException", Message: "not authorized under this encryption context"}
		}
		pt, edk := make([]byte, 32), make([]byte, 48)
		crand.Read(pt)
		crand.Read(edk)
		mu.Lock()
		defer mu.Unlock()
		issued[string(edk)] = issue{pt, in.EncryptionContext}
		return map[string]any{"KeyId": in.KeyId, "Plaintext": pt, "CiphertextBlob": edk}, nil
	})
	w.kms.Handle("Decrypt", func(body json.RawMessage) (any, *awsfake.Error) {
		var in struct {
			CiphertextBlob    []byte
			KeyId             string
			EncryptionContext map[string]string
		}
		json.Unmarshal(body, &in)
		if !maps.Equal(in.EncryptionContext, want) {
			return nil, &awsfake.Error{Status: 400, Type: "AccessDeniedException", Message: "not authorized under this encryption context"}
		}
		mu.Lock()
		defer mu.Unlock()
		is, ok := issued[string(in.CiphertextBlob)]
		if !ok || in.KeyId != keyID || !maps.Equal(is.ctx, in.EncryptionContext) {
			return nil, &awsfake.Error{Status: 400, Type: "InvalidCiphertextException", Message: "not ours"}
		}
		return map[string]any{"KeyId": in.KeyId, "Plaintext": is.pt, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"}, nil
	})
}

// tableHolds reports whether any string or binary attribute of any item of the world's
// table contains secret: a raw scan of DynamoDB, beneath the store.
func (w *world) tableHolds(secret string) bool {
	w.t.Helper()
	client := dynamodb.New(dynamodb.Options{
		Region:                          "us-east-1",
		BaseEndpoint:                    aws.String(os.Getenv("DYNAMODB_ENDPOINT")),
		Credentials:                     credentials.NewStaticCredentialsProvider("test", "test", ""),
		DisableValidateResponseChecksum: true,
	})
	var holds func(v ddbtypes.AttributeValue) bool
	holds = func(v ddbtypes.AttributeValue) bool {
		switch v := v.(type) {
		case *ddbtypes.AttributeValueMemberS:
			return strings.Contains(v.Value, secret)
		case *ddbtypes.AttributeValueMemberB:
			return bytes.Contains(v.Value, []byte(secret))
		case *ddbtypes.AttributeValueMemberM:
			return slices.ContainsFunc(slices.Collect(maps.Values(v.Value)), holds)
		case *ddbtypes.AttributeValueMemberL:
			return slices.ContainsFunc(v.Value, holds)
		case *ddbtypes.AttributeValueMemberSS:
			return slices.ContainsFunc(v.Value, func(s string) bool { return strings.Contains(s, secret) })
		}
		return false
	}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(w.table)})
	items := 0
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(w.t, err)
		for _, it := range page.Items {
			items++
			if slices.ContainsFunc(slices.Collect(maps.Values(it)), holds) {
				return true
			}
		}
	}
	require.NotZero(w.t, items, "the scan read nothing")
	return false
}

// crmPersons are the Pipedrive fake's persons: first name by primary email.
func crmPersons(pd *pipedrivefake.Server) map[string]string {
	out := map[string]string{}
	for _, r := range pd.Records("persons") {
		list, _ := r.Props["email"].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["primary"] == true {
				out[fmt.Sprint(m["value"])] = fmt.Sprint(r.Props["first_name"])
			}
		}
	}
	return out
}

// crmBoot is the world of the CRM boot tests: a bot with subscribers, the Pipedrive,
// Step Functions and SQS fakes, a PAT that may manage CRM connections, the deployment's
// configuration and the crm Lambda booted with the stack's environment for it.
type crmBoot struct {
	*world
	pd       *pipedrivefake.Server
	machines *awsfake.StateMachinesServer
	queue    *awsfake.Server
	pat      string
	// cfg is the deployment; values are the values of every variable the stack may give.
	cfg    stack.Config
	values map[string]string
	// vars fill the samples' placeholders: TOKEN, BOT_ID, PRINCIPAL_JSON, then
	// CONNECTION_ID and JOB_ID.
	vars   map[string]string
	family *lambdaruntime.Runtime
	crmLog *lambdaruntime.Process
}

// crmPeople are the subscribers with an email bootCRM creates (first name by email),
// beside one without.
var crmPeople = map[string]string{"ann@example.org": "Ann", "bob@example.org": "Bob", "cy@example.org": "Cy"}

// privateProviders lets the CRM clients call the fakes, on loopback over http; a test-only
// setting the stack never gives.
const privateProviders = "CRM_PRIVATE_PROVIDER_ADDRESSES=allow"

func bootCRM(t *testing.T) *crmBoot {
	t.Helper()
	c := &crmBoot{world: setup(t), pd: pipedrivefake.New(t), machines: awsfake.StateMachines(t, jobsMachine), queue: jobsQueue(t)}
	ctx := context.Background()
	c.crmDataKeys(crmSecretsKey)

	// The principal the authorizer passes for a PAT that may manage CRM connections.
	var err error
	_, c.pat, err = c.auth.IssuePAT(ctx, c.account.ID, c.owner.ID, "crm", auth.Scopes{"crm:read", "crm:write"}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	principal, err := c.auth.Authenticate(ctx, "Bearer "+c.pat)
	require.NoError(t, err)
	answer, err := apigw.Allow(principal)
	require.NoError(t, err)
	principalJSON, ok := answer.Context[apigw.ContextPrincipal].(string)
	require.True(t, ok)
	c.vars = map[string]string{"TOKEN": c.pat, "BOT_ID": c.bot.ID, "PRINCIPAL_JSON": jsonString(principalJSON)}

	// The subscribers with an email, and one without (the key has no value: skipped).
	subs := subscribers.NewService(c.store, time.Now, nil)
	_, err = subs.CreateField(ctx, c.bot.ID, subscribers.FieldSpec{Name: subscribers.EmailFieldName, Type: subscribers.TypeString})
	require.NoError(t, err)
	for i, email := range slices.Sorted(maps.Keys(crmPeople)) {
		name := crmPeople[email]
		_, _, err := subs.Upsert(ctx, c.bot.ID, subscribers.ChannelTelegram, fmt.Sprint(7_000_001+i),
			subscribers.Changes{FirstName: &name, Fields: map[string]any{subscribers.EmailFieldName: email}})
		require.NoError(t, err)
	}
	anonymous := "Dee"
	_, _, err = subs.Upsert(ctx, c.bot.ID, subscribers.ChannelTelegram, "7000009", subscribers.Changes{FirstName: &anonymous})
	require.NoError(t, err)

	// The deployment: the Pipedrive API at the fake (a provider setting the stack passes on).
	c.cfg = stack.Config{Stage: "boot", PublicURL: "https://api.example.com", CRMPipedriveAPIBaseURL: c.pd.URL()}
	c.values = c.envValues()
	maps.Copy(c.values, map[string]string{
		stack.EnvStage:                  "boot",
		stack.EnvCRMSecretsKeyID:        crmSecretsKey,
		stack.EnvSecretsKeyID:           crmSecretsKey,
		stack.EnvJobsStateMachineARN:    jobsMachine,
		stack.EnvJobsQueueURL:           jobsQueueURL,
		stack.EnvSchedulerRoleARN:       "arn:aws:iam::123456789012:role/botplatform-boot-queue-schedule",
		stack.EnvSESConfigurationSet:    "botplatform-boot",
		stack.EnvPublicURL:              c.cfg.PublicURL,
		stack.EnvCRMPipedriveAPIBaseURL: c.pd.URL(),
	})

	names := stack.EnvNames("crm", c.cfg)
	assert.Contains(t, names, stack.EnvCRMSecretsKeyID)
	assert.NotContains(t, names, stack.EnvSecretsKeyID, "the crm Lambda cannot open a channel's credentials")
	assert.Contains(t, names, stack.EnvJobsStateMachineARN)
	c.env = c.stackEnv("crm", c.cfg, c.values, "AWS_ENDPOINT_URL_SFN="+c.machines.URL, privateProviders)
	c.family, c.crmLog = c.boot("crm")
	return c
}

// call invokes the crm Lambda with the sample name, its placeholders filled from c.vars and
// more.
func (c *crmBoot) call(name string, more map[string]string) events.APIGatewayV2HTTPResponse {
	c.t.Helper()
	v := maps.Clone(c.vars)
	maps.Copy(v, more)
	var res events.APIGatewayV2HTTPResponse
	c.invoke(c.family, sample(c.t, name, v), &res)
	return res
}

// connect connects the bot to the Pipedrive fake with its API key.
func (c *crmBoot) connect() crm.Connection {
	c.t.Helper()
	res := c.call("apigw-crm-connect-pipedrive.json", map[string]string{"API_KEY": pipedrivefake.APIToken})
	require.Equal(c.t, 201, res.StatusCode, res.Body)
	var conn crm.Connection
	require.NoError(c.t, json.Unmarshal([]byte(res.Body), &conn))
	assert.NotContains(c.t, res.Body, pipedrivefake.APIToken)
	c.vars["CONNECTION_ID"] = conn.ID
	return conn
}

// startSync saves the mapping and starts an initial sync: 202, and one more execution of
// the jobs state machine, which it returns.
func (c *crmBoot) startSync() (crm.Job, awsfake.Execution) {
	t := c.t
	t.Helper()
	res := c.call("apigw-crm-put-mapping.json", nil)
	require.Equal(t, 201, res.StatusCode, res.Body)
	before := len(c.machines.Executions())
	res = c.call("apigw-crm-start-job.json", nil)
	require.Equal(t, 202, res.StatusCode, res.Body)
	var job crm.Job
	require.NoError(t, json.Unmarshal([]byte(res.Body), &job))
	assert.Equal(t, crm.KindInitialSync, job.Kind)
	assert.Equal(t, crm.JobQueued, job.Status)
	assert.Equal(t, "/api/bots/"+c.bot.ID+"/crm/connections/"+c.vars["CONNECTION_ID"]+"/jobs/"+job.ID, res.Headers["Location"])
	c.vars["JOB_ID"] = job.ID
	execs := c.machines.Executions()
	require.Len(t, execs, before+1, "the sync is one execution of the jobs state machine")
	return job, execs[before]
}

// bootJobs boots the jobs Lambda with the stack's environment for it, and extra.
func (c *crmBoot) bootJobs(extra ...string) (*lambdaruntime.Runtime, *lambdaruntime.Process) {
	c.t.Helper()
	names := stack.EnvNames(stack.Jobs, c.cfg)
	assert.Contains(c.t, names, stack.EnvCRMSecretsKeyID, "the jobs Lambda opens CRM credentials")
	assert.NotContains(c.t, names, stack.EnvAuditBusName)
	c.env = c.stackEnv(stack.Jobs, c.cfg, c.values, append([]string{"AWS_ENDPOINT_URL_SQS=" + c.queue.URL, privateProviders}, extra...)...)
	return c.boot(stack.Jobs)
}

// runStep is the state machine's RunStep task: the jobs Lambda invoked with state, its
// answer ($.Payload) the next state, exactly as the Lambda wrote it.
func (c *crmBoot) runStep(rt *lambdaruntime.Runtime, state []byte) (jobs.State, []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := rt.Invoke(ctx, state)
	require.NoError(c.t, err)
	require.False(c.t, out.Error, "RunStep failed (the state machine would retry, then fail the job): %s", out.Payload)
	var next jobs.State
	require.NoError(c.t, strictJSON(out.Payload, &next), "%s", out.Payload)
	return next, out.Payload
}

// The crm Lambda and the jobs Lambda as AWS runs them, each with exactly the environment
// the stack gives it (stack.EnvNames over infra/access): the crm Lambda connects a bot to
// Pipedrive with an API key sealed through KMS under the CRM encryption context (the only
// one its grant allows) and shown nowhere (response, logs, audit event, the table), saves
// a mapping and starts an initial sync as one execution of the jobs state machine, whose
// input is the job's first jobs.State; played as the state machine plays it, the jobs
// Lambda opens the credentials under the same context, writes every subscriber with an
// email to Pipedrive as a person, and the crm Lambda then reports the job succeeded.
func TestCRMLambdaSyncsThroughTheStateMachine(t *testing.T) {
	c := bootCRM(t)

	// 1. Connect: Pipedrive accepts the key; it is sealed under the CRM context.
	conn := c.connect()
	assert.Equal(t, "pipedrive", conn.Provider)
	assert.Equal(t, crm.StatusActive, conn.Status)
	assert.Equal(t, c.bot.ID, conn.BotID)

	keys := c.kms.Calls("GenerateDataKey")
	require.NotEmpty(t, keys, "the credentials were sealed through KMS")
	for _, body := range keys {
		var in struct {
			KeyId             string
			EncryptionContext map[string]string
		}
		require.NoError(t, json.Unmarshal(body, &in))
		assert.Equal(t, crmSecretsKey, in.KeyId)
		assert.Equal(t, map[string]string{"purpose": "botplatform-crm-credentials"}, in.EncryptionContext)
	}
	assert.False(t, c.tableHolds(pipedrivefake.APIToken), "the API key is stored sealed")

	puts := c.bus.Calls("PutEvents")
	require.Len(t, puts, 1)
	assert.NotContains(t, string(puts[0]), pipedrivefake.APIToken)
	var put struct{ Entries []struct{ Detail string } }
	require.NoError(t, json.Unmarshal(puts[0], &put))
	require.Len(t, put.Entries, 1)
	var ev audit.Event
	require.NoError(t, json.Unmarshal([]byte(put.Entries[0].Detail), &ev))
	assert.Equal(t, "POST /api/bots/{botID}/crm/connections/pipedrive", ev.Route)
	assert.Equal(t, 201, ev.Status)
	assert.Equal(t, c.bot.ID, ev.BotID)
	assert.Equal(t, "sample-crm-connect-pipedrive", ev.RequestID)

	// 2. The mapping, then an initial sync: one execution of the jobs state machine whose
	// input is the job's first State.
	_, exec := c.startSync()
	assert.Equal(t, jobsMachine, exec.StateMachineArn)
	assert.JSONEq(t, string(sample(t, "sfn-crm-sync-step.json", c.vars)), exec.Input,
		"the input is the job's first State: {kind: crm.sync, payload: {bot_id, connection_id, job_id}}")
	var first jobs.State
	require.NoError(t, json.Unmarshal([]byte(exec.Input), &first))
	assert.Empty(t, c.queue.Calls("SendMessageBatch"), "the crm Lambda has no queue")

	// 3. The state machine's loop on the jobs Lambda (its own environment from the stack):
	// RunStep with the State, the Lambda's answer the next State, until done.
	runner, jp := c.bootJobs()
	opened := len(c.kms.Calls("Decrypt"))
	state := []byte(exec.Input)
	for step := 1; ; step++ {
		require.LessOrEqual(t, step, 20, "the job never reported done")
		next, raw := c.runStep(runner, state)
		assert.Equal(t, crm.JobSync, next.Kind)
		assert.JSONEq(t, string(first.Payload), string(next.Payload), "the payload travels unchanged")
		assert.Equal(t, step, next.Steps)
		if next.Done {
			break
		}
		state = raw
	}
	assert.Greater(t, len(c.kms.Calls("Decrypt")), opened,
		"the jobs Lambda opened the credentials through KMS (under the CRM context: the fake refuses another)")

	// The crm Lambda reports the job succeeded; Pipedrive holds one person per subscriber
	// with an email.
	res := c.call("apigw-crm-get-job.json", nil)
	require.Equal(t, 200, res.StatusCode, res.Body)
	var job crm.Job
	require.NoError(t, json.Unmarshal([]byte(res.Body), &job))
	assert.Equal(t, crm.JobSucceeded, job.Status, res.Body)
	assert.Nil(t, job.Error)
	assert.Equal(t, crm.Progress{Processed: 4, Written: 3, Skipped: 1}, job.Progress)
	assert.Equal(t, crmPeople, crmPersons(c.pd))
	assert.Len(t, c.pd.Records("persons"), len(crmPeople))
	for _, uri := range c.pd.RequestURIs() {
		assert.NotContains(t, uri, pipedrivefake.APIToken, "the key travels in a header, never a URL")
	}
	assert.Len(t, c.machines.Executions(), 1, "one run: no hand-over")
	assert.Empty(t, c.queue.Calls("SendMessageBatch"), "nothing of the sync went to the queue")

	// Neither Lambda logged the API key, nor failed to audit.
	for name, logs := range map[string]string{"crm": c.crmLog.Logs(), "jobs": jp.Logs()} {
		assert.NotContains(t, logs, pipedrivefake.APIToken, "%s logged the API key", name)
		assert.NotContains(t, logs, c.pat, "%s logged the PAT", name)
		assert.NotContains(t, logs, "audit publish failed", name)
	}
	assert.False(t, c.tableHolds(pipedrivefake.APIToken), "the API key is stored sealed")
}

// A sync that has run stepsPerRun (2,000) steps in one execution goes on as a new
// execution of the state machine (docs/aws.md, docs/crm.md): the hand-over is made by the
// jobs Lambda, in the step that ends the run. The job's step counter is moved to the end of
// a run (the item's documented layout, functions/crm/sync_keys.go), as 2,000 steps would
// have left it, and the jobs Lambda given the state of the run's last step whose hand-over
// did not start the next run (SyncStep's recovery path): it ends this execution and starts
// the next from step 2,000.
func TestCRMSyncContinuesAsANewExecution(t *testing.T) {
	// The jobs Lambda must be able to start the next execution at all.
	require.Contains(t, stack.EnvNames(stack.Jobs, stack.Config{}), stack.EnvJobsStateMachineARN)
	c := bootCRM(t)
	ctx := context.Background()
	c.connect()
	_, exec := c.startSync()

	key := store.Key{PK: "BOT#" + c.bot.ID + "#CRMSYNC#" + c.vars["CONNECTION_ID"], SK: "JOB#" + c.vars["JOB_ID"]}
	it, err := c.store.Get(ctx, key)
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(it.Data, &rec))
	require.EqualValues(t, 0, rec["step"], "%s", it.Data)
	rec["step"] = 2000
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, c.store.Transact(ctx, []store.Write{store.PutOp(store.Item{Key: key, Data: data, Revision: it.Revision + 1}, store.RevisionIs(it.Revision))}))

	var first jobs.State
	require.NoError(t, json.Unmarshal([]byte(exec.Input), &first))
	last, err := json.Marshal(jobs.State{Kind: first.Kind, Payload: first.Payload, Cursor: "1999", Steps: 1999})
	require.NoError(t, err)
	runner, _ := c.bootJobs("AWS_ENDPOINT_URL_SFN=" + c.machines.URL)
	next, _ := c.runStep(runner, last)
	assert.True(t, next.Done, "this execution ends: %+v", next)

	execs := c.machines.Executions()
	require.Len(t, execs, 2, "the next run is a new execution")
	assert.Equal(t, jobsMachine, execs[1].StateMachineArn)
	var cont jobs.State
	require.NoError(t, json.Unmarshal([]byte(execs[1].Input), &cont))
	assert.Equal(t, crm.JobSync, cont.Kind)
	var payload map[string]any
	require.NoError(t, json.Unmarshal(cont.Payload, &payload))
	assert.Equal(t, map[string]any{"bot_id": c.bot.ID, "connection_id": c.vars["CONNECTION_ID"], "job_id": c.vars["JOB_ID"],
		"from_step": float64(2000)}, payload)
	assert.Empty(t, c.queue.Calls("SendMessageBatch"), "not a chain of queue messages")
}

// strictJSON decodes b into v, refusing members v does not have (the State the state
// machine passes on is exactly what the Lambda answered).
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
