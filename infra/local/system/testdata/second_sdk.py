"""The running system through another SDK: boto3 (botocore checks each
DynamoDB response's CRC32) and plain HTTP, as an outside client sees it.

Reads SHOPSTREAM_* variables set by TestSecondSDK; prints one line per check;
exits non-zero on the first failure.
"""
import gzip
import json
import os
import sys
import time
import urllib.error
import urllib.request

import boto3
from botocore.config import Config

env = os.environ
CFG = Config(region_name="us-east-1", retries={"max_attempts": 2, "mode": "standard"})
CREDS = dict(aws_access_key_id="local", aws_secret_access_key="local")
ddb = boto3.client("dynamodb", endpoint_url=env["SHOPSTREAM_DYNAMODB"], config=CFG, **CREDS)
streams = boto3.client("dynamodbstreams", endpoint_url=env["SHOPSTREAM_DYNAMODB"], config=CFG, **CREDS)
s3 = boto3.client("s3", endpoint_url=env["SHOPSTREAM_S3"], config=Config(region_name="us-east-1", s3={"addressing_style": "path"}), **CREDS)
api = env["SHOPSTREAM_API"]
bucket = env["SHOPSTREAM_BUCKET"]
carts = env["SHOPSTREAM_CARTS_TABLE"]


def check(cond, what):
    if not cond:
        print("FAIL", what)
        sys.exit(1)
    print("ok  ", what)


def eventually(what, fn, timeout=30):
    deadline = time.time() + timeout
    while True:
        got = fn()
        if got:
            check(True, what)
            return got
        if time.time() > deadline:
            check(False, what + " (timed out)")
        time.sleep(0.2)


# DynamoDB: tables, streams and TTL as the definitions declare them.
names = []
for page in ddb.get_paginator("list_tables").paginate():
    names += page["TableNames"]
want = env["SHOPSTREAM_TABLES"].split(",")
check(set(want) <= set(names), "list_tables has every table: %s" % ",".join(want))
desc = ddb.describe_table(TableName=carts)["Table"]
check(desc["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}, "carts stream NEW_AND_OLD_IMAGES")
ttl = ddb.describe_time_to_live(TableName=carts)["TimeToLiveDescription"]
check(ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}, "carts TTL on expiresAt")

# A transaction refused by its condition: reasons in action order.
try:
    ddb.transact_write_items(TransactItems=[
        {"ConditionCheck": {"TableName": carts, "Key": {"userId": {"S": "nobody"}},
                            "ConditionExpression": "attribute_exists(userId)"}},
    ])
    check(False, "transaction with a failing condition is cancelled")
except ddb.exceptions.TransactionCanceledException as e:
    codes = [r["Code"] for r in e.response["CancellationReasons"]]
    check(codes == ["ConditionalCheckFailed"], "TransactionCanceledException with reasons %s" % codes)

# TTL: an expired cart is swept; its REMOVE carries the service identity.
user = "second-sdk-%d" % os.getpid()
ddb.put_item(TableName=carts, Item={
    "userId": {"S": user}, "version": {"N": "1"}, "updatedAt": {"S": "2026-01-01T00:00:00Z"},
    "lines": {"M": {"p1": {"M": {"quantity": {"N": "2"}, "addedAt": {"S": "2026-01-01T00:00:00Z"}}}}},
    "expiresAt": {"N": str(int(time.time()) - 60)},
})
eventually("the sweeper removed the expired cart",
           lambda: "Item" not in ddb.get_item(TableName=carts, Key={"userId": {"S": user}}, ConsistentRead=True))


def ttl_remove():
    arn = ddb.describe_table(TableName=carts)["Table"]["LatestStreamArn"]
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for _ in range(20):
            out = streams.get_records(ShardIterator=it, Limit=1000)
            for r in out["Records"]:
                if r["eventName"] == "REMOVE" and r["dynamodb"]["Keys"] == {"userId": {"S": user}}:
                    return r
            it = out.get("NextShardIterator")
            if not it or not out["Records"]:
                break
    return None


rec = eventually("the REMOVE record is in the carts stream", ttl_remove)
check(rec.get("userIdentity") == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"},
      "REMOVE userIdentity is the TTL service: %s" % rec.get("userIdentity"))
check(rec["dynamodb"]["OldImage"]["userId"] == {"S": user}, "REMOVE carries the old image")

# S3: the archiver wrote the removal, as docs/contract.md#4-archive shapes it.
day = time.strftime("year=%Y/month=%m/day=%d", time.gmtime())


def archived_line():
    for obj in s3.list_objects_v2(Bucket=bucket, Prefix="carts/").get("Contents", []):
        if not obj["Key"].startswith("carts/%s/" % day) or not obj["Key"].endswith(".jsonl.gz"):
            continue
        body = gzip.decompress(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
        for line in body.decode().splitlines():
            doc = json.loads(line)
            if doc["eventId"] == rec["eventID"]:
                return doc
    return None


line = eventually("the cart is archived under carts/%s/" % day, archived_line)
check(set(line) == {"eventId", "table", "keys", "item", "removedAt"}, "archive line fields: %s" % sorted(line))
check(line["table"] == "carts" and line["keys"] == {"userId": user}, "archive line table and keys")
check(line["item"]["lines"]["p1"]["quantity"] == 2, "archive item is plain JSON with exact numbers")
s3.put_object(Bucket=bucket, Key="second-sdk/hello.txt", Body=b"hello")
check(s3.get_object(Bucket=bucket, Key="second-sdk/hello.txt")["Body"].read() == b"hello", "S3 put and get")
s3.delete_object(Bucket=bucket, Key="second-sdk/hello.txt")

# The HTTP API as a client without a token sees it.
with urllib.request.urlopen(api + "/healthz") as r:
    check(r.status == 200 and json.load(r) == {"status": "ok"}, "GET /healthz")
try:
    urllib.request.urlopen(api + "/users/" + user)
    check(False, "a protected route without a token is refused")
except urllib.error.HTTPError as e:
    check(e.code == 401 and json.load(e) == {"message": "Unauthorized"}, "401 from the gateway, its own body")
