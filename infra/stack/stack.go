// Package stack is the AWS shape of the bot platform as one CDK stack: an HTTP API routing
// every operation of docs/openapi.yaml to the Lambda of its family behind the shared
// authorizer, the DynamoDB table, the jobs queue and state machine, the audit bus, the KMS
// keys, SES's event and inbound mail notifications, and the alarms. Every permission comes
// from one table, Access.
package stack

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscertificatemanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsses"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssesactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctionstasks"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/audit/eventbridge"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/queue/sqs"
	"github.com/botplatform/api/shared/store/dynamo"
)

// The Lambdas that serve no route. families.Workers() lists the ones with a main; the stack
// must know how to wire each of them.
const (
	Authorizer = "authorizer"
	AuditSink  = "auditsink"
	Jobs       = "jobs"
)

// Timeouts of the Lambdas.
const (
	HTTPTimeout      = 10 * time.Second // every family and the authorizer
	AuditSinkTimeout = 60 * time.Second
	JobsTimeout      = 5 * time.Minute
)

// The Lambdas' shared settings.
const (
	MemoryMB = 256
	Handler  = "bootstrap"
	LogLevel = "info"
)

// Jobs queue and dead-letter settings.
const (
	// JobsVisibilityTimeout is six times the jobs Lambda's timeout, as AWS advises for
	// queues drained by Lambda (a batch may wait behind throttled invocations).
	JobsVisibilityTimeout = 6 * JobsTimeout
	MaxReceiveCount       = 5
	DLQRetention          = 14 * 24 * time.Hour
	JobsBatchSize         = 10
)

// Authorizer cache: API Gateway keeps the authorizer's answer per Authorization header for
// this long, across all routes, so a revoked token may still pass for up to this long.
const AuthorizerCacheTTL = 30 * time.Second

// AuditArchiveRetention is how long the audit bus archive keeps events for replay.
const AuditArchiveRetention = 365 * 24 * time.Hour

// Where SNS delivers SES's notifications, under the public URL: the email events webhook
// (functions/emailevents) and the SES inbound route (functions/emaildomains).
const (
	SESEventsPath  = "/esp/ses/webhook"
	SESInboundPath = "/esp/ses/inbound"
)

// Inbound mail (context emailInbound): the receipt rule stores each message under
// InboundMailPrefix in the inbound bucket, which expires objects after InboundMailExpiry.
// The platform deletes each object once it has received it; the expiry is a backstop for a
// message it never took (an error, a notification lost).
const (
	InboundMailPrefix = "inbound/"
	InboundMailExpiry = 3 * 24 * time.Hour
)

// SESEventTypes are the SES events the configuration set publishes to the events topic:
// those functions/emailevents applies (SNSDelivery). The others would be delivered only to
// be dropped: SES's opens and clicks would count what the platform's pixel and links count,
// and sends, rejects and delays change no recipient.
func SESEventTypes() []awsses.EmailSendingEvent {
	return []awsses.EmailSendingEvent{awsses.EmailSendingEvent_DELIVERY, awsses.EmailSendingEvent_BOUNCE, awsses.EmailSendingEvent_COMPLAINT}
}

// InboundRuleSetName is the SES receipt rule set of a stage (context emailInbound).
func InboundRuleSetName(stage string) string { return "botplatform-" + stage }

// Stack is the synthesized stack and what tests look up in it.
type Stack struct {
	awscdk.Stack
	Config Config
	// Routes are the API's routes, from the OpenAPI documents.
	Routes []Route
	// RouteStack is the nested stack that holds the API's routes.
	RouteStack awscdk.NestedStack
	// Lambdas are the names of every Lambda, families first.
	Lambdas []string
}

// FunctionName is the deployed name of the Lambda called name.
func FunctionName(stage, name string) string { return "botplatform-" + stage + "-" + name }

// BusName is the audit event bus of a stage.
func BusName(stage string) string { return "botplatform-" + stage }

// Timeout is the timeout of the Lambda called name.
func Timeout(name string) time.Duration {
	switch name {
	case AuditSink:
		return AuditSinkTimeout
	case Jobs:
		return JobsTimeout
	}
	return HTTPTimeout
}

// LambdaNames returns every Lambda of the stack: one per family of families.All(),
// then the authorizer, the audit sink and the jobs worker. A worker that families.Workers()
// lists and the stack does not know how to wire is an error.
func LambdaNames() ([]string, error) {
	workers := []string{Authorizer, AuditSink, Jobs}
	var names []string
	var problems []error
	for _, f := range families.All() {
		if slices.Contains(workers, f.Name) {
			problems = append(problems, fmt.Errorf("family %q has the name of a worker Lambda", f.Name))
		}
		names = append(names, f.Name)
	}
	for _, w := range families.Workers() {
		if !slices.Contains(workers, w) {
			problems = append(problems, fmt.Errorf("families.Workers() lists %q, which the stack does not wire", w))
		}
	}
	return append(names, workers...), errors.Join(problems...)
}

func familyNames() []string {
	var names []string
	for _, f := range families.All() {
		names = append(names, f.Name)
	}
	return names
}

// New defines the stack. It checks everything it can before defining a resource and reports
// every problem at once: the configuration, the OpenAPI document against the families and
// the reviewed public routes, the access table, the Lambda assets.
func New(scope constructs.Construct, id string, cfg Config) (*Stack, error) {
	var problems []error
	add := func(err error) {
		if err != nil {
			problems = append(problems, err)
		}
	}
	add(cfg.Validate())
	names, err := LambdaNames()
	add(err)
	routes, err := Routes(familyNames(), docs.Documents...)
	add(err)
	add(checkAccess(names))
	if cfg.AssetDir != "" {
		add(checkAssets(cfg.AssetDir, names))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}

	st := awscdk.NewStack(scope, jsii.String(id), &awscdk.StackProps{
		Description:           jsii.String("Bot platform token API (" + cfg.Stage + ")"),
		TerminationProtection: jsii.Bool(cfg.DeletionProtection),
	})
	awscdk.Tags_Of(st).Add(jsii.String("project"), jsii.String("botplatform"), nil)
	awscdk.Tags_Of(st).Add(jsii.String("stage"), jsii.String(cfg.Stage), nil)

	b := &builder{st: st, cfg: cfg, fns: map[string]*lambdaFn{}}
	b.removal = awscdk.RemovalPolicy_DESTROY
	if cfg.Prod() || cfg.DeletionProtection {
		b.removal = awscdk.RemovalPolicy_RETAIN
	}
	b.defineTable()
	b.defineKeys()
	b.defineQueues()
	for _, n := range names {
		b.defineFunction(n)
	}
	b.defineJobs()
	b.defineOutboxSweep()
	b.defineQueueSchedules()
	b.defineAudit()
	b.defineEmail() // before the grants: the inbound mail grant names its bucket
	if err := b.applyAccess(names); err != nil {
		return nil, err
	}
	b.defineAPI(routes)
	b.applySettings(names) // after the API: PUBLIC_URL defaults to its endpoint
	b.subscribeEmail()     // after the API and its routes: SNS confirms at the public URL
	b.defineAlarms(names)
	b.defineOutputs()
	return &Stack{Stack: st, Config: cfg, Routes: routes, RouteStack: b.routeStack, Lambdas: names}, nil
}

// checkAccess makes sure every Lambda has a row in Access, no row names an unknown role,
// no action has a wildcard, and Lambdas' grants are all scoped to a resource.
func checkAccess(names []string) error {
	var problems []error
	access := Access()
	for _, n := range names {
		if _, ok := access[n]; !ok {
			problems = append(problems, fmt.Errorf("access: Lambda %q has no row in Access()", n))
		}
	}
	for role, grants := range access {
		service := slices.Contains(ServiceRoles(), role)
		if !service && !slices.Contains(names, role) {
			problems = append(problems, fmt.Errorf("access: row %q is no Lambda of the stack", role))
		}
		for i, g := range grants {
			for _, a := range g.Actions {
				if strings.Contains(a, "*") || !strings.Contains(a, ":") {
					problems = append(problems, fmt.Errorf("access: %s: action %q is not one explicit action", role, a))
				}
			}
			if !service && (g.On == NoResource || g.On == JobsFunction) {
				problems = append(problems, fmt.Errorf("access: %s: a Lambda's grants must be on one of its resources", role))
			}
			if g.On == SESAccount && !slices.Equal(g.Actions, []string{"ses:GetAccount"}) {
				problems = append(problems, fmt.Errorf("access: %s: the SES account is granted for ses:GetAccount alone", role))
			}
			if role == OutboxScheduleRole && g.On != JobsFunction {
				problems = append(problems, fmt.Errorf("access: %s: the schedule invokes the jobs Lambda and may do nothing else", role))
			}
			if role == QueueScheduleRole && g.On != JobsQueue {
				problems = append(problems, fmt.Errorf("access: %s: the schedules send to the jobs queue and may do nothing else", role))
			}
			if g.On == ParameterKey && !slices.ContainsFunc(grants, func(g Grant) bool { return slices.Contains(parameters, g.On) }) {
				problems = append(problems, fmt.Errorf("access: %s: a grant on ParameterKey needs one on a parameter (its encryption context)", role))
			}
			if g.If != (Condition{}) && (g.If.Key == "" || g.If.Value == "") {
				problems = append(problems, fmt.Errorf("access: %s: condition %v is not one key equal to one value", role, g.If))
			}
			// ParameterKey's conditions are the stack's (parameterKey); a conditioned grant
			// on SecretsKey must be one the environment can name (envVar).
			if (g.On == ParameterKey && g.If != (Condition{})) || (g.On == SecretsKey && g.If != (Condition{}) && g.If != CRMCredentials) {
				problems = append(problems, fmt.Errorf("access: %s: no condition %v on resource %d", role, g.If, g.On))
			}
			if slices.ContainsFunc(grants[:i], func(o Grant) bool { return o.On == g.On && o.If == g.If }) {
				problems = append(problems, fmt.Errorf("access: %s: two grants on resource %d under the same condition: merge them", role, g.On))
			}
		}
	}
	for role := range Settings() {
		if !slices.Contains(names, role) {
			problems = append(problems, fmt.Errorf("settings: row %q is no Lambda of the stack", role))
		}
	}
	return errors.Join(problems...)
}

type lambdaFn struct {
	fn   awslambda.Function
	role awsiam.Role
	logs awslogs.LogGroup
}

// builder holds the resources while the stack is defined.
type builder struct {
	st      awscdk.Stack
	cfg     Config
	removal awscdk.RemovalPolicy

	table      awsdynamodb.Table
	secretsKey awskms.Key
	cursorKey  awskms.Key
	jobsQueue  awssqs.Queue
	jobsDLQ    awssqs.Queue
	auditDLQ   awssqs.Queue
	bus        awsevents.EventBus
	machine    awsstepfunctions.StateMachine
	// scheduleRole is the role Scheduler assumes to send a long wait's message when due.
	scheduleRole awsiam.Role
	// sesSet is the SES configuration set email is sent with (configurationSet).
	sesSet awsses.ConfigurationSet
	// emailEvents is the topic of the SES events of sesSet (defineEmail); inboundTopic and
	// inboundBucket receive mail, with EmailInbound only (nil without).
	emailEvents   awssns.Topic
	inboundTopic  awssns.Topic
	inboundBucket awss3.Bucket
	inboundRules  awsses.ReceiptRuleSet
	api           awsapigatewayv2.HttpApi
	// routeStack is the nested stack of the API's routes (defineAPI).
	routeStack awscdk.NestedStack
	stage      awsapigatewayv2.HttpStage
	domain     awsapigatewayv2.DomainName
	fns        map[string]*lambdaFn
}

func duration(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// constructID turns a Lambda name into a construct id: "auditsink" -> "Auditsink".
func constructID(name string) string {
	return strings.ToUpper(name[:1]) + name[1:]
}

func (b *builder) logGroup(id string) awslogs.LogGroup {
	return awslogs.NewLogGroup(b.st, jsii.String(id), &awslogs.LogGroupProps{
		Retention:     retentions()[b.cfg.LogRetentionDays],
		RemovalPolicy: b.removal,
	})
}

// defineTable declares the single table with the attribute names the DynamoDB store uses.
// Encryption: the AWS-managed key (aws/dynamodb). A customer key would add a key policy to
// run and KMS permissions to every role for no control we use; the AWS-managed key keeps
// its use in CloudTrail.
func (b *builder) defineTable() {
	sc := dynamo.TableSchema()
	str := func(name string) *awsdynamodb.Attribute {
		return &awsdynamodb.Attribute{Name: jsii.String(name), Type: awsdynamodb.AttributeType_STRING}
	}
	b.table = awsdynamodb.NewTable(b.st, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey: str(sc.PartitionKey),
		SortKey:      str(sc.SortKey),
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection:  jsii.Bool(b.cfg.DeletionProtection),
		TimeToLiveAttribute: jsii.String(sc.TTLAttribute),
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		RemovalPolicy:       b.removal,
	})
	for _, ix := range sc.Indexes {
		b.table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(ix.Name),
			PartitionKey:   str(ix.PartitionKey),
			SortKey:        str(ix.SortKey),
			ProjectionType: awsdynamodb.ProjectionType_ALL,
		})
	}
}

// keyAdministration are the key-level KMS actions the account keeps on its keys, listed one
// by one instead of the usual kms:* so that no policy of the stack has a wildcard action.
// They delegate to IAM: they give no one anything by themselves.
func keyAdministration() []string {
	return []string{
		"kms:CancelKeyDeletion", "kms:CreateAlias", "kms:DeleteAlias", "kms:DescribeKey",
		"kms:DisableKey", "kms:DisableKeyRotation", "kms:EnableKey", "kms:EnableKeyRotation",
		"kms:GetKeyPolicy", "kms:GetKeyRotationStatus", "kms:ListGrants", "kms:ListKeyPolicies",
		"kms:ListKeyRotations", "kms:ListResourceTags", "kms:PutKeyPolicy", "kms:RevokeGrant",
		"kms:RotateKeyOnDemand", "kms:ScheduleKeyDeletion", "kms:TagResource",
		"kms:UntagResource", "kms:UpdateAlias", "kms:UpdateKeyDescription",
	}
}

// keyPolicy lets the account's IAM policies administer the key and use it for usage, the
// operations its key spec supports. Which role may use it is then decided by Access.
func keyPolicy(usage ...string) awsiam.PolicyDocument {
	root := []awsiam.IPrincipal{awsiam.NewAccountRootPrincipal()}
	return awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{
		Statements: &[]awsiam.PolicyStatement{
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("AccountAdministersKey"),
				Principals: &root,
				Actions:    jsii.Strings(keyAdministration()...),
				Resources:  jsii.Strings("*"),
			}),
			awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String("AccountPoliciesUseKey"),
				Principals: &root,
				Actions:    jsii.Strings(usage...),
				Resources:  jsii.Strings("*"),
			}),
		},
	})
}

func (b *builder) defineKeys() {
	b.secretsKey = awskms.NewKey(b.st, jsii.String("SecretsKey"), &awskms.KeyProps{
		Alias:             jsii.String("alias/botplatform-" + b.cfg.Stage + "-secrets"),
		Description:       jsii.String("Envelope encryption of stored credentials (" + b.cfg.Stage + ")"),
		KeySpec:           awskms.KeySpec_SYMMETRIC_DEFAULT,
		KeyUsage:          awskms.KeyUsage_ENCRYPT_DECRYPT,
		EnableKeyRotation: jsii.Bool(true),
		Policy: keyPolicy("kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey",
			"kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom", "kms:ReEncryptTo"),
		RemovalPolicy: b.removal,
	})
	// HMAC keys do not rotate automatically (KMS supports it for symmetric encryption keys
	// only), and rotating this one would invalidate every cursor in flight anyway.
	b.cursorKey = awskms.NewKey(b.st, jsii.String("CursorKey"), &awskms.KeyProps{
		Alias:         jsii.String("alias/botplatform-" + b.cfg.Stage + "-cursors"),
		Description:   jsii.String("Derives the key that signs list cursors (" + b.cfg.Stage + ")"),
		KeySpec:       awskms.KeySpec_HMAC_256,
		KeyUsage:      awskms.KeyUsage_GENERATE_VERIFY_MAC,
		Policy:        keyPolicy("kms:GenerateMac", "kms:VerifyMac"),
		RemovalPolicy: b.removal,
	})
}

// defineQueues declares the jobs queue with its dead-letter queue, and the dead-letter queue
// of audit deliveries. Queues are encrypted with SQS-managed keys, which needs no KMS
// permission on any role.
func (b *builder) defineQueues() {
	dlq := func(id string) awssqs.Queue {
		return awssqs.NewQueue(b.st, jsii.String(id), &awssqs.QueueProps{
			Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
			RetentionPeriod: duration(DLQRetention),
		})
	}
	b.jobsDLQ = dlq("JobsDLQ")
	b.jobsQueue = awssqs.NewQueue(b.st, jsii.String("JobsQueue"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		VisibilityTimeout: duration(JobsVisibilityTimeout),
		// Shorter than the DLQ's: a standard queue's message keeps its first enqueue time
		// when it is dead-lettered.
		RetentionPeriod: duration(4 * 24 * time.Hour),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           b.jobsDLQ,
			MaxReceiveCount: jsii.Number(MaxReceiveCount),
		},
	})
	// Both failure paths of audit delivery end here: EventBridge's (it could not invoke the
	// sink) and Lambda's on-failure destination (the sink failed every attempt).
	b.auditDLQ = dlq("AuditDLQ")
}

func (b *builder) defineFunction(name string) {
	id := constructID(name)
	logs := b.logGroup(id + "Logs")
	role := awsiam.NewRole(b.st, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Lambda " + FunctionName(b.cfg.Stage, name) + "; its policy is stack.Access()[\"" + name + "\"]"),
	})
	props := &awslambda.FunctionProps{
		FunctionName: jsii.String(FunctionName(b.cfg.Stage, name)),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String(Handler),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(b.cfg.AssetDir, name)), nil),
		MemorySize:   jsii.Number(MemoryMB),
		Timeout:      duration(Timeout(name)),
		Role:         role,
		LogGroup:     logs,
		Environment: &map[string]*string{
			EnvStage:    jsii.String(b.cfg.Stage),
			EnvLogLevel: jsii.String(LogLevel),
		},
	}
	if name == Jobs {
		// A job over the queue is a loop: each step sends its continuation to the queue the
		// function consumes. Lambda's recursion detection would drop it after 16 rounds;
		// jobs.MaxSteps is the runaway guard instead.
		props.RecursiveLoop = awslambda.RecursiveLoop_ALLOW
	}
	fn := awslambda.NewFunction(b.st, jsii.String(id+"Function"), props)
	b.fns[name] = &lambdaFn{fn: fn, role: role, logs: logs}
}

// defineJobs wires the jobs Lambda to its queue and defines the state machine of long jobs:
// invoke the Lambda with the job's state (shared/jobs.State: kind, payload, cursor, done,
// steps), take the state it returns, stop when done, else pause and run the next step.
func (b *builder) defineJobs() {
	jobs := b.fns[Jobs].fn
	jobs.AddEventSourceMapping(jsii.String("JobsQueueSource"), &awslambda.EventSourceMappingOptions{
		EventSourceArn:          b.jobsQueue.QueueArn(),
		BatchSize:               jsii.Number(JobsBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
	})

	step := awsstepfunctionstasks.NewLambdaInvoke(b.st, jsii.String("RunStep"), &awsstepfunctionstasks.LambdaInvokeProps{
		Comment:                  jsii.String("Run one bounded step of the job; the Lambda returns the next state"),
		LambdaFunction:           jobs,
		Payload:                  awsstepfunctions.TaskInput_FromJsonPathAt(jsii.String("$")),
		OutputPath:               jsii.String("$.Payload"),
		RetryOnServiceExceptions: jsii.Bool(false), // the retriers below say it explicitly
	})
	step.AddRetry(&awsstepfunctions.RetryProps{
		Errors: jsii.Strings("Lambda.ServiceException", "Lambda.AWSLambdaException",
			"Lambda.SdkClientException", "Lambda.TooManyRequestsException",
			"Lambda.ClientExecutionTimeoutException"),
		Interval:       duration(2 * time.Second),
		MaxAttempts:    jsii.Number(6),
		BackoffRate:    jsii.Number(2),
		JitterStrategy: awsstepfunctions.JitterType_FULL,
	})
	// Steps are idempotent for a given cursor (shared/jobs), so a step that failed (a
	// throttled table after the store's own retries) is safe to run again a few times.
	step.AddRetry(&awsstepfunctions.RetryProps{
		Errors:      jsii.Strings("States.TaskFailed"),
		Interval:    duration(10 * time.Second),
		MaxAttempts: jsii.Number(2),
		BackoffRate: jsii.Number(2),
	})
	failed := awsstepfunctions.NewFail(b.st, jsii.String("JobFailed"), &awsstepfunctions.FailProps{
		Error: jsii.String("JobFailed"),
		Cause: jsii.String("a step of the job failed after its retries; see the execution's history"),
	})
	step.AddCatch(failed, &awsstepfunctions.CatchProps{
		Errors:     jsii.Strings("States.ALL"),
		ResultPath: jsii.String("$.error"),
	})
	pause := awsstepfunctions.NewWait(b.st, jsii.String("Pause"), &awsstepfunctions.WaitProps{
		Time: awsstepfunctions.WaitTime_Duration(duration(time.Second)),
	})
	pause.Next(step)
	finished := awsstepfunctions.NewChoice(b.st, jsii.String("Done?"), nil).
		When(awsstepfunctions.Condition_BooleanEquals(jsii.String("$.done"), jsii.Bool(true)),
			awsstepfunctions.NewSucceed(b.st, jsii.String("JobDone"), nil), nil).
		Otherwise(pause)

	b.machine = awsstepfunctions.NewStateMachine(b.st, jsii.String("JobsStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName: jsii.String(FunctionName(b.cfg.Stage, "jobs")),
		StateMachineType: awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:   awsstepfunctions.DefinitionBody_FromChainable(step.Next(finished)),
		Logs: &awsstepfunctions.LogOptions{
			Destination: b.logGroup("JobsStateMachineLogs"),
			Level:       awsstepfunctions.LogLevel_ALL,
			// Job payloads may name recipients: transitions only, no data.
			IncludeExecutionData: jsii.Bool(false),
		},
	})
}

// OutboxSweepRate is how often the schedule sweeps the outbox. A message a request staged but
// could not send goes out within this plus the outbox's grace (30 s).
const OutboxSweepRate = time.Minute

// defineOutboxSweep declares the EventBridge Scheduler schedule that invokes the jobs Lambda
// with platform.OutboxSweepEvent every minute, and the role it assumes: its one grant is the
// row OutboxScheduleRole of Access (lambda:InvokeFunction on the jobs Lambda), and only
// Scheduler acting for this account may assume it. A failed invocation is not retried by
// Scheduler: the next minute's sweep is the retry, and the sweep is idempotent.
func (b *builder) defineOutboxSweep() {
	role := awsiam.NewRole(b.st, jsii.String("OutboxSweepRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": b.st.Account()}},
		}),
		Description: jsii.String("EventBridge Scheduler: the outbox sweep of " + FunctionName(b.cfg.Stage, Jobs) + `; its policy is stack.Access()["` + OutboxScheduleRole + `"]`),
	})
	jobs := b.fns[Jobs].fn
	for _, g := range Access()[OutboxScheduleRole] { // on JobsFunction only: checkAccess
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(g.Actions...),
			Resources: &[]*string{jobs.FunctionArn()},
		}))
	}
	schedule := awsscheduler.NewCfnSchedule(b.st, jsii.String("OutboxSweep"), &awsscheduler.CfnScheduleProps{
		Name:               jsii.String(FunctionName(b.cfg.Stage, "outbox-sweep")),
		Description:        jsii.String("Relays the outbox items a request could not send (docs/outbox.md)"),
		ScheduleExpression: jsii.String(fmt.Sprintf("rate(%d minute)", int(OutboxSweepRate/time.Minute))),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		State:              jsii.String("ENABLED"),
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     jobs.FunctionArn(),
			RoleArn: role.RoleArn(),
			Input:   jsii.String(platform.OutboxSweepEvent),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumRetryAttempts:     jsii.Number(0),
				MaximumEventAgeInSeconds: jsii.Number(OutboxSweepRate.Seconds()),
			},
		},
	})
	// Scheduler checks at creation that it may assume the role and invoke the target.
	schedule.Node().AddDependency(role)
}

// defineQueueSchedules declares the role EventBridge Scheduler assumes for the one-time
// schedules the jobs Lambda creates when a message is due later than SQS can delay it (a
// long wait step; sqs.Schedules): its one grant is the row QueueScheduleRole of Access
// (sqs:SendMessage on the jobs queue), and only Scheduler acting for this account may assume
// it. The schedules themselves are made at run time and delete themselves once they ran.
func (b *builder) defineQueueSchedules() {
	b.scheduleRole = awsiam.NewRole(b.st, jsii.String("QueueScheduleRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": b.st.Account()}},
		}),
		Description: jsii.String(`EventBridge Scheduler: long waits due on the jobs queue; its policy is stack.Access()["` + QueueScheduleRole + `"]`),
	})
	for _, g := range Access()[QueueScheduleRole] { // on JobsQueue only: checkAccess
		b.scheduleRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(g.Actions...),
			Resources: &[]*string{b.jobsQueue.QueueArn()},
		}))
	}
}

// defineAudit declares the bus, the rule that delivers audit events to the sink, and the
// archive for replay.
func (b *builder) defineAudit() {
	b.bus = awsevents.NewEventBus(b.st, jsii.String("AuditBus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(BusName(b.cfg.Stage)),
	})
	sink := b.fns[AuditSink]
	awsevents.NewRule(b.st, jsii.String("AuditRule"), &awsevents.RuleProps{
		Description: jsii.String("Audit events to the audit sink Lambda"),
		EventBus:    b.bus,
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings(eventbridge.DefaultSource),
			DetailType: jsii.Strings(eventbridge.DetailType),
		},
		Targets: &[]awsevents.IRuleTarget{
			awseventstargets.NewLambdaFunction(sink.fn, &awseventstargets.LambdaFunctionProps{
				DeadLetterQueue: b.auditDLQ,
				RetryAttempts:   jsii.Number(185),
				MaxEventAge:     duration(24 * time.Hour),
			}),
		},
	})
	// EventBridge invokes the sink asynchronously: failures inside the function are
	// Lambda's to retry, and without a destination they would be dropped after the
	// retries. The L1 resource, because the L2 destination grants more than SendMessage.
	cfg := awslambda.NewCfnEventInvokeConfig(b.st, jsii.String("AuditsinkAsync"), &awslambda.CfnEventInvokeConfigProps{
		FunctionName:             sink.fn.FunctionName(),
		Qualifier:                jsii.String("$LATEST"),
		MaximumRetryAttempts:     jsii.Number(2),
		MaximumEventAgeInSeconds: jsii.Number((6 * time.Hour).Seconds()),
		DestinationConfig: &awslambda.CfnEventInvokeConfig_DestinationConfigProperty{
			OnFailure: &awslambda.CfnEventInvokeConfig_OnFailureProperty{Destination: b.auditDLQ.QueueArn()},
		},
	})
	cfg.Node().AddDependency(sink.role) // Lambda checks the role may send to the queue
	b.bus.Archive(jsii.String("AuditArchive"), &awsevents.BaseArchiveProps{
		Description:  jsii.String("Audit events, for replay"),
		EventPattern: &awsevents.EventPattern{Source: jsii.Strings(eventbridge.DefaultSource)},
		Retention:    duration(AuditArchiveRetention),
	})
}

// applyAccess turns each Lambda's row of Access (as the configuration deploys it,
// AccessFor) into its role's policy and its environment.
func (b *builder) applyAccess(names []string) error {
	for _, n := range names {
		f := b.fns[n]
		grants := AccessFor(n, b.cfg)
		for _, g := range grants {
			props := &awsiam.PolicyStatementProps{Actions: jsii.Strings(g.Actions...)}
			var value *string
			if g.On == ParameterKey {
				props.Resources, props.Conditions = b.parameterKey(grants)
			} else {
				arns, v, err := b.resolve(g.On, f)
				if err != nil {
					return fmt.Errorf("access: %s: %w", n, err)
				}
				props.Resources, value = jsii.Strings(arns...), v
				if g.If != (Condition{}) {
					props.Conditions = &map[string]any{"StringEquals": map[string]any{g.If.Key: g.If.Value}}
				}
			}
			f.role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(props))
			if v, ok := envVar(g); ok {
				f.fn.AddEnvironment(jsii.String(v), value, nil)
			}
		}
	}
	return nil
}

// parameterARN is the ARN of the SSM parameter called name in the stack's account and
// region ("/a/b" -> arn:...:parameter/a/b, "a" -> arn:...:parameter/a). It is also the
// encryption context SSM decrypts a SecureString with (PARAMETER_ARN).
func (b *builder) parameterARN(name string) *string {
	return b.st.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("ssm"),
		Resource:     jsii.String("parameter"),
		ResourceName: jsii.String(strings.TrimPrefix(name, "/")),
		ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
}

// parameterKey is the grant of kms:Decrypt for reading the parameters of grants: the key
// is the AWS-managed aws/ssm (or one the operator chose with --key-id), whose ARN the
// stack cannot know, so the resource is the keys of the stack's account and region and the
// conditions do the scoping: only a call SSM makes for the role (kms:ViaService), and only
// to decrypt these parameters (SSM's encryption context, kms:EncryptionContext:PARAMETER_ARN).
func (b *builder) parameterKey(grants []Grant) (*[]*string, *map[string]any) {
	var arns []*string
	for _, g := range grants {
		if name := b.cfg.parameterName(g.On); name != "" {
			arns = append(arns, b.parameterARN(name))
		}
	}
	keys := b.st.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("kms"),
		Resource:     jsii.String("key"),
		ResourceName: jsii.String("*"),
		ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	return &[]*string{keys}, &map[string]any{
		"StringEquals": map[string]any{
			"kms:ViaService":                      "ssm." + *b.st.Region() + ".amazonaws.com",
			"kms:EncryptionContext:PARAMETER_ARN": arns,
		},
	}
}

// applySettings gives each Lambda the provider settings of its row of Settings that the
// configuration sets; PUBLIC_URL defaults to the API's own URL.
func (b *builder) applySettings(names []string) {
	settings := Settings()
	for _, n := range names {
		for _, s := range settings[n] {
			name, value, set := settingVar(s, b.cfg)
			if !set {
				continue
			}
			v := jsii.String(value)
			switch s {
			case PublicURL:
				v = b.publicURL()
			case SNSTopicARNs:
				v = b.snsTopicARNs()
			}
			b.fns[n].fn.AddEnvironment(jsii.String(name), v, nil)
		}
	}
}

// publicURL is where providers deliver webhooks, without a trailing slash: publicUrl, else
// the API's own URL: https://<domain> with a custom domain, else the HTTP API's endpoint (a
// token CloudFormation resolves at deploy time).
func (b *builder) publicURL() *string {
	switch {
	case b.cfg.PublicURL != "":
		return jsii.String(b.cfg.PublicURL)
	case b.cfg.Domain != "":
		return jsii.String("https://" + b.cfg.Domain)
	}
	return b.api.ApiEndpoint()
}

// resolve returns the ARNs a grant on r covers and the value of r's environment variable.
func (b *builder) resolve(r Resource, f *lambdaFn) ([]string, *string, error) {
	switch r {
	case Table:
		arn := *b.table.TableArn()
		return []string{arn, arn + "/index/*"}, b.table.TableName(), nil
	case Bus:
		return []string{*b.bus.EventBusArn()}, b.bus.EventBusName(), nil
	case CursorKey:
		return []string{*b.cursorKey.KeyArn()}, b.cursorKey.KeyId(), nil
	case SecretsKey:
		return []string{*b.secretsKey.KeyArn()}, b.secretsKey.KeyId(), nil
	case JobsQueue:
		return []string{*b.jobsQueue.QueueArn()}, b.jobsQueue.QueueUrl(), nil
	case JobsStateMachine:
		// From the machine's fixed name, not its attribute: the machine invokes the jobs
		// Lambda, and the jobs Lambda starts executions of it (a CRM sync's next run), so an
		// attribute would make the two depend on each other.
		arn := b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("states"), Resource: jsii.String("stateMachine"),
			ResourceName: jsii.String(FunctionName(b.cfg.Stage, "jobs")), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME})
		return []string{*arn}, arn, nil
	case Schedules:
		return []string{*b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("scheduler"),
			Resource: jsii.String("schedule"), ResourceName: jsii.String("default/" + sqs.ScheduleNamePrefix + "*")})}, nil, nil
	case ScheduleRole:
		return []string{*b.scheduleRole.RoleArn()}, b.scheduleRole.RoleArn(), nil
	case EmailIdentities:
		set := b.configurationSet()
		return []string{
			*b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ses"), Resource: jsii.String("identity"), ResourceName: jsii.String("*")}),
			*b.st.FormatArn(&awscdk.ArnComponents{Service: jsii.String("ses"), Resource: jsii.String("configuration-set"), ResourceName: set.ConfigurationSetName()}),
		}, set.ConfigurationSetName(), nil
	case AuditDLQ:
		return []string{*b.auditDLQ.QueueArn()}, nil, nil
	case SESAccount:
		return []string{"*"}, nil, nil
	case InboundMailBucket:
		if b.inboundBucket == nil { // AccessFor drops these grants without emailInbound
			return nil, nil, errors.New("a grant on the inbound mail bucket, but the stack receives no mail (emailInbound)")
		}
		// The bucket for s3:ListBucket, its objects for the rest: the grant's actions are
		// checked against each resource's type, so neither gives the other's.
		arn := *b.inboundBucket.BucketArn()
		return []string{arn, arn + "/*"}, b.inboundBucket.BucketName(), nil
	case WhatsAppAppSecretParameter, WhatsAppVerifyTokenParameter, SDKKeyParameter,
		CRMHubSpotClientSecretParameter, CRMSalesforceClientSecretParameter,
		AIOpenAIKeyParameter, AIAnthropicKeyParameter, AIGeminiKeyParameter, MetaAppSecretParameter, MailgunSigningKeyParameter:
		name := b.cfg.parameterName(r)
		return []string{*b.parameterARN(name)}, jsii.String(name), nil
	case OwnLogGroup:
		return []string{*f.logs.LogGroupArn()}, nil, nil
	}
	return nil, nil, fmt.Errorf("resource %d cannot be granted to a Lambda", r)
}

// snsTopicARNs is SNS_TOPIC_ARNS: the stack's own topics, then the operator's (context
// snsTopicArns), comma-separated.
func (b *builder) snsTopicARNs() *string {
	topics := []*string{b.emailEvents.TopicArn()}
	if b.inboundTopic != nil {
		topics = append(topics, b.inboundTopic.TopicArn())
	}
	if b.cfg.SNSTopicARNs != "" {
		for _, arn := range strings.Split(b.cfg.SNSTopicARNs, ",") {
			topics = append(topics, jsii.String(arn))
		}
	}
	return awscdk.Fn_Join(jsii.String(","), &topics)
}

// defineEmail declares what SES reports to: the events topic, which the configuration set's
// event destination publishes the events the platform handles to (without bounce and
// complaint handling SES puts the account under review), and, with EmailInbound, the
// inbound bucket, its topic and the receipt rule set that stores received mail there.
// subscribeEmail subscribes the API to both topics once it exists.
//
// The topics are not encrypted: SES may publish to an encrypted topic only under a customer
// managed key whose policy lets it, and SNS holds a notification only until it is delivered.
func (b *builder) defineEmail() {
	set := b.configurationSet()
	b.emailEvents = awssns.NewTopic(b.st, jsii.String("EmailEvents"), &awssns.TopicProps{
		TopicName:   jsii.String("botplatform-" + b.cfg.Stage + "-email-events"),
		DisplayName: jsii.String("botplatform " + b.cfg.Stage + " SES events"),
	})
	events := SESEventTypes()
	// CDK adds the topic policy that lets SES publish for this configuration set only
	// (aws:SourceAccount and aws:SourceArn), and makes the destination wait for it.
	awsses.NewConfigurationSetEventDestination(b.st, jsii.String("EmailEventsDestination"), &awsses.ConfigurationSetEventDestinationProps{
		ConfigurationSet:                     set,
		ConfigurationSetEventDestinationName: jsii.String("botplatform-" + b.cfg.Stage + "-email-events"),
		Destination:                          awsses.EventDestination_SnsTopic(b.emailEvents),
		Events:                               &events,
		Enabled:                              jsii.Bool(true),
	})
	if !b.cfg.EmailInbound {
		return
	}
	// Removal as the stack's other data (b.removal): destroyed with a dev stack, retained
	// in prod or with deletion protection. It holds a message only until the platform has
	// taken it (and InboundMailExpiry at most), so a retained bucket empties itself; a dev
	// stack's deletion fails on a message still there, which waiting out the expiry fixes.
	b.inboundBucket = awss3.NewBucket(b.st, jsii.String("InboundMail"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:         jsii.String("ExpireReceivedMail"),
			Enabled:    jsii.Bool(true),
			Expiration: duration(InboundMailExpiry),
		}},
		RemovalPolicy: b.removal,
	})
	// SES publishes to a topic of its own account without a grant (SES: "Giving permissions
	// to Amazon SES for email receiving" asks a policy only of another account's topic).
	b.inboundTopic = awssns.NewTopic(b.st, jsii.String("EmailInbound"), &awssns.TopicProps{
		TopicName:   jsii.String("botplatform-" + b.cfg.Stage + "-email-inbound"),
		DisplayName: jsii.String("botplatform " + b.cfg.Stage + " SES inbound mail"),
	})
	// The rule set is not made active: an account has one active rule set per region, and
	// activating this one would replace the operator's (the output says how to activate it).
	b.inboundRules = awsses.NewReceiptRuleSet(b.st, jsii.String("EmailInboundRules"), &awsses.ReceiptRuleSetProps{
		ReceiptRuleSetName: jsii.String(InboundRuleSetName(b.cfg.Stage)),
	})
	b.inboundRules.AddRule(jsii.String("StoreInbound"), &awsses.ReceiptRuleOptions{
		ReceiptRuleName: jsii.String("botplatform-" + b.cfg.Stage + "-inbound"),
		Enabled:         jsii.Bool(true),
		// SES's spam and virus verdicts: the inbound route drops a virus and flags spam.
		ScanEnabled: jsii.Bool(true),
		// Mail without TLS is accepted: senders that do not offer STARTTLS still exist, and
		// refusing them would lose their mail to the platform's domains.
		TlsPolicy: awsses.TlsPolicy_OPTIONAL,
		// No recipients: the rule takes mail to every verified domain of the account in the
		// region; the inbound route keeps what a bot's domain claims.
		// CDK's S3 action adds the bucket policy statement that lets SES put objects under
		// the prefix for this account (aws:SourceAccount), and makes the rule wait for it.
		Actions: &[]awsses.IReceiptRuleAction{awssesactions.NewS3(&awssesactions.S3Props{
			Bucket:          b.inboundBucket,
			ObjectKeyPrefix: jsii.String(InboundMailPrefix),
			Topic:           b.inboundTopic,
		})},
	})
}

// subscribeEmail subscribes the API to the email topics over HTTPS: the events topic at
// SESEventsPath, the inbound topic at SESInboundPath. The deliveries are SNS envelopes, not
// raw messages: the routes verify their signatures. The subscriptions wait for the routes
// and their Lambdas, so that SNS's confirmation request finds them.
func (b *builder) subscribeEmail() {
	subscribe := func(topic awssns.Topic, path, family string) {
		sub := topic.AddSubscription(awssnssubscriptions.NewUrlSubscription(jsii.String(*b.publicURL()+path),
			&awssnssubscriptions.UrlSubscriptionProps{
				Protocol:           awssns.SubscriptionProtocol_HTTPS,
				RawMessageDelivery: jsii.Bool(false),
			}))
		sub.Node().AddDependency(b.routeStack, b.stage, b.fns[family].fn)
	}
	subscribe(b.emailEvents, SESEventsPath, "emailevents")
	if b.inboundTopic != nil {
		subscribe(b.inboundTopic, SESInboundPath, "emaildomains")
	}
}

// configurationSet is the stack's SES configuration set, declared on first use: every email
// goes out with it, so that its event destinations (issue 10: bounces, complaints) see all.
func (b *builder) configurationSet() awsses.ConfigurationSet {
	if b.sesSet == nil {
		b.sesSet = awsses.NewConfigurationSet(b.st, jsii.String("EmailConfigurationSet"), &awsses.ConfigurationSetProps{
			ConfigurationSetName: jsii.String("botplatform-" + b.cfg.Stage),
		})
	}
	return b.sesSet
}

// accessLogFormat is one JSON line per request. It holds no header, so never a credential,
// and no path, only the route's pattern: some paths carry a bearer capability (a sent
// email's unsubscribe and tracking tokens, a broadcast's link token), which the stage-wide
// format cannot tell apart. A request's path is in its family's request log, which shows
// those routes by their pattern (httpapi.Access.SecretPath).
func accessLogFormat() string {
	return `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",` +
		`"time":"$context.requestTime","method":"$context.httpMethod","routeKey":"$context.routeKey",` +
		`"status":"$context.status","protocol":"$context.protocol",` +
		`"responseLength":"$context.responseLength","latency":"$context.responseLatency",` +
		`"integrationStatus":"$context.integration.status","integrationLatency":"$context.integration.latency",` +
		`"integrationError":"$context.integrationErrorMessage","authorizerError":"$context.authorizer.error"}`
}

// defineAPI declares the HTTP API: one route per operation, integrated with its family's
// Lambda, the shared authorizer on every route that is not public.
func (b *builder) defineAPI(routes []Route) {
	b.api = awsapigatewayv2.NewHttpApi(b.st, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String("botplatform-" + b.cfg.Stage),
		Description:        jsii.String("Bot platform token API (" + b.cfg.Stage + ")"),
		CreateDefaultStage: jsii.Bool(false),
	})
	var mapping *awsapigatewayv2.DomainMappingOptions
	if b.cfg.Domain != "" {
		b.domain = awsapigatewayv2.NewDomainName(b.st, jsii.String("ApiDomain"), &awsapigatewayv2.DomainNameProps{
			DomainName: jsii.String(b.cfg.Domain),
			Certificate: awscertificatemanager.Certificate_FromCertificateArn(b.st,
				jsii.String("ApiCertificate"), jsii.String(b.cfg.CertificateArn)),
			SecurityPolicy: awsapigatewayv2.SecurityPolicy_TLS_1_2,
		})
		mapping = &awsapigatewayv2.DomainMappingOptions{DomainName: b.domain}
	}
	b.stage = awsapigatewayv2.NewHttpStage(b.st, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    b.api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(b.cfg.ThrottleRateLimit),
			BurstLimit: jsii.Number(b.cfg.ThrottleBurstLimit),
		},
		DomainMapping: mapping,
	})
	// The L1 property: the L2 takes an interface with a Format of the REST API module.
	b.stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: b.logGroup("ApiAccessLogs").LogGroupArn(),
		Format:         jsii.String(accessLogFormat()),
	})

	authorizer := awsapigatewayv2authorizers.NewHttpLambdaAuthorizer(jsii.String("Authorizer"), b.fns[Authorizer].fn,
		&awsapigatewayv2authorizers.HttpLambdaAuthorizerProps{
			AuthorizerName:  jsii.String("botplatform-" + b.cfg.Stage),
			ResponseTypes:   &[]awsapigatewayv2authorizers.HttpLambdaResponseType{awsapigatewayv2authorizers.HttpLambdaResponseType_SIMPLE},
			IdentitySource:  jsii.Strings("$request.header.Authorization"),
			ResultsCacheTtl: duration(AuthorizerCacheTTL),
		})
	// The routes live in a nested stack of their own: one resource each, they would take the
	// parent past CloudFormation's 500 resources as families are added. The route constructs
	// bind each family's integration and its one invoke permission there too; the API, its
	// authorizer and the functions stay in the parent and reach the nested stack as
	// parameters (about 30, of CloudFormation's 200).
	routeStack := awscdk.NewNestedStack(b.st, jsii.String("Routes"), &awscdk.NestedStackProps{
		Description: jsii.String("Bot platform token API routes (" + b.cfg.Stage + ")"),
	})
	b.routeStack = routeStack
	integrations := map[string]awsapigatewayv2.HttpRouteIntegration{}
	for _, r := range routes {
		in, ok := integrations[r.Family]
		if !ok {
			in = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(constructID(r.Family)+"Integration"),
				b.fns[r.Family].fn, &awsapigatewayv2integrations.HttpLambdaIntegrationProps{
					PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
					// One invoke permission per function for the whole API, not one per
					// route: 160 per-route permissions took the stack past CloudFormation's
					// 500 resources. The routes stay the access boundary (each names its
					// Lambda); the permission only lets this API invoke the function.
					ScopePermissionToRoute: jsii.Bool(false),
				})
			integrations[r.Family] = in
		}
		var auth awsapigatewayv2.IHttpRouteAuthorizer = authorizer
		if r.Public {
			auth = awsapigatewayv2.NewHttpNoneAuthorizer()
		}
		// The id is the route key, so a route keeps its logical id as long as it exists.
		id := strings.NewReplacer("/", "_", "{", "", "}", "").Replace(r.Key())
		awsapigatewayv2.NewHttpRoute(routeStack, jsii.String(id), &awsapigatewayv2.HttpRouteProps{
			HttpApi:     b.api,
			RouteKey:    awsapigatewayv2.HttpRouteKey_With(jsii.String(r.Path), awsapigatewayv2.HttpMethod(r.Method)),
			Integration: in,
			Authorizer:  auth,
		})
	}
}

// defineAlarms sends every alarm to one topic (and AlarmEmail): API 5xx, each Lambda's
// errors and throttles, dead-letter depths, failed and timed-out jobs.
func (b *builder) defineAlarms(names []string) {
	topic := awssns.NewTopic(b.st, jsii.String("Alarms"), &awssns.TopicProps{
		DisplayName: jsii.String("botplatform " + b.cfg.Stage + " alarms"),
	})
	if b.cfg.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(b.cfg.AlarmEmail), nil))
	}
	action := awscloudwatchactions.NewSnsAction(topic)
	fiveMinutes := func(statistic string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: duration(5 * time.Minute), Statistic: jsii.String(statistic)}
	}
	alarm := func(id, description string, metric awscloudwatch.IMetric, threshold float64) {
		a := awscloudwatch.NewAlarm(b.st, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String("botplatform-" + b.cfg.Stage + "-" + id),
			AlarmDescription:   jsii.String(description),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	alarm("Api5xx", "The API answered more 5xx than the threshold in 5 minutes",
		b.api.MetricServerError(fiveMinutes("Sum")), b.cfg.Alarm5xxThreshold)
	for _, n := range names {
		fn := b.fns[n].fn
		alarm(constructID(n)+"Errors", "Lambda "+n+" failed invocations", fn.MetricErrors(fiveMinutes("Sum")), 0)
		alarm(constructID(n)+"Throttles", "Lambda "+n+" was throttled", fn.MetricThrottles(fiveMinutes("Sum")), 0)
	}
	alarm("JobsDLQDepth", "Jobs were dead-lettered after "+fmt.Sprint(MaxReceiveCount)+" receives",
		b.jobsDLQ.MetricApproximateNumberOfMessagesVisible(fiveMinutes("Maximum")), 0)
	alarm("AuditDLQDepth", "Audit events could not be stored (EventBridge delivery or the sink failed)",
		b.auditDLQ.MetricApproximateNumberOfMessagesVisible(fiveMinutes("Maximum")), 0)
	alarm("JobsFailed", "Job executions failed", b.machine.MetricFailed(fiveMinutes("Sum")), 0)
	alarm("JobsTimedOut", "Job executions timed out", b.machine.MetricTimedOut(fiveMinutes("Sum")), 0)
}

func (b *builder) defineOutputs() {
	out := func(id, description string, value *string) {
		awscdk.NewCfnOutput(b.st, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(description)})
	}
	url := b.stage.Url()
	if b.domain != nil {
		url = jsii.String("https://" + b.cfg.Domain + "/")
		out("ApiDomainTarget", "Point the custom domain's DNS (CNAME or alias) here", b.domain.RegionalDomainName())
		out("ApiDefaultUrl", "The API's execute-api URL", b.stage.Url())
	}
	out("ApiUrl", "The API's base URL", url)
	out("WhatsAppWebhookUrl", "The callback URL to set in the Meta app's WhatsApp webhook configuration",
		jsii.String(*b.publicURL()+channels.WebhookPath(channel.WhatsApp, "")))
	out("TableName", "The DynamoDB table", b.table.TableName())
	out("BusName", "The audit event bus", b.bus.EventBusName())
	out("EmailEventsTopicArn", "The SNS topic of the SES events of the configuration set", b.emailEvents.TopicArn())
	if b.inboundRules != nil {
		name := InboundRuleSetName(b.cfg.Stage)
		out("EmailInboundRuleSet", "The SES receipt rule set of inbound mail, not active: activate it with EmailInboundActivation "+
			"(it replaces the account's active rule set in the region)", b.inboundRules.ReceiptRuleSetName())
		out("EmailInboundActivation", "The command that makes the rule set "+name+" the active one",
			jsii.String("aws ses set-active-receipt-rule-set --rule-set-name "+name+" --region "+*b.st.Region()))
	}
}

// retentions maps the retention periods CloudWatch Logs accepts, in days, to CDK's names.
func retentions() map[int]awslogs.RetentionDays {
	return map[int]awslogs.RetentionDays{
		1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS,
		5: awslogs.RetentionDays_FIVE_DAYS, 7: awslogs.RetentionDays_ONE_WEEK,
		14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
		60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS,
		120: awslogs.RetentionDays_FOUR_MONTHS, 150: awslogs.RetentionDays_FIVE_MONTHS,
		180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
		400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS,
		731: awslogs.RetentionDays_TWO_YEARS, 1096: awslogs.RetentionDays_THREE_YEARS,
		1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
		2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS,
		3288: awslogs.RetentionDays_NINE_YEARS, 3653: awslogs.RetentionDays_TEN_YEARS,
	}
}
