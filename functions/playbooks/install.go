package playbooks

import (
	"encoding/json"
	"time"

	"github.com/botplatform/api/functions/playbooks/catalog"
)

// The statuses of an install.
const (
	StatusSetup      = "setup"
	StatusInstalling = "installing"
	StatusInstalled  = "installed"
	StatusFailed     = "failed"
)

// The states of a journal entry.
const (
	// JournalIntent is written before the create: the resource may or may not exist.
	JournalIntent = "intent"
	// JournalCreated is written after the create: the resource exists, with ID.
	JournalCreated = "created"
	// JournalRolledBack marks an entry whose resource a rollback removed (or found absent).
	JournalRolledBack = "rolled_back"
)

// Install is one playbook being set up in, installed into or failed on a bot.
type Install struct {
	ID         string         `json:"id"`
	BotID      string         `json:"bot_id"`
	PlaybookID string         `json:"playbook_id"`
	Version    int            `json:"version"`
	Status     string         `json:"status"`
	Answers    map[string]any `json:"answers"`
	// Questions are the playbook version's questions, each with whether it is answered:
	// computed on every read.
	Questions []QuestionState `json:"questions"`
	Revision  int64           `json:"revision"`
	// Resources are what the install created, with the fingerprint of each as installed
	// (or as the last upgrade left it): empty until installed.
	Resources []Resource `json:"resources"`
	// Journal is the install's progress, kept while it installs and after a failure: an
	// intent before each create, the id after it, rolled_back once a rollback removed it.
	Journal []JournalEntry `json:"journal"`
	// Error is why the last install attempt failed (null otherwise).
	Error       *Failure   `json:"error"`
	InstalledAt *time.Time `json:"installed_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// record is an install as stored. AccountID names the pointer to delete with it;
// HeartbeatAt is when an installing or upgrading process last wrote its journal: an install
// installing, or upgrading, with a heartbeat older than the stuck time was abandoned by its
// process. Upgrading is the upgrade under way, if any.
type record struct {
	Install
	AccountID   string      `json:"account_id"`
	HeartbeatAt *time.Time  `json:"heartbeat_at,omitempty"`
	Upgrading   *upgradeRun `json:"upgrading,omitempty"`
	// Deleted are the resources (catalog.Ref) an upgrade found the customer had deleted:
	// no longer the install's, and never made again by a later upgrade.
	Deleted []string `json:"deleted,omitempty"`
}

// upgradeRun is an upgrade under way, kept on the install's record from the upgrade's first
// write to its last: the claim that keeps a second upgrade out (409 upgrade_in_progress),
// and the journal an undo follows after a failure or a dead process.
type upgradeRun struct {
	ToVersion int           `json:"to_version"`
	Steps     []upgradeStep `json:"steps"`
}

// upgradeStep is one create or update of an upgrade, journaled as an install's creates are
// (JournalIntent before it, JournalCreated with the id after it, JournalRolledBack once
// undone). Before is an update's resource as the old version rendered it, which an undo
// sets back.
type upgradeStep struct {
	JournalEntry
	Action string          `json:"action"` // ActionCreate or ActionUpdate
	Before json.RawMessage `json:"before,omitempty"`
}

// QuestionState is a question of the install's playbook version with its answer state.
type QuestionState struct {
	catalog.Question
	Answered bool `json:"answered"`
}

// Resource is one thing an install created.
type Resource struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	ID   string `json:"id"`
	Name string `json:"name"`
	// Fingerprint is a hash of the resource as the install (or the last upgrade) left it:
	// an upgrade compares it with the resource's current fingerprint to see a customer's
	// edit.
	Fingerprint string `json:"fingerprint"`
}

// JournalEntry is one create of an install.
type JournalEntry struct {
	Kind  string    `json:"kind"`
	Key   string    `json:"key"`
	Name  string    `json:"name"`
	State string    `json:"state"`
	ID    string    `json:"id,omitempty"`
	At    time.Time `json:"at"`
}

// Failure is why an install attempt failed.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Resource is the resource whose create failed, when one did.
	Resource *JournalEntry `json:"resource,omitempty"`
	At       time.Time     `json:"at"`
}

// DefaultStuckAfter is how long an install may stay installing without writing its journal
// before it counts as abandoned (its process died) and is rolled back, unless
// Config.StuckAfter says otherwise. An install writes its journal around every create, a
// few milliseconds apart, so two minutes of silence is a dead process, not a slow one.
const DefaultStuckAfter = 2 * time.Minute
