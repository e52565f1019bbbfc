// Package accesstest holds a family's tests to the IAM table: the store operations the
// tests made (recorded by every store sqlitetest opens, translated into the DynamoDB actions
// the AWS store sends for them) must all be granted on the table to the Lambdas that run
// that family's code. The access table is only ever as right as what checks it: this check
// is what the code actually does, not what someone wrote down.
package accesstest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/botplatform/api/infra/access"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Main is a test binary's TestMain body: it runs the tests and, when they pass, checks what
// they did against the table grants: the operations made as another Lambda
// (sqlitetest.As) against that Lambda's, every other one against the family's Lambda. So
// are the seals and opens of secrets (secretstest): each must be granted the KMS action it
// needs on the secrets key under its purpose (CheckKMS). Use it as
//
//	func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "reactions")) }
//
// With KMSComplete, the family's Lambda must also hold no grant on the secrets key that the
// tests did not need (UnusedKMS), when they all ran (not under -run, -skip or -fuzz).
func Main(m *testing.M, lambda string, opts ...Option) int {
	if code := m.Run(); code != 0 {
		return code
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var errs []error
	for as, recorded := range sqlitetest.Actions() {
		if as == "" {
			as = lambda
		}
		if err := Check(recorded, as); err != nil {
			errs = append(errs, err)
		}
	}
	uses := secretstest.Uses()
	for as, recorded := range uses {
		if as == "" {
			as = lambda
		}
		if err := CheckKMS(recorded, as); err != nil {
			errs = append(errs, err)
		}
	}
	if o.kmsComplete && !partial() {
		if err := UnusedKMS(uses[""], lambda); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL:", errors.Join(errs...))
		return 1
	}
	return 0
}

// partial reports whether the binary ran only some of its tests (-run, -skip, a fuzz target,
// -list): then what they did not need proves nothing superfluous.
func partial() bool {
	for _, name := range []string{"test.run", "test.skip", "test.fuzz", "test.list"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return true
		}
	}
	return false
}

// Option is an option of Main.
type Option func(*options)

type options struct{ kmsComplete bool }

// KMSComplete declares that the binary's tests exercise, with recording sealers, every seal
// and open of secrets the family's Lambda makes on AWS: then Main also fails when that
// Lambda is granted the secrets key for an action or purpose they never needed. Only a
// binary whose family's code is all its Lambda runs, and whose tests reach every sealer
// that code holds, may declare it: a use left to a fake would read as a superfluous grant.
func KMSComplete() Option { return func(o *options) { o.kmsComplete = true } }

// Check returns an error naming every recorded action (with the operation that needed it)
// that none of lambdas is granted on the table.
func Check(recorded map[string]string, lambdas ...string) error {
	grants, err := grantsOn(access.Table, lambdas)
	if err != nil {
		return err
	}
	granted := map[string]bool{}
	for _, g := range grants {
		for _, a := range g.Actions {
			granted[a] = true
		}
	}
	var missing []string
	for a, op := range recorded {
		if !granted[a] {
			missing = append(missing, fmt.Sprintf("%s (needed by %s)", a, op))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("the tests did what the IAM table (infra/access) does not grant the %s Lambda on the table: %s",
		strings.Join(lambdas, " or "), strings.Join(missing, "; "))
}

// CheckKMS returns an error naming every recorded use of the secrets key (with the seal or
// open that made it) that none of lambdas is granted: a grant on access.SecretsKey of its
// action, unconditioned or conditioned on its encryption context purpose.
func CheckKMS(recorded map[secretstest.Use]string, lambdas ...string) error {
	grants, err := grantsOn(access.SecretsKey, lambdas)
	if err != nil {
		return err
	}
	var missing []string
	for u, op := range recorded {
		if !slices.ContainsFunc(grants, func(g access.Grant) bool { return covers(g, u) }) {
			missing = append(missing, fmt.Sprintf("%s under purpose %s (needed by %s)", u.Action, u.Purpose, op))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	return fmt.Errorf("the tests did what the IAM table (infra/access) does not grant the %s Lambda on the secrets key: %s",
		strings.Join(lambdas, " or "), strings.Join(missing, "; "))
}

// covers reports whether g grants u: its action on the secrets key, with no condition or
// with the encryption context condition of u's purpose. A grant under any other condition
// covers nothing: this check knows no other.
func covers(g access.Grant, u secretstest.Use) bool {
	if g.On != access.SecretsKey || !slices.Contains(g.Actions, u.Action) {
		return false
	}
	return g.If == (access.Condition{}) || g.If == (access.Condition{Key: kms.ContextCondition, Value: u.Purpose})
}

// UnusedKMS returns an error naming every action, under its condition, that lambda is
// granted on the secrets key and that no recorded use needed: a conditioned action no use of
// its purpose needed, or an unconditioned one whose uses a conditioned grant covers (then
// the narrower grant is what the code needs). A grant the code does not use is one an
// attacker in the Lambda could.
func UnusedKMS(recorded map[secretstest.Use]string, lambda string) error {
	grants, err := grantsOn(access.SecretsKey, []string{lambda})
	if err != nil {
		return err
	}
	// One grant per action, so that each is weighed alone.
	var each []access.Grant
	for _, g := range grants {
		for _, a := range g.Actions {
			each = append(each, access.Grant{On: g.On, Actions: []string{a}, If: g.If})
		}
	}
	var unused []string
	for _, g := range each {
		needed := false
		for u := range recorded {
			// A conditioned grant is needed by a use of its purpose; an unconditioned one
			// only by a use no conditioned grant covers: the narrower grant is the one a
			// use proves.
			if covers(g, u) && (g.If != (access.Condition{}) ||
				!slices.ContainsFunc(each, func(o access.Grant) bool { return o.If != (access.Condition{}) && covers(o, u) })) {
				needed = true
				break
			}
		}
		if !needed {
			unused = append(unused, describe(g.Actions[0], g.If))
		}
	}
	if len(unused) == 0 {
		return nil
	}
	slices.Sort(unused)
	return fmt.Errorf("the IAM table (infra/access) grants the %s Lambda on the secrets key what its tests never needed: %s",
		lambda, strings.Join(unused, "; "))
}

// describe names action under condition c.
func describe(action string, c access.Condition) string {
	if c == (access.Condition{}) {
		return action + " under any purpose"
	}
	return action + " if " + c.Key + " = " + c.Value
}

// grantsOn returns the grants on resource of lambdas' rows in the access table.
func grantsOn(resource access.Resource, lambdas []string) ([]access.Grant, error) {
	table := access.Access()
	var out []access.Grant
	for _, l := range lambdas {
		row, ok := table[l]
		if !ok {
			return nil, fmt.Errorf("accesstest: no Lambda %q in infra/access", l)
		}
		for _, g := range row {
			if g.On == resource {
				out = append(out, g)
			}
		}
	}
	return out, nil
}
