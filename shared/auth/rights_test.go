package auth

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRightSetJSONRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		set  RightSet
		json string
	}{
		{0, `[]`},
		{RightsOf(RightReactions), `["reactions"]`},
		{RightsOf(RightAnalytics, RightReactions), `["reactions","analytics"]`},
		{AllRightsSet, `["reactions","dialogs","analytics"]`},
	}
	for _, tt := range tests {
		t.Run(tt.json, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.set)
			require.NoError(t, err)
			assert.JSONEq(t, tt.json, string(b))

			var back RightSet
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tt.set, back)
		})
	}
}

func TestRightSetJSONInStructsAndMaps(t *testing.T) {
	t.Parallel()
	u := User{ID: "usr_1", Rights: RightsOf(RightDialogs), BotRights: map[string]RightSet{"bot_1": AllRightsSet}}
	b, err := json.Marshal(u)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"rights":["dialogs"]`)
	assert.Contains(t, string(b), `"bot_rights":{"bot_1":["reactions","dialogs","analytics"]}`)
	var back User
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, u.Rights, back.Rights)
	assert.Equal(t, u.BotRights, back.BotRights)
}

func TestRightSetUnmarshalErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`["reactions","admin"]`, `"reactions"`, `[1]`, `{}`} {
		var s RightSet
		assert.Error(t, json.Unmarshal([]byte(in), &s), in)
	}
	var s RightSet = AllRightsSet
	require.NoError(t, json.Unmarshal([]byte(`null`), &s))
	assert.Equal(t, RightSet(0), s, "null is the empty set")
}

func TestParseRights(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    RightSet
		wantErr bool
	}{
		{"", 0, false},
		{"reactions", RightsOf(RightReactions), false},
		{"reactions,dialogs,analytics", AllRightsSet, false},
		{" analytics , dialogs ", RightsOf(RightAnalytics, RightDialogs), false},
		{"reactions,,dialogs,", RightsOf(RightReactions, RightDialogs), false},
		{"reactions,reactions", RightsOf(RightReactions), false},
		{"admin", 0, true},
		{"reactions,admin", 0, true},
		{"Reactions", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRights(tt.in)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "unknown right")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRightSetMissingHasString(t *testing.T) {
	t.Parallel()
	held := RightsOf(RightReactions)
	assert.Equal(t, []Right{RightDialogs, RightAnalytics}, held.Missing(AllRightsSet))
	assert.Empty(t, held.Missing(RightsOf(RightReactions)))
	assert.Empty(t, held.Missing(0))
	assert.Empty(t, AllRightsSet.Missing(AllRightsSet))
	assert.True(t, held.Has(RightReactions))
	assert.False(t, held.Has(RightDialogs))
	assert.False(t, held.Has("bogus"), "an unknown right is never held")
	assert.False(t, AllRightsSet.Has("bogus"))
	assert.True(t, AllRightsSet.HasAll(held))
	assert.False(t, held.HasAll(AllRightsSet))
	assert.Equal(t, AllRightsSet, held.With(RightDialogs).With(RightAnalytics))
	assert.Equal(t, "reactions, dialogs, analytics", AllRightsSet.String())
	assert.Equal(t, "", RightSet(0).String())
}

func TestPrincipalRightsOn(t *testing.T) {
	t.Parallel()
	const botA, botB = "bot_a", "bot_b"
	tests := []struct {
		name string
		p    Principal
		bot  string
		want RightSet
	}{
		{"owner anywhere", Principal{Kind: KindPAT, Role: RoleOwner}, botA, AllRightsSet},
		{"member without rights", Principal{Kind: KindPAT, Role: RoleMember}, botA, 0},
		{"member account-wide", Principal{Kind: KindPAT, Role: RoleMember, Rights: RightsOf(RightDialogs)}, botB, RightsOf(RightDialogs)},
		{"member per-bot on that bot", Principal{Kind: KindPAT, Role: RoleMember, BotRights: map[string]RightSet{botA: RightsOf(RightAnalytics)}}, botA, RightsOf(RightAnalytics)},
		{"member per-bot elsewhere", Principal{Kind: KindPAT, Role: RoleMember, BotRights: map[string]RightSet{botA: RightsOf(RightAnalytics)}}, botB, 0},
		{"member both add up", Principal{Kind: KindPAT, Role: RoleMember, Rights: RightsOf(RightReactions), BotRights: map[string]RightSet{botA: RightsOf(RightAnalytics)}}, botA, RightsOf(RightReactions, RightAnalytics)},
		{"bot token on its bot", Principal{Kind: KindBot, BotID: botA, Role: RoleMember}, botA, AllRightsSet},
		{"bot token on another bot", Principal{Kind: KindBot, BotID: botA, Role: RoleMember}, botB, 0},
		{"bot token never inherits owner", Principal{Kind: KindBot, BotID: botA, Role: RoleOwner}, botB, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, tt.p.RightsOn(tt.bot))
		})
	}
}

func TestPrincipalContext(t *testing.T) {
	t.Parallel()
	_, ok := FromContext(t.Context())
	assert.False(t, ok)
	p := &Principal{AccountID: "acct_1"}
	got, ok := FromContext(NewContext(t.Context(), p))
	require.True(t, ok)
	assert.Same(t, p, got)
	_, ok = FromContext(NewContext(t.Context(), nil))
	assert.False(t, ok, "a nil principal is no principal")
}
