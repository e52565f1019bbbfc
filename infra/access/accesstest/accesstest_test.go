package accesstest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	assert.NoError(t, Check(map[string]string{"dynamodb:GetItem": "Get a/b"}, "authorizer"))
	err := Check(map[string]string{"dynamodb:GetItem": "Get a/b", "dynamodb:UpdateItem": "Transact: Add x/y"}, "authorizer")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dynamodb:UpdateItem (needed by Transact: Add x/y)")
	assert.NotContains(t, err.Error(), "GetItem")
	assert.NoError(t, Check(map[string]string{"dynamodb:UpdateItem": "Add"}, "authorizer", "jobs"), "either Lambda may hold it")
	assert.Error(t, Check(nil, "nobody"))
}

func TestCheckKMS(t *testing.T) {
	t.Parallel()
	open := secretstest.Use{Action: secretstest.ActionOpen, Purpose: kms.PurposeSecrets}
	seal := secretstest.Use{Action: secretstest.ActionSeal, Purpose: kms.PurposeSecrets}
	crmOpen := secretstest.Use{Action: secretstest.ActionOpen, Purpose: kms.PurposeCRMCredentials}

	assert.NoError(t, CheckKMS(map[secretstest.Use]string{open: "Open ch_1/credentials"}, "broadcasts"))
	err := CheckKMS(map[secretstest.Use]string{open: "Open ch_1/credentials", seal: "Seal ch_1/credentials"}, "broadcasts")
	require.Error(t, err, "broadcasts is granted Decrypt alone")
	assert.Contains(t, err.Error(), "kms:GenerateDataKey under purpose botplatform-secrets (needed by Seal ch_1/credentials)")
	assert.NotContains(t, err.Error(), "kms:Decrypt")

	err = CheckKMS(map[secretstest.Use]string{open: "Open ch_1/credentials"}, "pats")
	require.Error(t, err, "no grant on the secrets key at all")
	assert.Contains(t, err.Error(), "kms:Decrypt under purpose botplatform-secrets")

	// A grant conditioned on the CRM purpose covers that purpose and no other.
	assert.NoError(t, CheckKMS(map[secretstest.Use]string{crmOpen: "Open crm"}, "crm"))
	err = CheckKMS(map[secretstest.Use]string{open: "Open ch_1/credentials"}, "crm")
	require.Error(t, err, "the crm Lambda may not open a channel's credentials")
	assert.Contains(t, err.Error(), "kms:Decrypt under purpose botplatform-secrets")
	// An unconditioned grant covers every purpose.
	assert.NoError(t, CheckKMS(map[secretstest.Use]string{crmOpen: "Open crm"}, "channels"))
	assert.NoError(t, CheckKMS(map[secretstest.Use]string{crmOpen: "Open crm"}, "pats", "jobs"), "either Lambda may hold it")
	assert.Error(t, CheckKMS(nil, "nobody"))
}

func TestUnusedKMS(t *testing.T) {
	t.Parallel()
	open := secretstest.Use{Action: secretstest.ActionOpen, Purpose: kms.PurposeSecrets}
	seal := secretstest.Use{Action: secretstest.ActionSeal, Purpose: kms.PurposeSecrets}
	crmOpen := secretstest.Use{Action: secretstest.ActionOpen, Purpose: kms.PurposeCRMCredentials}
	crmSeal := secretstest.Use{Action: secretstest.ActionSeal, Purpose: kms.PurposeCRMCredentials}

	assert.NoError(t, UnusedKMS(map[secretstest.Use]string{open: "o", seal: "s"}, "channels"))
	assert.NoError(t, UnusedKMS(nil, "pats"), "no grant, nothing unused")
	err := UnusedKMS(map[secretstest.Use]string{open: "o"}, "channels")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kms:GenerateDataKey under any purpose")
	assert.NotContains(t, err.Error(), "kms:Decrypt")

	// Uses of the CRM purpose alone prove the grants under its condition, not the
	// unconditioned ones beside them.
	err = UnusedKMS(map[secretstest.Use]string{crmOpen: "o", crmSeal: "s"}, "meta")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kms:Decrypt under any purpose")
	assert.Contains(t, err.Error(), "kms:GenerateDataKey under any purpose")
	assert.NotContains(t, err.Error(), "if kms:EncryptionContext:purpose")
	assert.NoError(t, UnusedKMS(map[secretstest.Use]string{crmOpen: "o", crmSeal: "s", open: "o", seal: "s"}, "meta"))
	err = UnusedKMS(map[secretstest.Use]string{open: "o", seal: "s"}, "meta")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "kms:Decrypt if kms:EncryptionContext:purpose = botplatform-crm-credentials")
	assert.Error(t, UnusedKMS(nil, "nobody"))
}
