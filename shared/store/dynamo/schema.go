package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the table. They are exported so that infra/ declares the table with
// the very names this package reads and writes.
const (
	// AttrPK is the table's partition key (string): store.Key.PK.
	AttrPK = "PK"
	// AttrSK is the table's sort key (string): store.Key.SK.
	AttrSK = "SK"
	// AttrGSI1PK is GSI1's partition key (string): store.Item.GSI1.PK.
	AttrGSI1PK = "GSI1PK"
	// AttrGSI1SK is GSI1's sort key (string). It holds the combined key of
	// store.Item.GSI1.SK, PK and SK, so that ties sort by primary key; see package doc.
	AttrGSI1SK = "GSI1SK"
	// AttrGSI2PK is GSI2's partition key (string): store.Item.GSI2.PK.
	AttrGSI2PK = "GSI2PK"
	// AttrGSI2SK is GSI2's combined sort key (string), like AttrGSI1SK.
	AttrGSI2SK = "GSI2SK"
	// AttrExpires is the TTL attribute (number, Unix seconds); absent means never.
	AttrExpires = "expires"
	// AttrRevision is store.Item.Revision (number); absent reads as 0.
	AttrRevision = "rev"
	// AttrData is store.Item.Data (binary); absent when the document is empty.
	AttrData = "data"
	// AttrCount is store.Item.Count (number), the counter Add maintains.
	AttrCount = "count"
)

// Names of the two global secondary indexes, for store.GSI1 and store.GSI2.
const (
	IndexGSI1 = "GSI1"
	IndexGSI2 = "GSI2"
)

// Schema describes the table a Store needs, for whoever creates it: CreateTable here, the
// CDK stack in infra/. Every key attribute is a string; both indexes project ALL attributes,
// since queries return whole items.
type Schema struct {
	// PartitionKey and SortKey are the table's key attributes.
	PartitionKey string
	SortKey      string
	// Indexes are the global secondary indexes, in store.GSI1, store.GSI2 order.
	Indexes []IndexSchema
	// TTLAttribute is the numeric attribute DynamoDB's TTL sweeper deletes by. Reads filter
	// expired items themselves, since the sweeper runs up to days late.
	TTLAttribute string
}

// IndexSchema describes one global secondary index of Schema.
type IndexSchema struct {
	Name         string
	PartitionKey string
	SortKey      string
}

// TableSchema returns the table's description. It is a function rather than a variable so
// that no caller can change what another one sees.
func TableSchema() Schema {
	return Schema{
		PartitionKey: AttrPK,
		SortKey:      AttrSK,
		Indexes: []IndexSchema{
			{Name: IndexGSI1, PartitionKey: AttrGSI1PK, SortKey: AttrGSI1SK},
			{Name: IndexGSI2, PartitionKey: AttrGSI2PK, SortKey: AttrGSI2SK},
		},
		TTLAttribute: AttrExpires,
	}
}

// CreateTable creates the table on demand (PAY_PER_REQUEST) with both indexes and TTL on
// AttrExpires, and waits until it is ACTIVE. It is meant for tests and local use;
// production tables come from infra/. A table that already exists is accepted when its
// key schema matches TableSchema, so that callers can run it unconditionally.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	sc := TableSchema()
	attrs := []types.AttributeDefinition{
		{AttributeName: aws.String(sc.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(sc.SortKey), AttributeType: types.ScalarAttributeTypeS},
	}
	var gsis []types.GlobalSecondaryIndex
	for _, ix := range sc.Indexes {
		attrs = append(attrs,
			types.AttributeDefinition{AttributeName: aws.String(ix.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			types.AttributeDefinition{AttributeName: aws.String(ix.SortKey), AttributeType: types.ScalarAttributeTypeS})
		gsis = append(gsis, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keySchema(ix.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:              aws.String(table),
		AttributeDefinitions:   attrs,
		KeySchema:              keySchema(sc.PartitionKey, sc.SortKey),
		GlobalSecondaryIndexes: gsis,
		BillingMode:            types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 100*time.Millisecond, 2*time.Second
	})
	desc, err := waiter.WaitForOutput(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("dynamo: create table %s: waiting for ACTIVE: %w", table, err)
	}
	if err := checkSchema(sc, desc.Table); err != nil {
		return fmt.Errorf("dynamo: table %s exists with another schema: %w", table, err)
	}

	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("dynamo: create table %s: describe TTL: %w", table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == sc.TTLAttribute &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(sc.TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("dynamo: create table %s: enable TTL: %w", table, err)
	}
	return nil
}

func keySchema(pk, sk string) []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
	}
}

// checkSchema compares the keys of an existing table with the schema: a table made by
// something else would fail every write in confusing ways, so say so up front.
func checkSchema(sc Schema, t *types.TableDescription) error {
	if t == nil {
		return errors.New("no table description")
	}
	keysOf := func(ks []types.KeySchemaElement) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = string(k.KeyType) + " " + aws.ToString(k.AttributeName)
		}
		slices.Sort(out)
		return out
	}
	want := keysOf(keySchema(sc.PartitionKey, sc.SortKey))
	if got := keysOf(t.KeySchema); !slices.Equal(got, want) {
		return fmt.Errorf("key schema %v, want %v", got, want)
	}
	for _, ix := range sc.Indexes {
		i := slices.IndexFunc(t.GlobalSecondaryIndexes, func(g types.GlobalSecondaryIndexDescription) bool {
			return aws.ToString(g.IndexName) == ix.Name
		})
		if i < 0 {
			return fmt.Errorf("no index %s", ix.Name)
		}
		g := t.GlobalSecondaryIndexes[i]
		want := keysOf(keySchema(ix.PartitionKey, ix.SortKey))
		if got := keysOf(g.KeySchema); !slices.Equal(got, want) {
			return fmt.Errorf("index %s key schema %v, want %v", ix.Name, got, want)
		}
		if g.Projection == nil || g.Projection.ProjectionType != types.ProjectionTypeAll {
			return fmt.Errorf("index %s does not project ALL attributes", ix.Name)
		}
	}
	return nil
}
