// Package accesstest holds a family's tests to the IAM table: the store operations the
// tests made (recorded by every store sqlitetest opens, translated into the DynamoDB actions
// the AWS store sends for them) must all be granted on the table to the Lambdas that run
// that family's code. The access table is only ever as right as what checks it: this check
// is what the code actually does, not what someone wrote down.
package accesstest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/botplatform/api/infra/access"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Main is a test binary's TestMain body: it runs the tests and, when they pass, checks what
// they did against the table grants: the operations made as another Lambda
// (sqlitetest.As) against that Lambda's, every other one against the family's Lambda. Use it
// as
//
//	func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "reactions")) }
func Main(m *testing.M, lambda string) int {
	if code := m.Run(); code != 0 {
		return code
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
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "FAIL:", errors.Join(errs...))
		return 1
	}
	return 0
}

// Check returns an error naming every recorded action (with the operation that needed it)
// that none of lambdas is granted on the table.
func Check(recorded map[string]string, lambdas ...string) error {
	granted := map[string]bool{}
	table := access.Access()
	for _, l := range lambdas {
		row, ok := table[l]
		if !ok {
			return fmt.Errorf("accesstest: no Lambda %q in infra/access", l)
		}
		for _, g := range row {
			if g.On == access.Table {
				for _, a := range g.Actions {
					granted[a] = true
				}
			}
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
