package dynamo

import (
	"slices"

	"github.com/botplatform/api/shared/store"
)

// The DynamoDB API actions the Store sends, as IAM names them.
const (
	ActionGetItem            = "dynamodb:GetItem"
	ActionPutItem            = "dynamodb:PutItem"
	ActionDeleteItem         = "dynamodb:DeleteItem"
	ActionUpdateItem         = "dynamodb:UpdateItem"
	ActionConditionCheckItem = "dynamodb:ConditionCheckItem"
	ActionQuery              = "dynamodb:Query"
	ActionBatchGetItem       = "dynamodb:BatchGetItem"
)

// Actions returns the IAM actions on the table that the Store may need to serve one call of
// the store.Store method named method ("Get", "GetMany", "Put", "Delete", "Add", "Query", "Transact";
// writes are a Transact's). It is the Store's own account of what it sends, which the IAM
// table (infra/access) must grant to every Lambda whose code makes the call; the Store's
// tests hold it to what the Store really sends (iam_test.go).
//
// TransactWriteItems has no IAM action of its own: it is authorized per contained write
// (Put: PutItem, Delete: DeleteItem, Check: ConditionCheckItem). An Add is an UpdateItem
// that may become a PutItem when it finds its item expired (and reads the old item with
// GetItem when DynamoDB does not return it); inside a transaction, an UpdateItem or a PutItem.
func Actions(method string, writes []store.Write) []string {
	var out []string
	add := func(a ...string) {
		for _, x := range a {
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	switch method {
	case "Get":
		add(ActionGetItem)
	case "Put":
		add(ActionPutItem)
	case "Delete":
		add(ActionDeleteItem)
	case "Add":
		add(ActionUpdateItem, ActionPutItem, ActionGetItem)
	case "Query":
		add(ActionQuery)
	case "GetMany":
		add(ActionBatchGetItem)
	case "Transact":
		for _, w := range writes {
			switch {
			case w.Put != nil:
				add(ActionPutItem)
			case w.Delete != nil:
				add(ActionDeleteItem)
			case w.Check != nil:
				add(ActionConditionCheckItem)
			case w.Add != nil:
				add(ActionUpdateItem, ActionPutItem)
			}
		}
	}
	slices.Sort(out)
	return out
}
