package family_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
)

func TestNewEnvRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	_, err := family.NewEnv(family.Deps{CursorKey: make([]byte, 8)})
	require.Error(t, err)
	for _, want := range []string{"Store", "Audit", "CursorKey", "Log", "Now", "Tenancy", "Events"} {
		assert.Contains(t, err.Error(), want)
	}
}

// A family's parts are built once per Env however many of them the family has, and its job
// kinds become what the Env's job starter knows.
func TestComposeBuildsOnce(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{})
	builds := 0
	f := family.Family{Name: "x", Build: func(*family.Env) family.Parts {
		builds++
		return family.Parts{
			Routes: func(*httpapi.Mux) {},
			Jobs: map[string]jobs.Step{"x.job": func(context.Context, json.RawMessage, string) (string, bool, error) {
				return "", true, nil
			}},
		}
	}}
	c := family.Compose(env, f)
	_, err := c.Mux(func(r *http.Request) (*auth.Principal, error) { return nil, auth.ErrMissingCredentials })
	require.NoError(t, err)
	assert.Equal(t, 1, builds)
	assert.Equal(t, []string{"x.job"}, c.Registry().Kinds())
	_, err = c.QueueMux()
	assert.Error(t, err, "no queue: no job can run")
	assert.Nil(t, env.Jobs, "no queue: no job can start")
}

// LongJobs is the starter Deps builds (the state machine's on AWS), told which kinds the
// composed families registered; without one it is the queue runner, and without a queue nil.
func TestLongJobs(t *testing.T) {
	t.Parallel()
	var known func(string) bool
	starter := recordingStarter{}
	env := familytest.Env(t, family.Deps{LongJobs: func(k func(string) bool) jobs.Starter { known = k; return starter }})
	family.Compose(env, family.Family{Name: "x", Build: func(*family.Env) family.Parts {
		return family.Parts{Jobs: map[string]jobs.Step{"x.sync": func(context.Context, json.RawMessage, string) (string, bool, error) {
			return "", true, nil
		}}}
	}})
	assert.Equal(t, starter, env.LongJobs)
	require.NotNil(t, known)
	assert.True(t, known("x.sync"), "a kind composed after the Env was built")
	assert.False(t, known("x.typo"))

	assert.Nil(t, familytest.Env(t, family.Deps{}).LongJobs, "no queue, no state machine: nothing starts")
}

type recordingStarter struct{}

func (recordingStarter) Start(context.Context, string, any) error { return nil }

// The managed AI keys the platform hands over (from SSM on AWS) are the Env's own copy: no
// field of Env changes after NewEnv.
func TestEnvAIKeysAreACopy(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"openai": "sk-managed"}
	env := familytest.Env(t, family.Deps{AIKeys: keys})
	keys["openai"] = "changed"
	assert.Equal(t, map[string]string{"openai": "sk-managed"}, env.AIKeys)
	assert.Nil(t, familytest.Env(t, family.Deps{}).AIKeys, "none handed over: nil")
}
