package auth

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScopesAllows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		held     Scopes
		required Scope
		want     bool
	}{
		{"exact", Scopes{"bots:read"}, "bots:read", true},
		{"other action", Scopes{"bots:read"}, "bots:write", false},
		{"write does not imply read", Scopes{"bots:write"}, "bots:read", false},
		{"other resource", Scopes{"bots:read"}, "crm:read", false},
		{"resource wildcard", Scopes{"bots:*"}, "bots:write", true},
		{"resource wildcard on itself", Scopes{"bots:*"}, "bots:*", true},
		{"resource wildcard is not full", Scopes{"bots:*"}, Full, false},
		{"resource wildcard is not a prefix match", Scopes{"bots:*"}, "botsx:read", false},
		{"resource wildcard of another resource", Scopes{"bots:*"}, "crm:read", false},
		{"multi-colon exact", Scopes{"managed_ai:usage:read"}, "managed_ai:usage:read", true},
		{"multi-colon under resource wildcard", Scopes{"managed_ai:*"}, "managed_ai:usage:read", true},
		{"multi-colon other action", Scopes{"managed_ai:invoke"}, "managed_ai:usage:read", false},
		{"full allows anything", Scopes{Full}, "crm:write", true},
		{"full allows full", Scopes{Full}, Full, true},
		{"full allows multi-colon", Scopes{Full}, "managed_ai:usage:read", true},
		{"exact is not full", Scopes{"bots:read", "bots:write"}, Full, false},
		{"any of several", Scopes{"crm:read", "bots:write"}, "bots:write", true},
		{"none held", nil, "bots:read", false},
		{"empty requirement is never granted by a scope", Scopes{"bots:*"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.held.Allows(tt.required))
		})
	}
}

func TestScopesCovers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		held Scopes
		want Scopes
		ok   bool
	}{
		{"same", Scopes{"bots:read"}, Scopes{"bots:read"}, true},
		{"subset", Scopes{"bots:read", "bots:write"}, Scopes{"bots:write"}, true},
		{"superset", Scopes{"bots:read"}, Scopes{"bots:read", "bots:write"}, false},
		{"wildcard covers its actions", Scopes{"bots:*"}, Scopes{"bots:read", "bots:write"}, true},
		{"wildcard covers itself", Scopes{"bots:*"}, Scopes{"bots:*"}, true},
		{"wildcard cannot mint full", Scopes{"bots:*"}, Scopes{Full}, false},
		{"wildcard cannot mint another resource", Scopes{"bots:*"}, Scopes{"crm:read"}, false},
		{"wildcard cannot mint another wildcard", Scopes{"bots:*"}, Scopes{"crm:*"}, false},
		{"actions do not add up to the wildcard", Scopes{"bots:read", "bots:write"}, Scopes{"bots:*"}, false},
		{"multi-colon under wildcard", Scopes{"managed_ai:*"}, Scopes{"managed_ai:usage:read"}, true},
		{"full mints anything", Scopes{Full}, Scopes{Full, "bots:*", "crm:read", "managed_ai:usage:read"}, true},
		{"full mints full", Scopes{Full}, Scopes{Full}, true},
		{"nothing wanted", Scopes{"bots:read"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.ok, tt.held.Covers(tt.want))
		})
	}
}

func TestValidateScopes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      []string
		want    Scopes
		wantErr string
	}{
		{"one", []string{"bots:read"}, Scopes{"bots:read"}, ""},
		{"sorted", []string{"crm:read", "bots:write", "audit:read"}, Scopes{"audit:read", "bots:write", "crm:read"}, ""},
		{"full", []string{"*"}, Scopes{"*"}, ""},
		{"known wildcard", []string{"bots:*"}, Scopes{"bots:*"}, ""},
		{"multi-colon", []string{"managed_ai:usage:read"}, Scopes{"managed_ai:usage:read"}, ""},
		{"wildcard of a multi-colon resource", []string{"managed_ai:*"}, Scopes{"managed_ai:*"}, ""},
		{"nil", nil, nil, "at least one scope"},
		{"empty list", []string{}, nil, "at least one scope"},
		{"empty string", []string{""}, nil, `unknown scope ""`},
		{"unknown", []string{"bots:delete"}, nil, `unknown scope "bots:delete"`},
		{"unknown among known", []string{"bots:read", "nope:read"}, nil, `unknown scope "nope:read"`},
		{"duplicate", []string{"bots:read", "bots:read"}, nil, `"bots:read" is listed twice`},
		{"duplicate full", []string{"*", "*"}, nil, "listed twice"},
		{"unknown-resource wildcard", []string{"nope:*"}, nil, `unknown scope "nope:*"`},
		{"sub-resource wildcard", []string{"managed_ai:usage:*"}, nil, "unknown scope"},
		{"bare wildcard suffix", []string{":*"}, nil, "unknown scope"},
		{"star star", []string{"*:*"}, nil, "unknown scope"},
		{"case matters", []string{"Bots:read"}, nil, "unknown scope"},
		{"padded", []string{" bots:read"}, nil, "unknown scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ValidateScopes(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestValidateScopesDoesNotReorderCallersSlice(t *testing.T) {
	t.Parallel()
	in := []string{"crm:read", "bots:read"}
	_, err := ValidateScopes(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"crm:read", "bots:read"}, in)
}

func TestKnownScopesIsACopyAndAllValidate(t *testing.T) {
	t.Parallel()
	ks := KnownScopes()
	require.NotEmpty(t, ks)
	assert.True(t, slices.IsSorted(ks), "the catalog is kept sorted")
	for _, s := range ks {
		_, err := ValidateScopes([]string{s})
		assert.NoError(t, err, s)
	}
	ks[0] = "tampered"
	assert.NotEqual(t, "tampered", KnownScopes()[0])
}
