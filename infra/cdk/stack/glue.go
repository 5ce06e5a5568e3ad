package stack

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsglue"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/tables"
)

// ArchiveColumn is one column of an archive table: one of the archive line's
// fields (docs/contract.md#4-archive), lower case (the JSON SerDe matches keys
// case-insensitively).
type ArchiveColumn struct{ Name, Type string }

// archiveItemTypes are the Hive types of the archived items, by table: the
// fields of shared/orders.Order and shared/carts.Cart as the archiver writes
// them (plain JSON).
var archiveItemTypes = map[string]string{
	tables.Orders: "struct<userid:string,orderid:string,status:string," +
		"lines:array<struct<productid:string,productname:string,unitpricecents:bigint,quantity:int>>," +
		"totalcents:bigint,createdat:string,updatedat:string,version:bigint,expiresat:bigint>",
	tables.Carts: "struct<userid:string,updatedat:string,version:bigint,expiresat:bigint>",
}

// ArchiveColumns returns the columns of the archive table of an archived
// table, partition keys excluded.
func ArchiveColumns(table string) []ArchiveColumn {
	def, _ := tables.ByName(table)
	keys := []string{strings.ToLower(def.PartitionKey.Name) + ":string"}
	if def.SortKey != nil {
		keys = append(keys, strings.ToLower(def.SortKey.Name)+":string")
	}
	return []ArchiveColumn{
		{"eventid", "string"},
		// "table" is a reserved word in Athena's SQL: the column is
		// source_table, mapped to the line's "table".
		{"source_table", "string"},
		{"keys", "struct<" + strings.Join(keys, ",") + ">"},
		{"item", archiveItemTypes[table]},
		{"removedat", "string"},
	}
}

// ArchivePartitionKeys are the archive's Hive partitions, docs/contract.md#4-archive.
var ArchivePartitionKeys = []string{"year", "month", "day"}

// ArchiveDatabase is the Glue database of a stage's archive tables: Glue
// and Athena names take no hyphens.
func ArchiveDatabase(cfg Config) string { return strings.ReplaceAll(cfg.Name, "-", "_") + "_archive" }

// archiveCatalog declares a Glue database and one table per archived table
// over the archive bucket, with partition projection on year/month/day:
// Athena computes the partitions from the table's properties and the query's
// filters, so no crawler and no partition to add as days go by.
func (b *builder) archiveCatalog() {
	db := ArchiveDatabase(b.cfg)
	database := awsglue.NewCfnDatabase(b.s.Stack, jsii.String("ArchiveDatabase"), &awsglue.CfnDatabaseProps{
		CatalogId: b.s.Stack.Account(),
		DatabaseInput: &awsglue.CfnDatabase_DatabaseInputProperty{
			Name:        jsii.String(db),
			Description: jsii.String("shopstream " + b.cfg.Stage + ": what TTL removed from the hot tables, for Athena"),
		},
	})
	bucket := *b.s.Archive.BucketName()
	for _, tn := range ArchivedTables() {
		var cols []*awsglue.CfnTable_ColumnProperty
		for _, c := range ArchiveColumns(tn) {
			cols = append(cols, &awsglue.CfnTable_ColumnProperty{Name: jsii.String(c.Name), Type: jsii.String(c.Type)})
		}
		var parts []*awsglue.CfnTable_ColumnProperty
		for _, p := range ArchivePartitionKeys {
			parts = append(parts, &awsglue.CfnTable_ColumnProperty{Name: jsii.String(p), Type: jsii.String("string")})
		}
		location := "s3://" + bucket + "/" + tn + "/"
		table := awsglue.NewCfnTable(b.s.Stack, jsii.String(constructID(tn)+"ArchiveTable"), &awsglue.CfnTableProps{
			CatalogId:    b.s.Stack.Account(),
			DatabaseName: jsii.String(db),
			TableInput: &awsglue.CfnTable_TableInputProperty{
				Name:          jsii.String(strings.ReplaceAll(tn, "-", "_")),
				Description:   jsii.String("archived " + tn + ": gzip JSON Lines, one line per item TTL removed"),
				TableType:     jsii.String("EXTERNAL_TABLE"),
				PartitionKeys: &parts,
				Parameters: &map[string]any{
					"classification":            "json",
					"compressionType":           "gzip",
					"typeOfData":                "file",
					"projection.enabled":        "true",
					"projection.year.type":      "integer",
					"projection.year.range":     ArchiveYears,
					"projection.month.type":     "integer",
					"projection.month.range":    "1,12",
					"projection.month.digits":   "2",
					"projection.day.type":       "integer",
					"projection.day.range":      "1,31",
					"projection.day.digits":     "2",
					"storage.location.template": location + "year=${year}/month=${month}/day=${day}/",
				},
				StorageDescriptor: &awsglue.CfnTable_StorageDescriptorProperty{
					Columns:      &cols,
					Location:     jsii.String(location),
					InputFormat:  jsii.String("org.apache.hadoop.mapred.TextInputFormat"),
					OutputFormat: jsii.String("org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"),
					SerdeInfo: &awsglue.CfnTable_SerdeInfoProperty{
						SerializationLibrary: jsii.String("org.openx.data.jsonserde.JsonSerDe"),
						Parameters: &map[string]any{
							"mapping.source_table":  "table",
							"ignore.malformed.json": "false",
						},
					},
				},
			},
		})
		table.AddDependency(database)
	}
	awscdk.NewCfnOutput(b.s.Stack, jsii.String(OutputArchiveDatabase), &awscdk.CfnOutputProps{
		Value:       jsii.String(db),
		Description: jsii.String("Glue database of the archive tables (Athena)"),
	})
}

// ArchiveYears is the projected range of the year partition: Athena lists
// every projected partition a query does not filter out, so a query should
// filter on year (and month) as docs/operations.md shows.
const ArchiveYears = "2025,2099"

// OutputArchiveDatabase names the output holding the archive's Glue database.
const OutputArchiveDatabase = "ArchiveDatabaseName"
