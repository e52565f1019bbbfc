// Package access is the one table of every IAM permission the AWS stack grants: which
// Lambda (or service role) may do what on which resource. It imports nothing of the CDK or of
// the families, so that the families' tests can hold what their code does against it
// (docs/aws.md, "Least privilege"); infra/stack turns it into policies and holds the
// synthesized template equal to it.
package access

import "github.com/botplatform/api/shared/secrets/kms"

// Resource names what a grant's actions apply to. The stack turns each into concrete ARNs.
type Resource int

// The resources a role can be granted actions on.
const (
	// Table is the single DynamoDB table and its indexes (table ARN and table ARN/index/*).
	Table Resource = iota + 1
	// Bus is the audit event bus.
	Bus
	// CursorKey is the KMS HMAC_256 key list cursors are signed with.
	CursorKey
	// SecretsKey is the KMS symmetric key for envelope encryption of stored credentials.
	SecretsKey
	// JobsQueue is the SQS queue of background jobs.
	JobsQueue
	// JobsStateMachine is the Step Functions state machine of long-running jobs.
	JobsStateMachine
	// AuditDLQ is the dead-letter queue of audit deliveries.
	AuditDLQ
	// JobsFunction is the jobs Lambda (for the state machine's role).
	JobsFunction
	// OwnLogGroup is the log group of the Lambda the grant belongs to.
	OwnLogGroup
	// NoResource is for APIs that support no resource-level permissions ("Resource": "*").
	NoResource
	// WhatsAppAppSecretParameter and WhatsAppVerifyTokenParameter are the SSM Parameter
	// Store SecureString parameters that hold the WhatsApp secrets. The operator creates
	// them; the stack knows only their names (context whatsappAppSecretParameter,
	// whatsappVerifyTokenParameter), and a grant on one applies only when it is named.
	WhatsAppAppSecretParameter
	WhatsAppVerifyTokenParameter
	// SDKKeyParameter is the SSM Parameter Store SecureString parameter that holds the
	// customer SDK's project-key secret (family.Env.SDKKey: 32 random bytes or more, in
	// base64), which signs project keys (customersdk) and checks them (sdk). Like the
	// WhatsApp ones, the operator creates it, the stack knows only its name (context
	// sdkKeyParameter), and the grant applies only when it is named.
	SDKKeyParameter
	// CRMHubSpotClientSecretParameter and CRMSalesforceClientSecretParameter are the SSM
	// Parameter Store SecureString parameters that hold the client secrets of the CRM
	// family's OAuth applications (family.Env.CRMClientSecrets), which the crm Lambda
	// authenticates its code exchanges and token refreshes with (and the MCP and jobs
	// Lambdas their token refreshes). Like the others, the operator
	// creates them, the stack knows only their names (context
	// crmHubSpotClientSecretParameter, crmSalesforceClientSecretParameter), and a grant on
	// one applies only when it is named.
	CRMHubSpotClientSecretParameter
	CRMSalesforceClientSecretParameter
	// AIOpenAIKeyParameter, AIAnthropicKeyParameter and AIGeminiKeyParameter are the SSM
	// Parameter Store SecureString parameters that hold the managed AI family's provider
	// keys, the platform's own API keys (family.Env.AIKeys), which the ai Lambda alone calls
	// the providers with. Like the others, the operator creates them, the stack knows only
	// their names (context aiOpenAIKeyParameter, aiAnthropicKeyParameter,
	// aiGeminiKeyParameter), and a grant on one applies only when it is named.
	AIOpenAIKeyParameter
	AIAnthropicKeyParameter
	AIGeminiKeyParameter
	// MetaAppSecretParameter is the SSM Parameter Store SecureString parameter that holds
	// the Facebook app's secret of the meta family (family.Env.CRMClientSecrets["meta"]),
	// which the meta Lambda authenticates its code exchanges with and the jobs Lambda its
	// token refreshes. Like the others, the operator creates it, the stack knows only its
	// name (context metaAppSecretParameter), and a grant on it applies only when it is named.
	MetaAppSecretParameter
	// Schedules are the EventBridge Scheduler one-time schedules the jobs Lambda creates for
	// messages due later than SQS can delay one (sqs.Schedules): names starting with q- in
	// the default schedule group.
	Schedules
	// ScheduleRole is the role those schedules run with (row QueueScheduleRole); the jobs
	// Lambda passes it to Scheduler (iam:PassRole), which gives it SCHEDULER_ROLE_ARN.
	ScheduleRole
	// EmailIdentities are the SES identities (verified domains and addresses) of the account
	// in the stack's region, and the stack's SES configuration set: sending is authorized on
	// both. A grant on them gives SES_CONFIGURATION_SET.
	EmailIdentities
	// ParameterKey is the KMS key of those parameters (AWS-managed aws/ssm, or the
	// operator's): its ARN is unknown to the stack, so the grant is on the account's keys
	// in the stack's region, only through SSM (kms:ViaService) and only for the parameters
	// the same Lambda may read (kms:EncryptionContext:PARAMETER_ARN). It applies only with
	// at least one of them.
	ParameterKey
	// MailgunSigningKeyParameter is the SSM Parameter Store SecureString parameter that
	// holds the Mailgun account's HTTP webhook signing key, which the emailevents Lambda
	// verifies POST /esp/mailgun/webhook with. Like the others, the operator creates it, the
	// stack knows only its name (context mailgunSigningKeyParameter), and a grant on it
	// applies only when it is named.
	MailgunSigningKeyParameter
	// SESAccount is the SES account in the stack's region, for its one read the campaigns'
	// send steps make (ses:GetAccount, the maximum send rate): an account-level API, which IAM grants on
	// "*" only. The stack allows no other action on it.
	SESAccount
	// InboundMailBucket is the S3 bucket the stack's SES receipt rule stores inbound mail in
	// (its S3 action; context emailInbound): the bucket and the objects in it. A grant on it gives
	// INBOUND_MAIL_BUCKET, the bucket's name; it applies only when the stack receives mail.
	InboundMailBucket
)

// Grant is a set of actions on one resource, under a condition or none.
type Grant struct {
	On      Resource
	Actions []string
	// If restricts the grant to the requests it holds for; the zero Condition is none.
	If Condition
}

// Condition is one IAM condition of a grant: the condition key Key equals Value
// (StringEquals).
type Condition struct {
	Key   string
	Value string
}

// CRMCredentials is the condition of the grants on SecretsKey that seal and open the CRM
// family's credentials and nothing else: the KMS encryption context is the CRM purpose
// (the sealer family.Env.CRMSecrets, shared/secrets/kms). A value sealed under the default
// purpose (a channel's token, a DKIM key) cannot be opened with such a grant, nor can one
// be sealed under it. A Lambda granted SecretsKey only under this condition gets
// CRM_SECRETS_KEY_ID and not SECRETS_KEY_ID.
var CRMCredentials = Condition{Key: kms.ContextCondition, Value: kms.PurposeCRMCredentials}

// StateMachineRole is the Access key of the jobs state machine's role.
const StateMachineRole = "jobs state machine"

// OutboxScheduleRole is the Access key of the role EventBridge Scheduler assumes to invoke
// the jobs Lambda with platform.OutboxSweepEvent every minute (the outbox's relay).
const OutboxScheduleRole = "outbox sweep schedule"

// QueueScheduleRole is the Access key of the role EventBridge Scheduler assumes to send a
// scheduled message (a long wait) to the jobs queue when it is due.
const QueueScheduleRole = "queue schedule"

// ServiceRoles are the Access rows of roles that AWS services assume, not Lambdas.
func ServiceRoles() []string {
	return []string{StateMachineRole, OutboxScheduleRole, QueueScheduleRole}
}

// Access is the one table of every permission the stack grants: Lambda (or role) -> grants.
// Nothing else in the stack adds an action to a Lambda's role, a Lambda's environment names
// only the resources it has a grant on (see EnvNames), and the tests hold the synthesized
// template equal to this table. No action has a wildcard.
//
// The table grants are held to what the code does: every family's tests record the store
// operations they make, dynamo.Actions turns them into the DynamoDB actions the AWS store
// sends (held to what it really sends on DynamoDB Local), and each family's TestMain fails
// when one is not granted here to the Lambda that runs that code (accesstest). DynamoDB
// transactions have no IAM action of their own: TransactWriteItems is authorized per
// contained operation (Put -> PutItem, Update -> UpdateItem, Delete -> DeleteItem,
// ConditionCheck -> ConditionCheckItem). UpdateItem is what store.Add and store.AddOp
// (atomic counters) become. The grants on SecretsKey are held to the tests' seals
// (kms:GenerateDataKey) and opens (kms:Decrypt) the same way, each under its sealer's
// purpose, which a grant's CRMCredentials condition must match (secretstest); where a
// family's tests reach every sealer its Lambda holds, a grant they never needed fails too
// (accesstest.KMSComplete).
//
// KMS Decrypt/GenerateDataKey on SecretsKey goes to the Lambdas that seal or open provider
// credentials (the channels family), which also gives them SECRETS_KEY_ID; under the
// CRMCredentials condition to those that seal or open CRM credentials, which gives them
// CRM_SECRETS_KEY_ID instead (a Lambda may hold both grants, and then both variables). Likewise
// states:StartExecution on JobsStateMachine gives JOBS_STATE_MACHINE_ARN, and
// ssm:GetParameter on a secret's parameter gives its name (WHATSAPP_APP_SECRET_PARAMETER,
// SDK_KEY_PARAMETER, CRM_HUBSPOT_CLIENT_SECRET_PARAMETER, AI_OPENAI_API_KEY_PARAMETER, ...). Grants on parameters the configuration does not name are left out
// (AccessFor), and so is the ParameterKey grant of a Lambda left with none.
func Access() map[string][]Grant {
	logs := Grant{On: OwnLogGroup, Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}}
	// BatchGetItem is GetItem for up to 100 keys at once (store.GetMany): it reads nothing
	// GetItem could not, so every Lambda that reads and writes the table may batch its reads.
	tableReadWrite := []string{
		"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
		"dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:ConditionCheckItem",
	}
	// managedAI is what generating through the managed AI family needs, in its own Lambda or
	// in process (copilot): an account's own provider key opened (Decrypt; the Lambdas never
	// seal one, the operator's admin command does) and the platform's managed keys read once
	// per cold start from their SSM parameters (GetParameter with decryption, which has SSM
	// call kms:Decrypt for the role).
	managedAI := []Grant{
		{On: SecretsKey, Actions: []string{"kms:Decrypt"}},
		{On: AIOpenAIKeyParameter, Actions: []string{"ssm:GetParameter"}},
		{On: AIAnthropicKeyParameter, Actions: []string{"ssm:GetParameter"}},
		{On: AIGeminiKeyParameter, Actions: []string{"ssm:GetParameter"}},
		{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
	}
	return map[string][]Grant{
		// Serves /openapi.yaml and /healthz: no table, no keys.
		"public": {logs},
		"pats": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		"bots": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}}, // job steps (SendMessageBatch): a deleted bot's purge
		},
		"subscribers": {logs,
			{On: Table, Actions: tableReadWrite}, // UpdateItem: the new-subscriber counters (store.AddOp)
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}}, // the removal of deleted labels and fields
		},
		"collections": {logs,
			// No UpdateItem: counts are conditioned puts (limits), not atomic adds.
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:ConditionCheckItem"}},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}}, // the purge of a deleted collection's records
		},
		// Channels and WhatsApp templates: the provider credentials it stores are sealed
		// under SecretsKey (GenerateDataKey) and opened to call the provider (Decrypt).
		"channels": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
		},
		// The providers' public webhooks: resolve the channel and open its webhook secret
		// (Decrypt), remember enqueued updates (GetItem/PutItem), enqueue them for the runtime
		// (SendMessage), and apply WhatsApp template review outcomes to the channels family's
		// catalog (Query on GSI2, PutItem, DeleteItem), and WhatsApp's delivery statuses to the
		// broadcast rows their messages were sent for (broadcasts.RecordDeliveries: a row's
		// update and its count, one transaction: PutItem, UpdateItem). GenerateMac: the cursor
		// key every family derives at cold start.
		//
		// The WhatsApp app secret checks X-Hub-Signature-256 and the verify token answers
		// Meta's subscription check: read once per cold start from their SSM parameters
		// (GetParameter with decryption, which has SSM call kms:Decrypt for the role).
		"webhooks": {logs,
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
			{On: WhatsAppAppSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: WhatsAppVerifyTokenParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
		},
		// The execution traces: reads only (PutItem: request log entries and last_used_at).
		// The runtime itself runs in the jobs Lambda.
		"runtime": {logs,
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Reads only. GenerateMac although it serves no list: platform.FamilyHandler derives
		// the cursor key at every cold start. PutItem: the request log entries of its reads.
		"stats": {logs,
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		"reactions": {logs,
			// UpdateItem: the bot's publication counter (store.AddOp) that publishing, an
			// import and deleting a published reaction move in their transactions;
			// ConditionCheckItem: the registry checks in those transactions. PutItem,
			// DeleteItem and Query also serve the labels and fields an import creates through
			// the subscribers family, and Query the connected channels publishing warns about.
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		"requestlogs": {logs,
			// PutItem: last_used_at bookkeeping and the request log entries of its own reads.
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		"auditlog": {logs,
			// PutItem: the principal's last_used_at bookkeeping.
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Content documents and templates. UpdateItem: the test-send counters (store.Add);
		// Decrypt: a test send of a message opens the channel's credentials; SendEmail and
		// SendRawEmail: a test send of an email (SES v2 SendEmail with raw content).
		"content": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt"}},
			{On: EmailIdentities, Actions: []string{"ses:SendEmail", "ses:SendRawEmail"}},
		},
		// Popups, and the public script and event routes websites call. UpdateItem: the stats
		// and rate-limit counters (store.Add) and, with ConditionCheckItem, the subscriber a
		// form's answers are written to (the subscribers family's upsert).
		"popups": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Events: custom events appended to the event log (items of the same table on AWS,
		// shared/eventlog/storelog: TransactWriteItems per event), the list and the counts
		// (Query), the subscriber each names (GetItem).
		"events": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Experiments: definitions, versions, exposures appended to the event log (in the same
		// table on AWS), reports scanning it, and cohorts saved as segments.
		"experiments": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Funnels: definitions, reports scanning the event log (in the same table on AWS), and
		// cohorts saved as segments (TransactWriteItems: the members' chunks and the segment).
		"funnels": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Flow intelligence: the flow counters (Query; the reaggregation job's corrections are
		// UpdateItem adds, TransactWriteItems), the account's policy (conditional PutItem),
		// the reaggregation jobs, the bot's running job and its daily start count
		// (TransactWriteItems with ConditionCheck), the traces the samples read (GetItem,
		// Query) and the reaction versions (GetItem). SendMessage: the reaggregation job's step.
		"flowintel": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
		},
		// Managed AI: the Idempotency-Key claims and answers (PutItem, GetItem, DeleteItem),
		// the answer and its usage counters in one transaction (TransactWriteItems with
		// UpdateItem), the usage report (Query); managedAI (a provider without a managed key
		// is reached only with an account's own key). GenerateMac: the kernel's cursor key,
		// derived at every cold start.
		"ai": append([]Grant{logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		}, managedAI...),
		// Replay: trace reads (GetItem, Query on the run index), reactions' versions and
		// drafts (GetItem, Query), fixtures with their per-reaction counters and regression
		// runs with their results (TransactWriteItems, PutItem, Query on GSI1); the audit
		// events of its POST and DELETE routes; list cursors.
		"replay": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Copilot proposals: the proposal and its account pointer (TransactWriteItems:
		// PutItem), their status and last outcomes (PutItem), the lists (Query); the
		// reaction's draft read, validated and updated through the reactions family (GetItem,
		// Query, PutItem, TransactWriteItems) and its index entry written (PutItem); the bots
		// of the account (Query). A proposal is generated through the managed AI family in
		// process, with the ai Lambda's grants for it: the Idempotency-Key claims and the
		// usage counters (PutItem, DeleteItem, UpdateItem), and managedAI.
		"copilot": append([]Grant{logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		}, managedAI...),
		// Playbooks: installs and their account pointers (TransactWriteItems: PutItem,
		// DeleteItem), the journal written before and after each create (conditional
		// PutItem), the lists (Query); the labels, fields, content documents (and their
		// versions), popups (and their origin items), collections and reactions an install
		// creates, publishes and, on a rollback, deletes (a document: archives) through their
		// families in process (their counters: UpdateItem; ConditionCheckItem: the reactions
		// registry; a published document's content_published event: PutEvents); the bot's
		// channels (Query); KPIs read from the event log (Query). SendMessage: the
		// job that rolls back an abandoned install, and the purge jobs a rolled-back label,
		// field or collection starts.
		"playbooks": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
		},
		// Onboarding: the account's one session (GetItem, conditional PutItem); the bot a
		// session names is checked through the kernel's tenancy check (GetItem).
		"onboarding": {logs,
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"}},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Segments: reads, member pages, deletions (TransactWriteItems); staleness reads the
		// funnels (and experiments) their members were computed from.
		"segments": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
		},
		// Sending domains and inbound mail. GenerateDataKey/Decrypt: each domain's DKIM key is
		// sealed; SES: the domain becomes an SES identity with that key and its MAIL FROM;
		// SendEmail/SendRawEmail: inbound routes that forward. No DeleteEmailIdentity: a
		// deleted domain's identity is deregistered by its release job, in the jobs Lambda
		// (functions/emaildomains, ReleaseStep), whose outbox item the sweep sends there.
		"emaildomains": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
			{On: EmailIdentities, Actions: []string{"ses:CreateEmailIdentity", "ses:PutEmailIdentityDkimSigningAttributes",
				"ses:PutEmailIdentityMailFromAttributes", "ses:SendEmail", "ses:SendRawEmail"}},
			// Inbound mail SES stored in the bucket (its receipt rule's S3 action, for
			// messages of any size up to 10 MiB) is read once its SNS notification arrives,
			// then deleted. ListBucket: so that a message already taken is a 404 (NoSuchKey),
			// which S3 answers only to a role that may list the bucket, not a 403.
			{On: InboundMailBucket, Actions: []string{"s3:GetObject", "s3:DeleteObject", "s3:ListBucket"}},
		},
		// The MCP server: the tools of the families it serves (functions/mcp/wiring), run
		// as their routes run. Reads: the tenancy check and the read tools (GetItem, Query);
		// PutItem: the broadcast tools' changes (a legacy broadcast started, paused, resumed,
		// canceled) and the outbox item of the send job they start, which SendMessage
		// delivers after the commit and DeleteItem then clears; events:PutEvents: the audit
		// events of mutating tools; GenerateMac: list cursors. No tool sends (the broadcast
		// tools' send job runs in the jobs Lambda).
		//
		// The CRM read tools ask the connection's CRM for its fields and pipelines as the
		// crm Lambda's routes do: Decrypt opens the connection's sealed credentials; an access
		// token about to expire is refreshed there and then, under the refresh lease
		// (PutItem), and the new tokens (a rotated refresh token, the only one that works
		// afterwards) sealed again (GenerateDataKey), which for HubSpot and Salesforce takes
		// the OAuth applications' client secrets, read at cold start as the crm Lambda reads
		// them. PutItem also keeps the discovery cache and marks a connection whose
		// credentials the CRM refused. The key only under CRMCredentials: the MCP Lambda
		// opens no channel's credentials (the broadcast tools run without them).
		"mcp": {logs,
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"}},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, If: CRMCredentials},
			{On: CRMHubSpotClientSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: CRMSalesforceClientSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
		},
		// Broadcasts. Decrypt: sends and test sends open the channel's credentials;
		// SendMessage: the send job's start message, staged in the outbox of the change.
		"broadcasts": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
		},
		// Email campaigns. Decrypt: the sending domain's DKIM key; SendEmail/SendRawEmail:
		// test sends; SendMessage: the send job's start message, staged in the outbox of
		// the state change and delivered after it commits. GenerateMac also derives the
		// email link key.
		"emailcampaigns": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt"}},
			{On: EmailIdentities, Actions: []string{"ses:SendEmail", "ses:SendRawEmail"}},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
		},
		// Opens, clicks, unsubscribes, provider webhooks and the suppression list: UpdateItem
		// moves the campaigns' counters; GenerateMac derives the link key tokens are
		// checked with. The Mailgun signing key verifies Mailgun's webhooks: read once per
		// cold start from its SSM parameter.
		"emailevents": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: MailgunSigningKeyParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
		},
		// Browser push. GenerateDataKey/Decrypt: the VAPID private key is sealed (enable,
		// rotate) and opened (test send), and a test send opens the subscription's sealed
		// endpoint and keys (the customer SDK's items, through its service); UpdateItem:
		// the send and rate-limit counters and the subscriptions it expires. The push
		// services themselves are reached over the internet, not through an AWS API.
		"webpush": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
		},
		// The customer SDK's management routes: the project (identity secrets sealed:
		// GenerateDataKey to seal at enable and rotation, Decrypt to open), installations,
		// revocations (TransactWriteItems) and counters (UpdateItem, store.Add).
		//
		// The project-key secret signs the project keys it shows: read once per cold start
		// from its SSM parameter (GetParameter with decryption, which has SSM call
		// kms:Decrypt for the role). Not configured, enabling the SDK answers 503.
		"customersdk": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
			{On: SDKKeyParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
		},
		// CRM connections and the OAuth callback: the connections' credentials and the
		// pending starts' PKCE verifiers are sealed (GenerateDataKey) and opened (Decrypt:
		// the callback, token refreshes, revocation at disconnect); TransactWriteItems
		// (PutItem, DeleteItem) writes and removes a connection with its credentials and
		// account reservation; PutItem conditioned on the revision takes the refresh lease
		// and counts OAuth starts. The providers are reached over the internet.
		//
		// The OAuth applications' client secrets authenticate the code exchange and token
		// refreshes: read once per cold start from their SSM parameters (GetParameter with
		// decryption, which has SSM call kms:Decrypt for the role). Not configured, that
		// provider's OAuth starts answer 503 oauth_not_configured.
		//
		// The key only under CRMCredentials: the crm Lambda seals and opens CRM credentials
		// and nothing else, so it cannot open a channel's token.
		"crm": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, If: CRMCredentials},
			{On: CRMHubSpotClientSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: CRMSalesforceClientSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
			// Sync jobs, and the erasure of a disconnected connection's sync state, run as
			// executions of the jobs state machine (shared/jobs/sfn): a sync is paced to the
			// provider's limit for as long as its subscribers take.
			{On: JobsStateMachine, Actions: []string{"states:StartExecution"}},
		},
		// Meta connections and the Facebook Login callback: the connection, its sealed
		// long-lived token and its assets (TransactWriteItems: PutItem, DeleteItem; PutItem
		// conditioned on revisions: selection, attachments, the start rate limit), the
		// reservation of a Facebook user for one connection (PutItem MustNotExist,
		// ConditionCheckItem, DeleteItem, in those transactions; Query: the connections of
		// before reservations), the pending starts (PutItem, DeleteItem). The token is sealed (GenerateDataKey) and
		// opened (Decrypt: assets, check, attach, revocation) under CRMCredentials, the
		// integrations' context the jobs Lambda's token refreshes already seal under;
		// attaching a phone number connects a WhatsApp channel in process, whose credentials
		// the channels family seals under the default context (the channels row's grant),
		// and disconnects it again (DeleteItem, Query; Decrypt, to release it with WhatsApp)
		// when the connection was deleted meanwhile (both proved by functions/meta/wiring's
		// tests, accesstest.KMSComplete); a delete reads its attached channels (GetItem) to refuse while one exists.
		// The token refresh job's first step is staged in the outbox in the callback's
		// transaction (PutItem), sent after the commit (SendMessage) and its item cleared
		// (DeleteItem); the outbox's sweep in the jobs Lambda sends what that left.
		// Graph is reached over the internet.
		"meta": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: Bus, Actions: []string{"events:PutEvents"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, If: CRMCredentials},
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
			// The Facebook app's secret authenticates the code exchange and the long-lived
			// token exchange: read once per cold start from its SSM parameter.
			{On: MetaAppSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
		},
		// The device surface /sdk/v1/*: installations registered and authenticated (the
		// token lookup, GetItem), identity secrets opened (Decrypt), push credentials sealed
		// (GenerateDataKey), receipts and rate limits (TransactWriteItems, UpdateItem),
		// device events appended to the event log (in the same table on AWS), and browser
		// push's VAPID public key read (GetItem). The project-key secret checks the project
		// key a registration presents: read at cold start as the customersdk Lambda reads it.
		// GenerateMac although it serves no list: platform.FamilyHandler derives the cursor
		// and link keys at every cold start, and fails without CURSOR_KEY_ID.
		"sdk": {logs,
			{On: Table, Actions: tableReadWrite},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
			{On: SDKKeyParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
		},
		"authorizer": {logs,
			// PutItem: last_used_at.
			{On: Table, Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem"}},
		},
		"auditsink": {logs,
			{On: Table, Actions: []string{"dynamodb:PutItem"}},
			// Lambda's on-failure destination of the asynchronous invocations EventBridge
			// makes: Lambda sends with the function's own role.
			{On: AuditDLQ, Actions: []string{"sqs:SendMessage"}},
		},
		"jobs": {logs,
			// Query (table and indexes) and DeleteItem: among others, the purge of deleted
			// bots' data (docs/purge.md), which the bots Lambda queues, and the outbox's
			// sweep (docs/outbox.md): Query on its shards, DeleteItem of what it sent.
			{On: Table, Actions: tableReadWrite},
			// SendMessage: continuations and the outbox's sweep (SendMessageBatch is
			// authorized by it).
			// ChangeMessageVisibility: the SQS consumer's backoff and queue.ExtendVisibility.
			// Receive/Delete/GetQueueAttributes: the event source mapping polls with the
			// function's role (the actions of AWSLambdaSQSQueueExecutionRole).
			{On: JobsQueue, Actions: []string{
				"sqs:SendMessage", "sqs:ChangeMessageVisibility",
				"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
			}},
			// The conversation runtime runs here: it opens channel credentials to send
			// (Decrypt). The meta family's token refresh job hands a refreshed token on to
			// the WhatsApp channels attached from its connection (channels.Service.
			// ReplaceCredentials), which seals their new credentials under the default
			// context (GenerateDataKey), as the channels row does.
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}},
			// The CRM family's steps (sync) call the CRMs as the crm Lambda does: they open
			// the connections' credentials (Decrypt), refresh expiring OAuth tokens under the
			// refresh lease and seal the new ones (GenerateDataKey), with the OAuth applications'
			// client secrets, read once per cold start from their SSM parameters.
			{On: SecretsKey, Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, If: CRMCredentials},
			{On: CRMHubSpotClientSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: CRMSalesforceClientSecretParameter, Actions: []string{"ssm:GetParameter"}},
			// The meta family's token refresh job exchanges long-lived tokens with the Facebook
			// app's secret and seals them under CRMCredentials (the grant above).
			{On: MetaAppSecretParameter, Actions: []string{"ssm:GetParameter"}},
			{On: ParameterKey, Actions: []string{"kms:Decrypt"}},
			// A wait step longer than SQS can delay a message (15 minutes) becomes one
			// Scheduler schedule that sends it when due, run with ScheduleRole.
			{On: Schedules, Actions: []string{"scheduler:CreateSchedule"}},
			{On: ScheduleRole, Actions: []string{"iam:PassRole"}},
			// Email campaigns send here: SES, and the link key their tracking tokens are
			// signed with (derived with GenerateMac). DeleteEmailIdentity: the purge of a
			// deleted bot deregisters the SES identities of the domains it verified
			// (functions/emaildomains, PurgeStep), and a deleted domain's release job its own
			// (ReleaseStep).
			{On: EmailIdentities, Actions: []string{"ses:SendEmail", "ses:SendRawEmail", "ses:DeleteEmailIdentity"}},
			// The campaigns' send steps read the SES account's maximum send rate when no
			// EMAIL_RATE is set (an account-level API: no resource).
			{On: SESAccount, Actions: []string{"ses:GetAccount"}},
			{On: CursorKey, Actions: []string{"kms:GenerateMac"}},
			// A CRM sync that has run its steps for one execution goes on as a new one
			// (functions/crm, stepsPerRun): a Standard execution ends at 25,000 events.
			{On: JobsStateMachine, Actions: []string{"states:StartExecution"}},
		},
		// The schedules of long waits send their message to the jobs queue, and nothing else.
		QueueScheduleRole: {
			{On: JobsQueue, Actions: []string{"sqs:SendMessage"}},
		},
		// The schedule of the outbox's sweep invokes the jobs Lambda, and nothing else.
		OutboxScheduleRole: {
			{On: JobsFunction, Actions: []string{"lambda:InvokeFunction"}},
		},
		// CDK adds these itself when it wires the task and the execution logging; they are
		// listed so the test holds the role to them. The log-delivery APIs take no resource.
		StateMachineRole: {
			{On: JobsFunction, Actions: []string{"lambda:InvokeFunction"}},
			{On: NoResource, Actions: []string{
				"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
				"logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
				"logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
			}},
		},
	}
}
