package stack_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/infra/stack"
)

// The outbox's relay on AWS (docs/outbox.md): an EventBridge Scheduler schedule invokes the
// jobs Lambda every minute with the event platform.JobsHandler recognizes, without retries
// of its own (the next minute is the retry), through a role that only Scheduler acting for
// this account may assume and that may invoke the jobs Lambda and nothing else (its policy
// is the Access row, which TestRolesMatchAccessTable holds it to).
func TestOutboxSweepSchedule(t *testing.T) {
	_, sched := dev.only(t, "AWS::Scheduler::Schedule", nil)
	p := sched.Properties
	if p["ScheduleExpression"] != "rate(1 minute)" || p["State"] != "ENABLED" {
		t.Errorf("schedule %v, want rate(1 minute), enabled", p)
	}
	if w, _ := p["FlexibleTimeWindow"].(map[string]any); w["Mode"] != "OFF" {
		t.Errorf("flexible time window %v, want OFF: a sweep a minute, on time", p["FlexibleTimeWindow"])
	}
	target := p["Target"].(map[string]any)
	if ref(t, target["Arn"]) != dev.functions(t)[stack.Jobs] {
		t.Errorf("the schedule invokes %v, want the jobs Lambda", target["Arn"])
	}
	sample, err := os.ReadFile(filepath.Join("..", "..", "events", "samples", "scheduler-outbox-sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want, fromSample any
	if err := json.Unmarshal([]byte(target["Input"].(string)), &got); err != nil {
		t.Fatalf("input %v: %v", target["Input"], err)
	}
	json.Unmarshal([]byte(platform.OutboxSweepEvent), &want)
	json.Unmarshal(sample, &fromSample)
	if !jsonEqual(got, want) || !jsonEqual(got, fromSample) {
		t.Errorf("the schedule sends %v, want %s (the sample the handler's tests read)", got, platform.OutboxSweepEvent)
	}
	retry, _ := target["RetryPolicy"].(map[string]any)
	if retry["MaximumRetryAttempts"] != float64(0) || retry["MaximumEventAgeInSeconds"] != float64(60) {
		t.Errorf("retry policy %v, want none: the next minute's sweep is the retry", retry)
	}
	if target["DeadLetterConfig"] != nil {
		t.Errorf("a dead-letter queue for sweeps nobody needs: %v", target["DeadLetterConfig"])
	}

	roleID := ref(t, target["RoleArn"])
	role := dev.res[roleID]
	trust := statements(role.Properties["AssumeRolePolicyDocument"])
	if len(trust) != 1 {
		t.Fatalf("trust policy %v", trust)
	}
	principal, _ := trust[0]["Principal"].(map[string]any)
	cond, _ := trust[0]["Condition"].(map[string]any)
	equals, _ := cond["StringEquals"].(map[string]any)
	if principal["Service"] != "scheduler.amazonaws.com" || trust[0]["Action"] != "sts:AssumeRole" ||
		render(equals["aws:SourceAccount"]) != "${AWS::AccountId}" {
		t.Errorf("trust policy %v, want Scheduler acting for this account only", trust[0])
	}
	for id, r := range dev.ofType("AWS::Lambda::Function") {
		if id != dev.functions(t)[stack.Jobs] && slices.Contains(refs(r.Properties), roleID) {
			t.Errorf("the schedule's role is also %s's", id)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The outbox needs nothing new of the Lambdas that write it: the bots and subscribers
// Lambdas put and delete outbox items (PutItem in their transactions, DeleteItem after the
// send) and send (SendMessage); the jobs Lambda sweeps (Query on the shards, DeleteItem,
// SendMessage).
func TestAccessAllowsTheOutbox(t *testing.T) {
	t.Parallel()
	need := map[string]map[stack.Resource][]string{
		"bots":        {stack.Table: {"dynamodb:PutItem", "dynamodb:DeleteItem"}, stack.JobsQueue: {"sqs:SendMessage"}},
		"subscribers": {stack.Table: {"dynamodb:PutItem", "dynamodb:DeleteItem"}, stack.JobsQueue: {"sqs:SendMessage"}},
		"jobs":        {stack.Table: {"dynamodb:Query", "dynamodb:DeleteItem"}, stack.JobsQueue: {"sqs:SendMessage"}},
	}
	access := stack.Access()
	for lambda, grants := range need {
		for res, actions := range grants {
			var have []string
			for _, g := range access[lambda] {
				if g.On == res {
					have = append(have, g.Actions...)
				}
			}
			for _, a := range actions {
				if !slices.Contains(have, a) {
					t.Errorf("%s lacks %s for the outbox", lambda, a)
				}
			}
		}
	}
}

// Long waits: the role their one-time schedules run with may be assumed by Scheduler acting
// for this account only (its policy, sqs:SendMessage on the jobs queue, is the Access row,
// which TestRolesMatchAccessTable holds it to), and the jobs Lambda, which creates them,
// learns its ARN.
func TestQueueScheduleRole(t *testing.T) {
	var roleID string
	for id := range dev.ofType("AWS::IAM::Role") {
		if strings.HasPrefix(id, "QueueScheduleRole") {
			roleID = id
		}
	}
	if roleID == "" {
		t.Fatal("no role for the schedules of long waits")
	}
	trust := statements(dev.res[roleID].Properties["AssumeRolePolicyDocument"])
	if len(trust) != 1 {
		t.Fatalf("trust policy %v", trust)
	}
	principal, _ := trust[0]["Principal"].(map[string]any)
	cond, _ := trust[0]["Condition"].(map[string]any)
	equals, _ := cond["StringEquals"].(map[string]any)
	if principal["Service"] != "scheduler.amazonaws.com" || render(equals["aws:SourceAccount"]) != "${AWS::AccountId}" {
		t.Errorf("trust policy %v, want Scheduler acting for this account only", trust[0])
	}
	env := dev.res[dev.functions(t)[stack.Jobs]].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	if ref(t, env[stack.EnvSchedulerRoleARN]) != roleID {
		t.Errorf("the jobs Lambda's %s is %v, want the role's ARN", stack.EnvSchedulerRoleARN, env[stack.EnvSchedulerRoleARN])
	}
}
