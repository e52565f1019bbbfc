package family_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

func tool(name string) mcptool.Tool {
	return mcptool.New(name, "A tool.", httpapi.Need("things:read"), func(context.Context, struct{}) (any, error) { return nil, nil })
}

// The Env holds the tools of every family composed on it, in order, and a family's routes
// (registered once all are built) see all of them: that is how the MCP endpoint serves the
// tools of the families composed beside it.
func TestComposeCollectsTools(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{})
	var seen []string
	endpoint := family.Family{Name: "endpoint", Build: func(env *family.Env) family.Parts {
		return family.Parts{Routes: func(*httpapi.Mux) {
			for _, t := range env.Tools() {
				seen = append(seen, t.Name)
			}
		}}
	}}
	a := family.Family{Name: "a", Build: func(*family.Env) family.Parts {
		return family.Parts{Tools: []mcptool.Tool{tool("list_a"), tool("get_a")}}
	}}
	b := family.Family{Name: "b", Build: func(*family.Env) family.Parts {
		return family.Parts{Tools: []mcptool.Tool{tool("get_b")}}
	}}
	_, err := family.Compose(env, endpoint, a, b).Mux(func(*http.Request) (*auth.Principal, error) { return nil, auth.ErrMissingCredentials })
	require.NoError(t, err)
	assert.Equal(t, []string{"list_a", "get_a", "get_b"}, seen, "the endpoint, composed first, still sees every tool")
}

func TestComposeRefusesAToolDeclaredTwice(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{})
	a := family.Family{Name: "a", Build: func(*family.Env) family.Parts { return family.Parts{Tools: []mcptool.Tool{tool("get_x")}} }}
	b := family.Family{Name: "b", Build: func(*family.Env) family.Parts { return family.Parts{Tools: []mcptool.Tool{tool("get_x")}} }}
	assert.PanicsWithValue(t, "family: MCP tool declared twice: get_x (again by b)", func() { family.Compose(env, a, b) })
}
