package stack_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/botplatform/api/infra/stack"
)

// topic returns the logical id of the SNS topic called name.
func (s *synthesized) topic(t *testing.T, name string) string {
	t.Helper()
	id, _ := s.only(t, "AWS::SNS::Topic", func(r resource) bool { return r.Properties["TopicName"] == name })
	return id
}

// subscriptions returns the subscriptions of the topic topicID.
func (s *synthesized) subscriptions(topicID string) []resource {
	var out []resource
	for _, r := range s.ofType("AWS::SNS::Subscription") {
		if slices.Equal(refs(r.Properties["TopicArn"]), []string{topicID}) {
			out = append(out, r)
		}
	}
	return out
}

// checkHTTPSSubscription holds the topic to one subscription: HTTPS to endpoint, delivering
// SNS envelopes (the routes verify their signatures; a raw message has none).
func checkHTTPSSubscription(t *testing.T, s *synthesized, topicID, endpoint string) {
	t.Helper()
	subs := s.subscriptions(topicID)
	if len(subs) != 1 {
		t.Fatalf("topic %s has %d subscriptions, want 1", topicID, len(subs))
	}
	p := subs[0].Properties
	if p["Protocol"] != "https" || render(p["Endpoint"]) != endpoint {
		t.Errorf("topic %s: subscription %v %s, want https %s", topicID, p["Protocol"], render(p["Endpoint"]), endpoint)
	}
	if p["RawMessageDelivery"] == true {
		t.Errorf("topic %s: raw message delivery: the route needs the signed envelope", topicID)
	}
}

// sourceAccount reports whether the condition has aws:SourceAccount (keys are
// case-insensitive) equal to the stack's account.
func sourceAccount(cond any) bool {
	c, _ := cond.(map[string]any)
	eq, _ := c["StringEquals"].(map[string]any)
	for k, v := range eq {
		if strings.EqualFold(k, "aws:SourceAccount") && render(v) == "${AWS::AccountId}" {
			return true
		}
	}
	return false
}

// sesPrincipal reports whether the statement's principal is SES, and no one else.
func sesPrincipal(st map[string]any) bool {
	p, _ := st["Principal"].(map[string]any)
	return len(p) == 1 && p["Service"] == "ses.amazonaws.com"
}

// The SES events, always: the configuration set publishes the events the platform handles to
// the events topic, which only SES may publish to, for this account, and which delivers
// them to the webhook at the public URL.
func TestEmailEvents(t *testing.T) {
	apiID, _ := dev.only(t, "AWS::ApiGatewayV2::Api", nil)
	for _, tt := range []struct {
		name     string
		s        *synthesized
		endpoint string
	}{
		// The API's own URL without publicUrl or domain, resolved at deploy time.
		{"default", dev, "${" + apiID + ".ApiEndpoint}/esp/ses/webhook"},
		{"providers", withProviders, "https://hooks.example.com/bots/esp/ses/webhook"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s
			topicID := s.topic(t, "botplatform-"+s.stack.Config.Stage+"-email-events")
			setID, _ := s.only(t, "AWS::SES::ConfigurationSet", nil)

			_, dest := s.only(t, "AWS::SES::ConfigurationSetEventDestination", nil)
			if got := refs(dest.Properties["ConfigurationSetName"]); !slices.Equal(got, []string{setID}) {
				t.Errorf("event destination of %v, want the stack's configuration set", got)
			}
			ed, _ := dest.Properties["EventDestination"].(map[string]any)
			// Those functions/emailevents applies (sesEvent): a change there changes this.
			var types []string
			for _, e := range ed["MatchingEventTypes"].([]any) {
				types = append(types, e.(string))
			}
			if slices.Sort(types); !slices.Equal(types, []string{"bounce", "complaint", "delivery"}) {
				t.Errorf("event types %v, want bounce, complaint, delivery", types)
			}
			sns, _ := ed["SnsDestination"].(map[string]any)
			if ed["Enabled"] != true || !slices.Equal(refs(sns["TopicARN"]), []string{topicID}) {
				t.Errorf("event destination %v, want enabled, to the events topic", ed)
			}

			// The topic policy: SES may publish, for the stack's account and its
			// configuration set; no one else gets anything.
			_, pol := s.only(t, "AWS::SNS::TopicPolicy", func(r resource) bool {
				return slices.Equal(refs(r.Properties["Topics"]), []string{topicID})
			})
			sts := statements(pol.Properties["PolicyDocument"])
			if len(sts) != 1 {
				t.Fatalf("events topic policy %v, want one statement", sts)
			}
			st := sts[0]
			acts, _ := actions(st)
			cond, _ := st["Condition"].(map[string]any)
			eq, _ := cond["StringEquals"].(map[string]any)
			if st["Effect"] != "Allow" || !sesPrincipal(st) || !slices.Equal(acts, []string{"sns:Publish"}) ||
				!slices.Equal(refs(st["Resource"]), []string{topicID}) || !sourceAccount(cond) ||
				!strings.HasSuffix(render(eq["AWS:SourceArn"]), ":configuration-set/${"+setID+"}") {
				t.Errorf("events topic policy statement %v", st)
			}

			checkHTTPSSubscription(t, s, topicID, tt.endpoint)
			if got := render(s.outputs["EmailEventsTopicArn"].(map[string]any)["Value"]); got != "${"+topicID+"}" {
				t.Errorf("output EmailEventsTopicArn %s", got)
			}
		})
	}
}

// SNS_TOPIC_ARNS is the stack's topics, then the operator's (snsTopicArns).
func TestSNSTopicARNs(t *testing.T) {
	events := "${" + dev.topic(t, "botplatform-dev-email-events") + "}"
	pevents := "${" + withProviders.topic(t, "botplatform-staging-email-events") + "}"
	inbound := "${" + withProviders.topic(t, "botplatform-staging-email-inbound") + "}"
	for _, name := range []string{"emailevents", "emaildomains"} {
		if got := render(dev.env(t, name)["SNS_TOPIC_ARNS"]); got != events {
			t.Errorf("default: %s: SNS_TOPIC_ARNS %s, want %s", name, got, events)
		}
		if got, want := render(withProviders.env(t, name)["SNS_TOPIC_ARNS"]), pevents+","+inbound+","+operatorTopic; got != want {
			t.Errorf("providers: %s: SNS_TOPIC_ARNS %s, want %s", name, got, want)
		}
	}
}

// Inbound mail on (withProviders): SES stores each message under inbound/ in a private,
// encrypted bucket that expires what the platform did not take, and notifies the inbound
// topic, which delivers to the SES inbound route; the emaildomains Lambda alone may read
// and delete the objects. The rule set is left inactive, with the command in the outputs.
func TestEmailInbound(t *testing.T) {
	s := withProviders
	bucketID, bucket := s.only(t, "AWS::S3::Bucket", nil)
	topicID := s.topic(t, "botplatform-staging-email-inbound")
	check(t, "bucket", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
			"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{
				map[string]any{"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "AES256"}},
			}},
			"PublicAccessBlockConfiguration": map[string]any{
				"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true,
			},
			"LifecycleConfiguration": map[string]any{"Rules": []any{
				map[string]any{"Id": "ExpireReceivedMail", "Status": "Enabled", "ExpirationInDays": 3},
			}},
		})
	})
	if bucket.DeletionPolicy != "Delete" {
		t.Errorf("a staging stack's bucket has deletion policy %q, want Delete (as its other data)", bucket.DeletionPolicy)
	}

	// The bucket policy: TLS only, and SES may put objects under inbound/ for this account.
	_, pol := s.only(t, "AWS::S3::BucketPolicy", nil)
	if got := refs(pol.Properties["Bucket"]); !slices.Equal(got, []string{bucketID}) {
		t.Errorf("bucket policy on %v", got)
	}
	var put, tls bool
	for _, st := range statements(pol.Properties["PolicyDocument"]) {
		acts, _ := actions(st)
		switch {
		case st["Effect"] == "Deny" && slices.Equal(acts, []string{"s3:*"}):
			c, _ := st["Condition"].(map[string]any)
			b, _ := c["Bool"].(map[string]any)
			tls = b["aws:SecureTransport"] == "false"
		case st["Effect"] == "Allow" && sesPrincipal(st) && slices.Equal(acts, []string{"s3:PutObject"}) &&
			render(st["Resource"]) == "${"+bucketID+".Arn}/inbound/*" && sourceAccount(st["Condition"]):
			put = true
		default:
			t.Errorf("bucket policy statement %v", st)
		}
	}
	if !put || !tls {
		t.Errorf("bucket policy: SES put %v, TLS only %v", put, tls)
	}

	// One rule set, one rule, one action.
	setID, set := s.only(t, "AWS::SES::ReceiptRuleSet", nil)
	if set.Properties["RuleSetName"] != "botplatform-staging" {
		t.Errorf("rule set %v", set.Properties)
	}
	_, rr := s.only(t, "AWS::SES::ReceiptRule", nil)
	if got := refs(rr.Properties["RuleSetName"]); !slices.Equal(got, []string{setID}) {
		t.Errorf("receipt rule in %v", got)
	}
	rule, _ := rr.Properties["Rule"].(map[string]any)
	// TLS optional: senders without TLS exist. No recipients: every verified domain.
	if rule["Enabled"] != true || rule["ScanEnabled"] != true || rule["TlsPolicy"] != "Optional" || rule["Recipients"] != nil {
		t.Errorf("receipt rule %v", rule)
	}
	acts, _ := rule["Actions"].([]any)
	if len(acts) != 1 {
		t.Fatalf("receipt rule actions %v, want one S3 action", acts)
	}
	a, _ := acts[0].(map[string]any)["S3Action"].(map[string]any)
	if len(acts[0].(map[string]any)) != 1 || a == nil || !slices.Equal(refs(a["BucketName"]), []string{bucketID}) ||
		a["ObjectKeyPrefix"] != "inbound/" || !slices.Equal(refs(a["TopicArn"]), []string{topicID}) || a["KmsKeyArn"] != nil {
		t.Errorf("receipt rule action %v", acts[0])
	}
	// The stack activates nothing (no custom resource calls SES).
	for id, r := range s.res {
		if strings.HasPrefix(r.Type, "Custom::") || r.Type == "AWS::CloudFormation::CustomResource" {
			t.Errorf("custom resource %s (%s)", id, r.Type)
		}
	}
	if got := render(s.outputs["EmailInboundRuleSet"].(map[string]any)["Value"]); got != "${"+setID+"}" {
		t.Errorf("output EmailInboundRuleSet %s", got)
	}
	if got := render(s.outputs["EmailInboundActivation"].(map[string]any)["Value"]); got !=
		"aws ses set-active-receipt-rule-set --rule-set-name botplatform-staging --region ${AWS::Region}" {
		t.Errorf("output EmailInboundActivation %s", got)
	}

	checkHTTPSSubscription(t, s, topicID, "https://hooks.example.com/bots/esp/ses/inbound")

	// The emaildomains Lambda: the bucket's name, and its grant on the bucket and objects.
	if got := render(s.env(t, "emaildomains")["INBOUND_MAIL_BUCKET"]); got != "${"+bucketID+"}" {
		t.Errorf("INBOUND_MAIL_BUCKET %s", got)
	}
	var s3 []map[string]any
	for _, st := range s.policyOf(t, "emaildomains") {
		if acts, _ := actions(st); strings.HasPrefix(acts[0], "s3:") {
			s3 = append(s3, st)
		}
	}
	if len(s3) != 1 {
		t.Fatalf("emaildomains: s3 statements %v, want one", s3)
	}
	got, _ := actions(s3[0])
	for _, want := range []string{"s3:GetObject", "s3:DeleteObject"} {
		if !slices.Contains(got, want) {
			t.Errorf("emaildomains: s3 actions %v, want %s", got, want)
		}
	}
	for _, a := range got {
		if !slices.Contains([]string{"s3:GetObject", "s3:DeleteObject", "s3:ListBucket"}, a) {
			t.Errorf("emaildomains: s3 action %s: it reads and deletes the objects, no more", a)
		}
	}
	if r := render(s3[0]["Resource"]); r != "${"+bucketID+".Arn}+${"+bucketID+".Arn}/*" {
		t.Errorf("emaildomains: s3 statement on %s, want the bucket and its objects", r)
	}
	// No other Lambda touches the bucket.
	for name := range s.functions(t) {
		if name == "emaildomains" {
			continue
		}
		for _, st := range s.policyOf(t, name) {
			if acts, _ := actions(st); strings.HasPrefix(acts[0], "s3:") {
				t.Errorf("%s: %v", name, st)
			}
		}
	}
}

// Inbound mail off (the default): no bucket, inbound topic or rule set, and the emaildomains
// Lambda has neither the bucket's variable nor a grant on S3.
func TestEmailInboundOff(t *testing.T) {
	s := dev
	check(t, "no inbound resources", func() {
		for _, typ := range []string{"AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::SES::ReceiptRuleSet", "AWS::SES::ReceiptRule"} {
			s.tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(0))
		}
		s.tmpl.ResourcePropertiesCountIs(jsii.String("AWS::SNS::Topic"), map[string]any{"TopicName": "botplatform-dev-email-inbound"}, jsii.Number(0))
		s.tmpl.ResourcePropertiesCountIs(jsii.String("AWS::SNS::Subscription"), map[string]any{"Protocol": "https"}, jsii.Number(1))
	})
	if _, ok := s.env(t, "emaildomains")["INBOUND_MAIL_BUCKET"]; ok {
		t.Error("emaildomains has INBOUND_MAIL_BUCKET without inbound mail")
	}
	for name := range s.functions(t) {
		for _, st := range s.policyOf(t, name) {
			if acts, _ := actions(st); strings.HasPrefix(acts[0], "s3:") {
				t.Errorf("%s: %v without inbound mail", name, st)
			}
		}
	}
	for _, out := range []string{"EmailInboundRuleSet", "EmailInboundActivation"} {
		if s.outputs[out] != nil {
			t.Errorf("output %s without inbound mail", out)
		}
	}
	if g := stack.AccessFor("emaildomains", s.stack.Config); slices.ContainsFunc(g, func(g stack.Grant) bool { return g.On == stack.InboundMailBucket }) {
		t.Error("AccessFor keeps the grant on the inbound bucket without inbound mail")
	}
}
